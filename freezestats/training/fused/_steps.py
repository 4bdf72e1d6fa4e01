"""The fused training steps: K runs' batches stacked, one forward and backward, one optimizer step for all.

Each run keeps what makes it that run: its data order (its own generator, :func:`~freezestats.training.data_orders`),
its dropout generator, its batch; and what the protocol keeps per run: its loss, its gradient norm (clipped to
``max_grad_norm`` by its own norm, as ``clip_grad_norm_`` clips a lone run), its AdamW moments. AdamW is
elementwise, so one fused AdamW over the stacked parameters is K independent ones; the learning-rate schedule
is the same function of the step for every run of a cell (same rate, same train size). A run whose loss stops
being finite leaves the batch before the update: its slices of the parameters, gradients and moments are
dropped, and the others continue as if it had never been there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from freezestats.encoder.prefix_cache import pad_hidden
from freezestats.exceptions import TrialFailed
from freezestats.spec.training import TrainingSpec
from freezestats.training import _encoding
from freezestats.training._encoding import EncodedSplit
from freezestats.training._loop import Schedule, _adamw
from freezestats.training._prefix import FrozenPrefix
from freezestats.training.fused._stacked import RunDropout, StackedBert

__all__ = ["FusedSteps", "RunSlot"]


@dataclass
class RunSlot:
    """One run in the batch: where it came from (``index`` in the caller's list), its data, its progress."""

    index: int
    train: EncodedSplit
    orders: Iterator[list[int]]
    on_step: Callable[[int, int], None] | None = None
    permutation: list[int] = field(default_factory=list)
    loss: float = float("nan")
    failure: TrialFailed | None = None


@dataclass
class FusedSteps:
    """Trains the runs of ``slots`` (all alive at the start) together on ``model``."""

    model: StackedBert
    slots: list[RunSlot]
    dropout: RunDropout
    tokenizer: Any
    training: TrainingSpec
    device: torch.device
    regression: bool
    prefix: FrozenPrefix
    autocast: Callable[[], AbstractContextManager[Any]]
    failed: list[RunSlot] = field(default_factory=list)

    def run(self, learning_rate: float, schedule: Schedule, evaluate: Callable[[int, list[RunSlot]], None]) -> int:
        """Train for ``schedule.total_steps`` (or until every run failed); returns the steps taken.

        ``evaluate(step, slots)`` is called where the schedule evaluates, with the runs still alive.
        """
        from transformers import get_linear_schedule_with_warmup

        params = list(self.model.stacked.values())
        optimizer = _adamw(params, learning_rate, self.training.weight_decay)
        scheduler = get_linear_schedule_with_warmup(optimizer, schedule.warmup_steps, schedule.total_steps)
        size, n_train = self.training.batch_size, len(self.slots[0].train)
        step = 0
        while step < schedule.total_steps and self.slots:
            for slot in self.slots:
                slot.permutation = next(slot.orders)
            for start in range(0, n_train, size):
                if step >= schedule.total_steps or not self.slots:
                    break
                losses = self.batch_losses([slot.permutation[start : start + size] for slot in self.slots])
                self._update(losses, optimizer, params, step, schedule.total_steps)
                if not self.slots:
                    break
                scheduler.step()
                step += 1
                if schedule.evaluates_at(step):
                    evaluate(step, self.slots)
                for slot in self.slots:
                    if slot.on_step is not None:
                        slot.on_step(step, schedule.total_steps)
        return step

    def _update(
        self,
        losses: torch.Tensor,
        optimizer: torch.optim.Optimizer,
        params: list[torch.nn.Parameter],
        step: int,
        total: int,
    ) -> None:
        """Backward on the finite losses, drop the runs whose loss is not, clip each run by its norm, step."""
        values = losses.detach().float().tolist()
        finite = [i for i, value in enumerate(values) if torch.isfinite(torch.tensor(value))]
        optimizer.zero_grad(set_to_none=True)
        if finite:
            losses[finite].sum().backward()
        if len(finite) < len(values):
            for i, value in enumerate(values):
                if i not in finite:
                    self.slots[i].failure = TrialFailed(
                        f"The training loss became {value} at step {step + 1} of {total}."
                    )
                    self.failed.append(self.slots[i])
            self._keep(finite, optimizer, params)
            values = [values[i] for i in finite]
        if not self.slots:
            return
        if self.training.max_grad_norm > 0:
            _clip_per_run(params, self.training.max_grad_norm)
        optimizer.step()
        for slot, value in zip(self.slots, values, strict=True):
            slot.loss = value

    def _keep(self, index: list[int], optimizer: torch.optim.Optimizer, params: list[torch.nn.Parameter]) -> None:
        """Keep the runs ``index``: their parameter, gradient and AdamW-moment slices, generators and slots.

        ``params`` (the optimizer's list) is updated in place to the kept runs' new parameters.
        """
        moved = self.model.keep(index)
        rows = torch.as_tensor(index, dtype=torch.long, device=self.device)
        state = optimizer.state
        for old, new in moved.items():
            if old in state:
                kept = state.pop(old)
                state[new] = {
                    name: value.index_select(0, rows) if torch.is_tensor(value) and value.dim() > 0 else value
                    for name, value in kept.items()
                }
        params[:] = [moved[p] for p in params]
        optimizer.param_groups[0]["params"] = list(params)
        self.dropout.keep(index)
        self.slots = [self.slots[i] for i in index]

    def batch_losses(self, batches: list[list[int]]) -> torch.Tensor:
        """Each run's mean loss on its own batch (``batches[k]`` indexes run k's train split), in train mode."""
        features = [slot.train.features[i] for slot, batch in zip(self.slots, batches, strict=True) for i in batch]
        padded = _encoding.collate(self.tokenizer, features, self.device)
        runs, size = len(batches), len(batches[0])
        inputs = {name: value.view(runs, size, -1) for name, value in padded.items()}
        length = inputs["input_ids"].shape[-1]
        self.dropout.lengths = inputs["attention_mask"].sum(dim=-1).amax(dim=-1).tolist()
        label_dtype = torch.float32 if self.regression else torch.long
        labels = torch.stack(
            [
                torch.as_tensor(slot.train.labels[batch], dtype=label_dtype, device=self.device)
                for slot, batch in zip(self.slots, batches, strict=True)
            ]
        )
        hidden, start = None, None
        if self.prefix.train_hidden is not None:
            ids = [slot.train.example_ids() for slot in self.slots]
            states = [self.prefix.train_hidden[int(ids[k][i])] for k, batch in enumerate(batches) for i in batch]
            hidden, start = pad_hidden(states, length).view(runs, size, length, -1), self.prefix.depth
        quiet = 0 if not self.prefix.no_dropout or self.prefix.depth is None else self.prefix.depth + 1
        with self.autocast():
            logits = self.model.logits(inputs, start, hidden, self.dropout, quiet)
        if self.regression:
            return (logits[..., 0].float() - labels).pow(2).mean(dim=-1)
        per_example = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), reduction="none")
        return per_example.view(runs, size).mean(dim=-1)


def _clip_per_run(params: list[torch.nn.Parameter], max_norm: float) -> None:
    """``clip_grad_norm_`` for each run's slice: its own total norm over every parameter, its own factor."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    norms = torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads])
    factor = torch.clamp(max_norm / (torch.linalg.vector_norm(norms, dim=0) + 1e-6), max=1.0)
    for grad in grads:
        grad.mul_(factor.view(-1, *([1] * (grad.dim() - 1))))

"""The training steps: AdamW, linear warm-up then linear decay, gradient clipping, evaluation on a schedule.

The protocol is the 2020 blog post's (HF ``Trainer`` defaults). The loop knows nothing of arms, metrics or
what is recorded: it asks the evaluator to evaluate every ``eval_every_epochs`` and at the last step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import torch

from freezestats.encoder.freezing import EncoderParts
from freezestats.encoder.prefix_cache import forward_from, pad_hidden
from freezestats.exceptions import TrialFailed
from freezestats.spec.training import TrainingSpec
from freezestats.training import _encoding
from freezestats.training._encoding import EncodedSplit
from freezestats.training._prefix import FrozenPrefix

__all__ = ["Schedule", "TrainingSteps"]


@dataclass(frozen=True)
class Schedule:
    """Step counts of a run, from the train size and the protocol (fractions of an epoch round to steps)."""

    steps_per_epoch: int
    total_steps: int
    warmup_steps: int
    eval_interval: int

    @classmethod
    def of(cls, n_train: int, training: TrainingSpec) -> Schedule:
        return cls.of_steps(math.ceil(n_train / training.batch_size), training)

    @classmethod
    def of_steps(cls, steps_per_epoch: int, training: TrainingSpec) -> Schedule:
        """The schedule of a run whose epoch is ``steps_per_epoch`` batches (a task group's: every task's)."""
        return cls(
            steps_per_epoch=steps_per_epoch,
            total_steps=max(1, round(training.epochs * steps_per_epoch)),
            warmup_steps=round(training.warmup_epochs * steps_per_epoch),
            eval_interval=max(1, round(training.eval_every_epochs * steps_per_epoch)),
        )

    def evaluates_at(self, step: int) -> bool:
        return step % self.eval_interval == 0 or step == self.total_steps


@dataclass
class TrainingSteps:
    """Trains ``model`` on ``train``: one optimizer step per batch, in the order ``epoch_orders`` gives."""

    model: torch.nn.Module
    parts: EncoderParts
    train: EncodedSplit
    tokenizer: Any
    training: TrainingSpec
    device: torch.device
    precision: str
    regression: bool
    prefix: FrozenPrefix
    autocast: Callable[[], AbstractContextManager[Any]]

    def __post_init__(self) -> None:
        self._train_ids = self.train.example_ids()  # the keys of prefix.train_hidden

    def run(
        self,
        learning_rate: float,
        schedule: Schedule,
        epoch_orders: Iterator[list[int]],
        evaluate: Callable[[int, float], None],
        on_step: Callable[[int, int], None] | None = None,
    ) -> tuple[int, float]:
        """Train for ``schedule.total_steps``; returns (steps taken, the last step's training loss).

        ``evaluate(step, train_loss)`` is called where the schedule evaluates, ``on_step(step, total)``
        after every step. Raises :class:`TrialFailed` when the loss stops being finite.
        """
        from transformers import get_linear_schedule_with_warmup

        params = [p for p in self.model.parameters() if p.requires_grad]
        optimizer = _adamw(params, learning_rate, self.training.weight_decay)
        scheduler = get_linear_schedule_with_warmup(optimizer, schedule.warmup_steps, schedule.total_steps)
        scaler = torch.amp.GradScaler("cuda") if self.precision == "fp16" else None
        step, loss_value = 0, float("nan")
        while step < schedule.total_steps:
            permutation = next(epoch_orders)
            for start in range(0, len(permutation), self.training.batch_size):
                if step >= schedule.total_steps:
                    break
                loss = self.batch_loss(permutation[start : start + self.training.batch_size])
                if not torch.isfinite(loss):
                    raise TrialFailed(
                        f"The training loss became {loss.item()} at step {step + 1} of {schedule.total_steps}."
                    )
                _update(loss, params, optimizer, scaler, self.training.max_grad_norm)
                scheduler.step()
                step += 1
                loss_value = float(loss.detach())
                if schedule.evaluates_at(step):
                    evaluate(step, loss_value)
                if on_step is not None:
                    on_step(step, schedule.total_steps)
        return step, loss_value

    def batch_loss(self, batch_idx: list[int]) -> torch.Tensor:
        """The loss on one batch, in train mode (frozen modules in eval mode with ``frozen_dropout = "off"``)."""
        batch = _encoding.collate(self.tokenizer, [self.train.features[i] for i in batch_idx], self.device)
        label_dtype = torch.float32 if self.regression else torch.long
        labels = torch.as_tensor(self.train.labels[batch_idx], dtype=label_dtype, device=self.device)
        self.model.train()
        for module in self.prefix.no_dropout:
            module.eval()
        with self.autocast():
            if self.prefix.train_hidden is not None:
                states = [self.prefix.train_hidden[int(self._train_ids[i])] for i in batch_idx]
                hidden = pad_hidden(states, batch["input_ids"].shape[1])
                return forward_from(self.model, self.parts, batch, self.prefix.depth, hidden, labels=labels).loss
            return self.model(**batch, labels=labels).loss


def _update(
    loss: torch.Tensor,
    params: list[torch.nn.Parameter],
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None,
    max_grad_norm: float,
) -> None:
    """Backward, clip the gradient norm (unscaled first under fp16), step."""
    optimizer.zero_grad(set_to_none=True)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
    else:
        loss.backward()
    if max_grad_norm > 0:
        torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()


def _adamw(params: list[torch.nn.Parameter], learning_rate: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW, fused where torch has the kernel: the same update as HF Trainer's default (``adamw_torch_fused``
    since torch 2.8), about 11% of a MiniLM training step faster on CPU than the per-tensor loop."""
    try:
        return torch.optim.AdamW(params, lr=learning_rate, weight_decay=weight_decay, fused=True)
    except (RuntimeError, TypeError):  # older torch: no fused kernel for this device
        return torch.optim.AdamW(params, lr=learning_rate, weight_decay=weight_decay)

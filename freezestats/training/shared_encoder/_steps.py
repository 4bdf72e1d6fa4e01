"""The training steps of a task group: one optimizer step per mixed batch, honouring ``freeze_for``.

Under ``freeze_for = "all"`` the frozen layers have ``requires_grad = False`` for good, and the group
trains exactly like a single task: one AdamW over every trainable parameter, the same warm-up and decay,
the same clipping. Under a list of tasks the frozen layers are trainable, but they sit in an AdamW of their
own that is stepped only on the batches of the tasks *not* in the list. Not stepping is what "no update"
needs: AdamW moves a parameter whose gradient is zero (its momentum carries on, weight decay shrinks it),
whereas a parameter its optimizer does not step keeps its weights and its moments bit for bit. On the
listed tasks' batches those layers also get ``requires_grad = False``, so no gradient is computed for them
and the clipping norm is that of the parameters the step updates, as when they are frozen outright.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from freezestats.exceptions import TrialFailed
from freezestats.spec.training import TrainingSpec
from freezestats.training._loop import Schedule, TrainingSteps, _adamw

__all__ = ["GroupSteps"]


@dataclass
class GroupSteps:
    """Trains a :class:`~freezestats.training.shared_encoder.model.SharedEncoderModel` on ``(task, batch)`` steps."""

    model: torch.nn.Module
    losses: Mapping[str, TrainingSteps]
    """Per task, the single-task steps on that task's classifier and data (its ``batch_loss``)."""
    training: TrainingSpec
    precision: str
    learning_rate: float
    schedule: Schedule
    shared_frozen: Sequence[torch.nn.Parameter]
    """The frozen layers' parameters when they train for some tasks (``freeze_for`` a list), else empty."""
    frozen_for: Callable[[str], bool]
    task_steps: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        from transformers import get_linear_schedule_with_warmup

        held = {id(p) for p in self.shared_frozen}
        self.params = [p for p in self.model.parameters() if p.requires_grad and id(p) not in held]
        self.optimizer = _adamw(self.params, self.learning_rate, self.training.weight_decay)
        self.frozen_optimizer = (
            _adamw(list(self.shared_frozen), self.learning_rate, self.training.weight_decay)
            if self.shared_frozen
            else None
        )
        self.scheduler = get_linear_schedule_with_warmup(
            self.optimizer, self.schedule.warmup_steps, self.schedule.total_steps
        )
        self.scaler = torch.amp.GradScaler("cuda") if self.precision == "fp16" else None

    def run(
        self,
        batches: Iterator[tuple[str, list[int]]],
        evaluate: Callable[[int, Mapping[str, float]], None],
        on_step: Callable[[int, int], None] | None = None,
    ) -> tuple[int, dict[str, float]]:
        """Train for ``schedule.total_steps``; returns (steps taken, each task's last training loss).

        ``evaluate(step, last_losses)`` is called where the schedule evaluates, ``on_step(step, total)``
        after every step.
        """
        step, last = 0, {}
        while step < self.schedule.total_steps:
            task, batch = next(batches)
            last[task] = self.step(task, batch, step)
            step += 1
            if self.schedule.evaluates_at(step):
                evaluate(step, last)
            if on_step is not None:
                on_step(step, self.schedule.total_steps)
        return step, last

    def step(self, task: str, batch: list[int], step: int = 0) -> float:
        """One optimizer step on ``task``'s ``batch``; returns its loss.

        Raises :class:`TrialFailed` when the loss is not finite.
        """
        update_frozen = self.frozen_optimizer is not None and not self.frozen_for(task)
        for p in self.shared_frozen:
            p.requires_grad_(update_frozen)
        loss = self.losses[task].batch_loss(batch)
        if not torch.isfinite(loss):
            raise TrialFailed(
                f"The training loss of task '{task}' became {loss.item()} at step {step + 1} of "
                f"{self.schedule.total_steps}."
            )
        active = [self.optimizer]
        if update_frozen and self.frozen_optimizer is not None:
            for group in self.frozen_optimizer.param_groups:  # the same warm-up and decay as the rest
                group["lr"] = self.optimizer.param_groups[0]["lr"]
            active.append(self.frozen_optimizer)
        self._update(loss, active)
        self.scheduler.step()
        self.task_steps[task] += 1
        return float(loss.detach())

    def _update(self, loss: torch.Tensor, active: list[torch.optim.Optimizer]) -> None:
        """Backward, clip the norm of the stepped parameters (unscaled first under fp16), step ``active``."""
        for optimizer in (self.optimizer, self.frozen_optimizer):
            if optimizer is not None:
                optimizer.zero_grad(set_to_none=True)
        scaler = self.scaler
        if scaler is not None:
            scaler.scale(loss).backward()
            for optimizer in active:
                scaler.unscale_(optimizer)
        else:
            loss.backward()
        if self.training.max_grad_norm > 0:
            stepped = [p for optimizer in active for group in optimizer.param_groups for p in group["params"]]
            torch.nn.utils.clip_grad_norm_(stepped, self.training.max_grad_norm)
        for optimizer in active:
            if scaler is not None:
                scaler.step(optimizer)
            else:
                optimizer.step()
        if scaler is not None:
            scaler.update()


def last_loss(losses: Mapping[str, float], task: str) -> float:
    """``task``'s last training loss (``nan`` before its first step)."""
    return losses.get(task, math.nan)

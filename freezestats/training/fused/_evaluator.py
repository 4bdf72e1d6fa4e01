"""Evaluation of K fused runs: the validation set is the same for every run, so each of its batches (and the
frozen prefix's output on it, from the cache) is read once; on a GPU it runs through all K runs' trained layers in
one batched pass, on a CPU through each run's in turn (stacked, it was slower there than the lone runs; see
:meth:`FusedEvaluator.predict`). Each run then keeps its own learning curve and checkpoints, exactly as a lone
run's :class:`~freezestats.training._evaluator.Evaluator` keeps them (the same class records them).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
import torch

from freezestats.tasks import TaskConfig
from freezestats.training._evaluator import Evaluator, _to_predictions
from freezestats.training._prefix import FrozenPrefix
from freezestats.training.fused._stacked import StackedBert
from freezestats.training.fused._steps import RunSlot
from freezestats.training.predictions import Checkpoint

__all__ = ["FusedEvaluator", "RunCurve"]


class RunCurve(Evaluator):
    """One run's learning curve and checkpoints, fed with logits computed elsewhere (by :class:`FusedEvaluator`)."""

    def __init__(
        self,
        *,
        task: TaskConfig,
        metric: str,
        labels: np.ndarray,
        select_idx: np.ndarray,
        score_idx: np.ndarray,
        steps_per_epoch: int,
    ) -> None:
        super().__init__(
            None,  # type: ignore[arg-type]  # no model: the logits come from the fused pass
            None,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            task=task,
            metric=metric,
            labels=labels,
            select_idx=select_idx,
            score_idx=score_idx,
            steps_per_epoch=steps_per_epoch,
        )

    def __call__(self, step: int, train_loss: float) -> None:  # pragma: no cover - guards misuse
        raise TypeError("A fused run's curve is fed with record(step, train_loss, logits).")

    def record(self, step: int, train_loss: float, logits: np.ndarray) -> None:
        """Add a point to the curve from this run's logits on the whole validation set."""
        predictions = _to_predictions(logits, self.task)
        self.evaluated.append(Checkpoint(step, predictions, logits))
        self.curve.append(self._point(predictions, step, train_loss))


class FusedEvaluator:
    """Called as ``evaluator(step, slots)`` by :class:`~freezestats.training.fused._steps.FusedSteps`."""

    def __init__(
        self,
        model: StackedBert,
        prefix: FrozenPrefix,
        autocast: Callable[[], AbstractContextManager[Any]],
        curves: dict[int, RunCurve],
        n_examples: int,
    ) -> None:
        self.model, self.prefix, self.autocast = model, prefix, autocast
        self.curves, self.n_examples = curves, n_examples

    def __call__(self, step: int, slots: list[RunSlot]) -> None:
        """Predict the validation set with every run still in the batch; each run's curve gets its point."""
        self.model.eval()
        logits = self.predict()
        self.model.train()
        for k, slot in enumerate(slots):
            self.curves[slot.index].record(step, slot.loss, logits[k])

    @torch.no_grad()
    def predict(self) -> np.ndarray:
        """Logits ``(K, examples, labels)`` in the split's order; with the cache, only the trained layers run.

        On a GPU the K runs go through each batch together. On a CPU each run goes through alone
        (:meth:`~freezestats.training.fused._stacked.StackedBert.alone`), as its lone run would: stacked there,
        an evaluation was 1.35x slower than K lone ones, which already run near the matrix-product peak.
        """
        result: np.ndarray | None = None
        hidden = self.prefix.eval_hidden
        runs = [None] if next(iter(self.model.stacked.values())).is_cuda else range(self.model.k)
        for i, batch in enumerate(self.prefix.batches):
            inputs = {name: value.unsqueeze(0) for name, value in batch.inputs.items()}
            state = None if hidden is None else hidden[i].unsqueeze(0)
            values = np.concatenate([self._logits(inputs, state, run) for run in runs])
            if result is None:
                result = np.empty((values.shape[0], self.n_examples, values.shape[2]), dtype=values.dtype)
            result[:, np.asarray(batch.positions)] = values
        assert result is not None
        return result

    def _logits(self, inputs: dict[str, torch.Tensor], hidden: torch.Tensor | None, run: int | None) -> np.ndarray:
        """One batch's logits, of every run (``run`` None) or of run ``run`` alone (``(1, B, labels)``)."""
        with self.autocast(), nullcontext() if run is None else self.model.alone(run):
            if hidden is not None:
                logits = self.model.logits(inputs, self.prefix.depth, hidden)
            else:
                logits = self.model.logits(inputs)
        return logits.float().cpu().numpy()

"""The evaluator: the learning curve, and the checkpoints whose predictions the study keeps.

At every evaluation the model predicts the whole validation set; each point of the curve holds every task
metric on the whole set and the primary one on the two fixed halves (``select`` chooses, ``score`` scores:
the unbiased ``heldout`` metric). After training, the best, heldout-chosen and final checkpoints are picked
from the kept predictions, so no checkpoint is written to disk.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import torch

from freezestats.encoder.freezing import EncoderParts
from freezestats.encoder.prefix_cache import EvalBatch, forward_from
from freezestats.tasks import TaskConfig
from freezestats.tasks.curve import CurveSummary, summarize_curve
from freezestats.tasks.metrics import compute_metrics
from freezestats.training._prefix import FrozenPrefix
from freezestats.training.predictions import Checkpoint

__all__ = ["Evaluator"]


class Evaluator:
    """Called as ``evaluator(step, train_loss)`` by the training steps; read with :meth:`summary` afterwards."""

    def __init__(
        self,
        model: torch.nn.Module,
        parts: EncoderParts,
        prefix: FrozenPrefix,
        autocast: Callable[[], AbstractContextManager[Any]],
        *,
        task: TaskConfig,
        metric: str,
        labels: np.ndarray,
        select_idx: np.ndarray,
        score_idx: np.ndarray,
        steps_per_epoch: int,
        pool: list[EvalBatch] | None = None,
    ) -> None:
        self.model, self.parts, self.prefix, self.autocast = model, parts, prefix, autocast
        self.pool = pool  # the evaluation pool's batches: scored once, at the checkpoint chosen on the select half
        self._chosen: dict[str, torch.Tensor] | None = None  # that checkpoint's trainable weights
        self.task, self.metric, self.labels = task, metric, labels
        self.select_idx, self.score_idx = select_idx, score_idx
        self.steps_per_epoch = steps_per_epoch
        self.curve: list[dict[str, Any]] = []
        self.evaluated: list[Checkpoint] = []  # one per curve point; 20 small arrays, picked from after training

    def __call__(self, step: int, train_loss: float) -> None:
        """Predict the validation set now and add a point to the curve."""
        self.model.eval()
        with self.autocast():
            logits = _predict(
                self.model,
                self.parts,
                self.prefix.batches,
                len(self.labels),
                self.prefix.depth,
                self.prefix.eval_hidden,
            )
        predictions = _to_predictions(logits, self.task)
        self.evaluated.append(Checkpoint(step, predictions, logits))
        self.curve.append(self._point(predictions, step, train_loss))
        if self.pool is not None and self.summary().heldout_step == len(self.curve) - 1:
            self._chosen = _trainable(self.model)  # the select half's choice so far: keep its weights

    def pool_predictions(self) -> np.ndarray | None:
        """The pool's predictions at the checkpoint chosen on the select half (``None`` without a pool).

        Its weights were kept when it was chosen, so the pool is scored once per run rather than at every
        evaluation; the model's last weights are put back afterwards. Every layer runs (no frozen-prefix cache):
        the pool is seen once."""
        if self.pool is None:
            return None
        if self._chosen is None:  # no evaluation chose a checkpoint (an empty curve): nothing to score
            raise RuntimeError("the evaluation pool is scored at the chosen checkpoint, but none was chosen")
        last = _trainable(self.model)
        _load(self.model, self._chosen)
        self.model.eval()
        n = sum(len(batch.positions) for batch in self.pool)
        with self.autocast():
            logits = _predict(self.model, self.parts, self.pool, n, None, None)
        _load(self.model, last)
        return _to_predictions(logits, self.task)

    def summary(self) -> CurveSummary:
        """Best, final and heldout values of the primary metric, and where on the curve they were."""
        curve = self.curve
        return summarize_curve(
            [point["full"] for point in curve],
            [point["select"] for point in curve],
            [point["score"] for point in curve],
        )

    def checkpoints(self, summary: CurveSummary) -> dict[str, Checkpoint]:
        """The checkpoints each stored metric scored: ``best``, ``heldout`` and ``final``."""
        return {
            "best": self.evaluated[summary.best_step],
            "heldout": self.evaluated[summary.heldout_step],
            "final": self.evaluated[-1],
        }

    def _point(self, predictions: np.ndarray, step: int, train_loss: float) -> dict[str, Any]:
        """One point of the learning curve: every task metric on the whole set, the primary one on both halves."""
        metric, labels = self.metric, self.labels
        metrics = compute_metrics(self.task.metrics, predictions, labels)
        select, score = self.select_idx, self.score_idx
        return {
            "step": step,
            "epoch": round(step / self.steps_per_epoch, 4),
            "train_loss": train_loss,
            "metrics": metrics,
            "full": metrics[metric],
            "select": compute_metrics([metric], predictions[select], labels[select])[metric],
            "score": compute_metrics([metric], predictions[score], labels[score])[metric],
        }


@torch.no_grad()
def _predict(
    model: torch.nn.Module,
    parts: EncoderParts,
    batches: list[EvalBatch],
    n_examples: int,
    depth: int | None,
    hidden: list[torch.Tensor] | None,
) -> np.ndarray:
    """Logits for every example, in the split's order; with ``hidden``, only the unfrozen layers run."""
    result: np.ndarray | None = None
    for i, batch in enumerate(batches):
        if hidden is not None:
            logits = forward_from(model, parts, batch.inputs, depth, hidden[i]).logits
        else:
            logits = model(**batch.inputs).logits
        values = logits.float().cpu().numpy()
        if result is None:
            result = np.empty((n_examples, values.shape[1]), dtype=values.dtype)
        result[np.asarray(batch.positions)] = values
    return result


def _trainable(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}


@torch.no_grad()
def _load(model: torch.nn.Module, weights: dict[str, torch.Tensor]) -> None:
    for name, p in model.named_parameters():
        if name in weights:
            p.copy_(weights[name])


def _to_predictions(logits: np.ndarray, task: TaskConfig) -> np.ndarray:
    return logits[:, 0].astype(np.float64) if task.is_regression else logits.argmax(axis=1).astype(np.int64)

"""What a run keeps of its checkpoints: the per-example predictions table and the counts per checkpoint.

Every metric a run reports scores one checkpoint: ``best_dev`` the best one on the whole validation set,
``heldout`` the one chosen on the select half (scored on the score half), ``final_dev`` the last one. The
statistics need the predictions of *that* checkpoint: a binomial model needs its correct/total counts, a
failure rule its predicted-class mix, item-level resampling its per-example correctness. Storing only the
final checkpoint's predictions (as freezestats did before) would force a second run of the whole study.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from freezestats.tasks.metrics import count_correct

__all__ = ["CHECKPOINTS", "Checkpoint", "checkpoint_counts", "predictions_frame"]

#: The checkpoints whose predictions a run keeps, one per stored metric: ``best`` maximises the whole
#: validation set (``best_dev``), ``heldout`` maximises the select half (``heldout`` scores it on the other
#: half), ``final`` is the last step (``final_dev``).
CHECKPOINTS = ("best", "heldout", "final")


@dataclass(frozen=True)
class Checkpoint:
    """Per-example predictions and logits of one evaluated checkpoint, in the validation split's order."""

    step: int
    predictions: np.ndarray
    logits: np.ndarray


def predictions_frame(checkpoints: dict[str, Checkpoint], labels: np.ndarray, select_idx: np.ndarray) -> pd.DataFrame:
    """One row per validation example: its label, its half, and each checkpoint's prediction and logits.

    Columns: ``idx, label, half`` (``select``/``score``), then ``prediction`` and ``logit_<j>`` for the final
    checkpoint (the layout of earlier studies, kept so their readers still work), then
    ``prediction_<name>`` and ``logit_<name>_<j>`` for ``best`` and ``heldout``. Which evaluation each
    checkpoint was is in the trial's attributes (``best_step``/``heldout_step`` index the curve).
    """
    half = np.full(len(labels), "score", dtype=object)
    half[np.asarray(select_idx, dtype=int)] = "select"
    frame = pd.DataFrame({"idx": np.arange(len(labels)), "label": labels, "half": half})
    for name in CHECKPOINTS:
        point = checkpoints[name]
        suffix = "" if name == "final" else f"_{name}"
        frame[f"prediction{suffix}"] = point.predictions
        for j in range(point.logits.shape[1]):
            frame[f"logit{suffix}_{j}"] = point.logits[:, j]
    return frame


def checkpoint_counts(
    checkpoints: dict[str, Checkpoint], labels: np.ndarray, score_idx: np.ndarray, regression: bool
) -> dict[str, Any]:
    """Correct/total counts and the largest predicted-class share of each checkpoint, on what its metric scores.

    ``best`` and ``final`` are scored on the whole validation set; ``heldout`` on the score half only, so its
    counts are over that half (``n_eval_heldout``). Regression tasks have no counts (``None``).
    """
    score_idx = np.asarray(score_idx, dtype=int)
    record: dict[str, Any] = {"n_eval": len(labels), "n_eval_heldout": len(score_idx)}
    for name in CHECKPOINTS:
        predictions = checkpoints[name].predictions
        scored, truth = (predictions[score_idx], labels[score_idx]) if name == "heldout" else (predictions, labels)
        column = "n_correct" if name == "final" else f"n_correct_{name}"
        record[column] = None if regression else count_correct(scored, truth)
        record[f"top_class_share_{name}"] = None if regression else _top_class_share(scored)
    return record


def _top_class_share(predictions: np.ndarray) -> float:
    """Share of the predictions taken by the most frequent predicted class (1.0: a constant predictor)."""
    _, counts = np.unique(predictions, return_counts=True)
    return float(counts.max() / counts.sum())

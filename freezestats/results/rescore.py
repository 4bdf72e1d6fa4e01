"""The runs scored again on another metric, from their stored per-item predictions.

A study records each run on the metric its spec named (the blog protocol scores CoLA by accuracy, as the blog
did), but a task is judged on its own metric: CoLA by Matthews correlation, as GLUE and every paper that reports
it do. Accuracy on CoLA's imbalanced dev set rewards the majority class (69%), so "every run stays at the
majority class" can be an artefact of the metric. The per-item predictions each run keeps at its ``best``,
``heldout`` and ``final`` checkpoints (:mod:`freezestats.results.item_predictions`) are enough to score the same
checkpoints on any metric, without re-running anything.

What they cannot do is choose the checkpoints again: ``best`` and ``heldout`` were chosen on the run's own
metric. :func:`rescore_runs` therefore records which metric chose them (``selected_on``), and the analysis
scores a re-scored task at its last checkpoint unless told otherwise.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from freezestats.exceptions import ModelFitError
from freezestats.tasks.metrics import METRICS

__all__ = ["RESCORED_COLUMNS", "rescore_runs"]

#: The response columns a re-scoring replaces, with the checkpoint predictions and the items each one scores.
RESCORED_COLUMNS = {
    "best_dev": ("prediction_best", None),
    "final_dev": ("prediction_final", None),
    "heldout": ("prediction_heldout", "score"),
}
#: The share of each checkpoint's predictions its most predicted class takes (the dominant-class failure
#: rule reads it), recomputed with the scores so that a re-scored table is judged on the same predictions.
TOP_CLASS_COLUMNS = {"best_dev": "top_class_share_best", "final_dev": "top_class_share_final",
                     "heldout": "top_class_share_heldout"}  # fmt: skip


def rescore_runs(runs: pd.DataFrame, items: pd.DataFrame, metric: str) -> pd.DataFrame:
    """``runs`` with ``best_dev``, ``final_dev``, ``heldout`` and ``majority_baseline`` on ``metric``.

    Each response is the metric of the run's predictions at that checkpoint, on the items that response
    scores (the whole validation set; the score half for ``heldout``). ``metric`` becomes the new metric,
    ``selected_on`` keeps the one that chose the ``best`` and ``heldout`` checkpoints, and the checkpoints'
    ``top_class_share_*`` are recomputed from the same predictions (the dominant-class failure rule reads them).
    The majority baseline is the metric of the constant prediction of the majority class (the class whose share
    of the validation labels is the stored accuracy baseline when there is one, else the validation majority):
    0 for MCC, Pearson and Spearman by their constant-prediction convention.

    Raises :class:`~freezestats.exceptions.ModelFitError` for an unknown metric or a run without predictions.
    """
    if metric not in METRICS:
        raise ModelFitError(f"Cannot score runs on {metric!r}: the metrics are {sorted(METRICS)}.")
    scorer = METRICS[metric]
    by_trial = {int(t): run.sort_values("idx") for t, run in items.groupby("trial", sort=False)}
    missing = sorted(set(runs["trial"].astype(int)) - set(by_trial))
    if missing:
        raise ModelFitError(
            f"Scoring on {metric} needs every run's per-item predictions, but {len(missing)} run(s) have none "
            f"(trials {missing[:5]}{' ...' if len(missing) > 5 else ''})."
        )
    out = runs.copy()
    for column, (prediction, half) in RESCORED_COLUMNS.items():
        values, shares = [], []
        for trial in out["trial"].astype(int):
            run = by_trial[trial]
            scored = run if half is None else run[run["half"] == half]
            predicted = scored[prediction].to_numpy()
            values.append(float(scorer(predicted, scored["label"].to_numpy())))
            shares.append(float(pd.Series(predicted).value_counts(normalize=True).iloc[0]))
        out[column] = values
        out[TOP_CLASS_COLUMNS[column]] = shares
    out["majority_baseline"] = [_constant_baseline(by_trial[int(r["trial"])], r, scorer) for _, r in out.iterrows()]
    out["selected_on"] = runs["metric"] if "metric" in runs.columns else "unknown"
    out["metric"] = metric
    return out


def _constant_baseline(run: pd.DataFrame, row: pd.Series, scorer: object) -> float:
    """The metric of predicting one class for every validation item: the class the stored accuracy baseline
    names (the training majority), else the validation majority."""
    labels = run["label"].to_numpy()
    classes, counts = np.unique(labels, return_counts=True)
    majority = classes[int(np.argmax(counts))]
    if str(row.get("metric", "")) == "accuracy" and pd.notna(row.get("majority_baseline")):
        shares = counts / counts.sum()
        match = np.flatnonzero(np.isclose(shares, float(row["majority_baseline"]), atol=1e-9))
        if match.size:
            majority = classes[int(match[0])]
    return float(scorer(np.full(len(labels), majority), labels))  # type: ignore[operator]

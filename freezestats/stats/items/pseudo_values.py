"""Jackknife pseudo-values: each validation item's share of a run's metric, so that any metric becomes a mean.

Item-sampling noise is a variance over items, and a variance over items needs the metric written as an
average of per-item terms. Accuracy already is one (the item is right or wrong). MCC, F1 and Pearson are not,
but their jackknife pseudo-values are (Quenouille 1956; Efron & Stein 1981): for a metric :math:`M` on
:math:`I` items,

.. math:: \\phi_i = I\\,M - (I - 1)\\,M_{(-i)}

where :math:`M_{(-i)}` leaves item :math:`i` out. The mean of the :math:`\\phi_i` is the jackknife estimate
of :math:`M`, and their sample variance over :math:`I` is the jackknife variance: the influence-function
linearisation of :math:`M` in the items. For accuracy :math:`\\phi_i` is exactly the item's correctness.

Leave-one-out is computed in closed form from sufficient statistics (confusion counts, moment sums), so a
350-run study costs milliseconds; other metrics fall back to recomputing :math:`M_{(-i)}` item by item.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from freezestats.exceptions import ModelFitError
from freezestats.tasks.metrics import METRICS

__all__ = ["pseudo_values"]


def pseudo_values(metric: str, predictions: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per-item jackknife pseudo-values of ``metric`` for one run (same order as ``labels``).

    Raises :class:`~freezestats.exceptions.ModelFitError` for an unknown metric or fewer than 2 items.
    """
    if metric not in METRICS:
        raise ModelFitError(f"pseudo_values: `metric` must be one of {sorted(METRICS)}, but got {metric!r}.")
    pred = np.asarray(predictions)
    ref = np.asarray(labels)
    if pred.shape != ref.shape or pred.ndim != 1 or len(ref) < 2:
        raise ModelFitError(
            f"pseudo_values: predictions and labels must be 1-d of one length >= 2, but got shapes {pred.shape} "
            f"and {ref.shape}."
        )
    n = len(ref)
    full = METRICS[metric](pred, ref)
    if metric == "accuracy":
        return (pred == ref).astype(float)
    binary = set(np.unique(np.concatenate([pred, ref])).tolist()) <= {0, 1}
    closed: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {"pearson": _loo_pearson}
    if binary:
        closed.update(mcc=_loo_mcc, f1=_loo_f1)
    loo = closed[metric](pred, ref) if metric in closed else _loo_generic(METRICS[metric], pred, ref)
    return n * full - (n - 1) * loo


def _confusion_loo(pred: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, ...]:
    """Binary confusion counts (tp, fp, fn, tn) with each item in turn left out."""
    p = pred.astype(int) == 1
    r = ref.astype(int) == 1
    counts = np.array([np.sum(p & r), np.sum(p & ~r), np.sum(~p & r), np.sum(~p & ~r)], dtype=float)
    cell = np.where(p & r, 0, np.where(p & ~r, 1, np.where(~p & r, 2, 3)))
    loo = np.repeat(counts[None, :], len(p), axis=0)
    loo[np.arange(len(p)), cell] -= 1.0
    return loo[:, 0], loo[:, 1], loo[:, 2], loo[:, 3]


def _loo_mcc(pred: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Leave-one-out binary MCC; 0 where undefined, as :func:`freezestats.tasks.metrics.mcc`."""
    tp, fp, fn, tn = _confusion_loo(pred, ref)
    denom = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = (tp * tn - fp * fn) / np.sqrt(denom)
    return np.where(denom > 0, np.clip(value, -1.0, 1.0), 0.0)


def _loo_f1(pred: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Leave-one-out F1 of the positive class; 0 where undefined, as :func:`freezestats.tasks.metrics.f1`."""
    tp, fp, fn, _ = _confusion_loo(pred, ref)
    denom = 2 * tp + fp + fn
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denom > 0, 2 * tp / denom, 0.0)


def _loo_pearson(pred: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Leave-one-out Pearson correlation from moment sums (centred first, for accuracy); 0 where constant."""
    x = pred.astype(float) - pred.mean()
    y = ref.astype(float) - ref.mean()
    m = len(x) - 1.0
    sx, sy = x.sum() - x, y.sum() - y
    sxx, syy, sxy = (x * x).sum() - x * x, (y * y).sum() - y * y, (x * y).sum() - x * y
    vx, vy, cxy = sxx - sx * sx / m, syy - sy * sy / m, sxy - sx * sy / m
    with np.errstate(divide="ignore", invalid="ignore"):
        value = cxy / np.sqrt(vx * vy)
    return np.where((vx > 1e-12 * max(1.0, (x * x).sum())) & (vy > 1e-12 * max(1.0, (y * y).sum())), value, 0.0)


def _loo_generic(metric: Callable[..., float], pred: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Leave-one-out by recomputing the metric without each item (spearman, multi-class metrics)."""
    keep = np.ones(len(ref), dtype=bool)
    out = np.empty(len(ref))
    for i in range(len(ref)):
        keep[i] = False
        out[i] = metric(pred[keep], ref[keep])
        keep[i] = True
    return out

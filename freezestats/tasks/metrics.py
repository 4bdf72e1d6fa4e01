"""GLUE metrics, majority baselines, and honest summaries of a validation curve.

Every metric is written out with numpy/scipy rather than imported from scikit-learn so that this
module stays light and its edge-case conventions are explicit and in one place; the test-suite
cross-checks each one against its scikit-learn / scipy reference. The metrics are the ones GLUE
reports per task (Wang et al., 2019, "GLUE: A Multi-Task Benchmark and Analysis Platform for
Natural Language Understanding", Table 1): accuracy, F1 on the positive class (MRPC, QQP), Matthews
correlation (CoLA) and Pearson/Spearman correlation (STS-B).

Two conventions matter for fine-tuning studies, where collapsed runs are common (Mosbach et al.,
2021, "On the Stability of Fine-tuning BERT"):

* A metric that is mathematically undefined on degenerate input (constant predictions, a constant
  reference) is reported as ``0.0`` -- the score of a predictor carrying no information -- instead
  of ``nan``. This is scikit-learn's convention for MCC and F1, and we extend it to the correlations
  so that a collapsed run enters aggregate statistics as "no skill" rather than poisoning a mean.
* ``nan`` *inputs* (e.g. a regression head that diverged) propagate to a ``nan`` correlation; the
  curve summary treats ``nan`` as the worst possible score and :func:`is_failed_run` flags it.

:func:`summarize_curve` (in :mod:`freezestats.tasks.curve`, re-exported here) separates the number that
blog posts report, the best validation score over training, from an unbiased held-out estimate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from freezestats.exceptions import SpecError
from freezestats.tasks.curve import CurveSummary, summarize_curve
from freezestats.tasks.macro_f1 import macro_f1
from freezestats.tasks.metric_inputs import as_pair as _as_pair

__all__ = [
    "CLASSIFICATION_METRICS",
    "METRICS",
    "METRIC_RANGES",
    "REGRESSION_METRICS",
    "CurveSummary",
    "accuracy",
    "compute_metrics",
    "count_correct",
    "f1",
    "is_failed_run",
    "macro_f1",
    "majority_baseline",
    "mcc",
    "pearson",
    "spearman",
    "summarize_curve",
]

#: Standard deviation below which regression predictions count as constant (a collapsed head).
_CONSTANT_STD = 1e-8


# --------------------------------------------------------------------------------------------------
# Input checking
# --------------------------------------------------------------------------------------------------


def _is_constant(x: np.ndarray) -> bool:
    """Exact constancy test (``nan`` never counts as constant).

    Compared with ``x.std() == 0`` this does not depend on rounding in the mean: the mean of ``n``
    copies of ``0.1`` need not equal ``0.1`` exactly, which would turn a constant vector into tiny
    non-zero deviations and a meaningless correlation.
    """
    return bool(np.all(x == x[0]))


# --------------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------------


def accuracy(pred: Sequence | np.ndarray, ref: Sequence | np.ndarray) -> float:
    """Fraction of examples whose predicted class equals the reference class.

    Parameters
    ----------
    pred, ref
        Predicted and gold class ids, 1-D and of equal length.

    Returns
    -------
    float
        In ``[0, 1]``. Equals ``sklearn.metrics.accuracy_score(ref, pred)``.
    """
    p, r = _as_pair(pred, ref)
    return float(np.mean(p == r))


def count_correct(pred: Sequence | np.ndarray, ref: Sequence | np.ndarray) -> int:
    """Number of examples whose predicted class equals the reference class.

    Kept as an integer (rather than ``accuracy * n``) because exact counts are what binomial
    models and paired tests (e.g. McNemar) consume, and floats would need rounding back.
    """
    p, r = _as_pair(pred, ref)
    return int(np.count_nonzero(p == r))


def mcc(pred: Sequence | np.ndarray, ref: Sequence | np.ndarray) -> float:
    """Matthews correlation coefficient, multi-class form (Gorodkin, 2004).

    This is CoLA's official metric because accuracy is misleading on its 70/30 label imbalance
    (Warstadt et al., 2019). With the confusion matrix ``C`` (rows = reference), ``t = C.sum(1)``,
    ``p = C.sum(0)``, ``c = trace(C)`` and ``n = C.sum()``::

        MCC = (c*n - t.p) / sqrt((n^2 - p.p) * (n^2 - t.t))

    which reduces to the familiar ``(TP*TN - FP*FN) / sqrt(...)`` for two classes.

    Returns
    -------
    float
        In ``[-1, 1]``; ``0.0`` when undefined, i.e. when the predictions or the references take a
        single value (the denominator vanishes). That is scikit-learn's convention
        (``sklearn.metrics.matthews_corrcoef``), and it matches the intuition that a constant
        predictor has no skill.
    """
    p, r = _as_pair(pred, ref)
    _, codes = np.unique(np.concatenate([r, p]), return_inverse=True)
    codes = codes.reshape(-1)
    n = r.shape[0]
    r_codes, p_codes = codes[:n], codes[n:]
    k = int(codes.max()) + 1
    # Float arithmetic: n^2 overflows int64 only for n > 3e9, but products of sums of squares can
    # get large, and the square root needs floats anyway.
    t_sum = np.bincount(r_codes, minlength=k).astype(np.float64)
    p_sum = np.bincount(p_codes, minlength=k).astype(np.float64)
    n_correct = float(np.count_nonzero(r_codes == p_codes))
    n_f = float(n)
    cov_tp = n_correct * n_f - float(t_sum @ p_sum)
    cov_pp = n_f * n_f - float(p_sum @ p_sum)
    cov_tt = n_f * n_f - float(t_sum @ t_sum)
    denom = cov_pp * cov_tt
    if denom == 0.0:
        return 0.0
    return float(np.clip(cov_tp / np.sqrt(denom), -1.0, 1.0))


def f1(pred: Sequence | np.ndarray, ref: Sequence | np.ndarray) -> float:
    """Binary F1 score of the positive class ``1`` (MRPC's and QQP's GLUE metric).

    ``F1 = 2 TP / (2 TP + FP + FN)``: the harmonic mean of precision and recall, written in the form
    that needs no intermediate division.

    Returns
    -------
    float
        In ``[0, 1]``; ``0.0`` when undefined (no positive predictions and no positive references),
        as ``sklearn.metrics.f1_score(ref, pred, zero_division=0)``.
    """
    p, r = _as_pair(pred, ref)
    p_pos = p == 1
    r_pos = r == 1
    tp = int(np.count_nonzero(p_pos & r_pos))
    fp = int(np.count_nonzero(p_pos & ~r_pos))
    fn = int(np.count_nonzero(~p_pos & r_pos))
    denom = 2 * tp + fp + fn
    if denom == 0:
        return 0.0
    return 2.0 * tp / denom


def pearson(pred: Sequence | np.ndarray, ref: Sequence | np.ndarray) -> float:
    """Pearson correlation between predictions and references (STS-B).

    Returns
    -------
    float
        In ``[-1, 1]``, equal to ``scipy.stats.pearsonr(pred, ref).statistic``; ``0.0`` when either
        side is constant (scipy returns ``nan`` with a warning), so that a collapsed regression head
        scores "no skill". ``nan`` if any input is ``nan``.
    """
    p, r = _as_pair(pred, ref)
    p = p.astype(np.float64)
    r = r.astype(np.float64)
    if np.isnan(p).any() or np.isnan(r).any():
        return float("nan")
    if _is_constant(p) or _is_constant(r):
        return 0.0
    pc = p - p.mean()
    rc = r - r.mean()
    # Scale by the largest deviation, then normalise (as scipy does), so that neither the norm nor
    # the dot product can overflow however large the values are.
    pc /= np.abs(pc).max()
    rc /= np.abs(rc).max()
    pc /= np.linalg.norm(pc)
    rc /= np.linalg.norm(rc)
    return float(np.clip(pc @ rc, -1.0, 1.0))


def spearman(pred: Sequence | np.ndarray, ref: Sequence | np.ndarray) -> float:
    """Spearman rank correlation: Pearson correlation of the (average-tied) ranks.

    Returns
    -------
    float
        In ``[-1, 1]``, equal to ``scipy.stats.spearmanr(pred, ref).statistic``; ``0.0`` when either
        side is constant (rather than scipy's ``nan``), ``nan`` if any input is ``nan``.
    """
    p, r = _as_pair(pred, ref)
    p = p.astype(np.float64)
    r = r.astype(np.float64)
    if np.isnan(p).any() or np.isnan(r).any():
        return float("nan")
    from scipy.stats import rankdata  # here: scipy.stats takes ~1 s to import, and only Spearman needs it

    # Ranks are constant exactly when the values are, and pearson() returns 0.0 for that case.
    return pearson(rankdata(p, method="average"), rankdata(r, method="average"))


#: Name -> metric function. Every function takes ``(pred, ref)`` and returns a float.
METRICS: dict[str, Callable[[Sequence | np.ndarray, Sequence | np.ndarray], float]] = {
    "accuracy": accuracy,
    "mcc": mcc,
    "f1": f1,
    "macro_f1": macro_f1,  # multi-class tasks (freezestats.tasks.macro_f1)
    "pearson": pearson,
    "spearman": spearman,
}

#: Metrics that need class ids (meaningless on real-valued regression outputs).
CLASSIFICATION_METRICS: frozenset[str] = frozenset({"accuracy", "mcc", "f1", "macro_f1"})
#: Metrics that apply to real-valued regression outputs.
REGRESSION_METRICS: frozenset[str] = frozenset({"pearson", "spearman"})
#: The values each metric can take: a contrast of two of its scores lies within +-(high - low), which bounds an
#: interval whose t quantile has next to no df (a contrast whose item part rests on two discordant items).
METRIC_RANGES: dict[str, tuple[float, float]] = {
    "accuracy": (0.0, 1.0),
    "mcc": (-1.0, 1.0),
    "f1": (0.0, 1.0),
    "macro_f1": (0.0, 1.0),
    "pearson": (-1.0, 1.0),
    "spearman": (-1.0, 1.0),
}


def _check_metric_name(name: str) -> None:
    if name not in METRICS:
        raise SpecError(f"metric names must be one of {sorted(METRICS)}, but got {name!r}.")


def compute_metrics(names: Sequence[str], pred: Sequence | np.ndarray, ref: Sequence | np.ndarray) -> dict[str, float]:
    """Compute several metrics on the same predictions.

    Parameters
    ----------
    names
        Metric names from :data:`METRICS`. A single string is accepted as one name (rather than being
        iterated character by character).
    pred, ref
        Predictions (class ids, or floats for regression) and references.

    Returns
    -------
    dict[str, float]
        ``name -> score``, in the order of ``names``.

    Raises
    ------
    SpecError
        If a name is unknown; all names are checked before anything is computed, so a typo in a
        study spec fails fast instead of after a metric has already been evaluated.
    """
    if isinstance(names, str):
        names = (names,)
    for name in names:
        _check_metric_name(name)
    return {name: METRICS[name](pred, ref) for name in names}


def majority_baseline(
    metric: str,
    train_labels: Sequence | np.ndarray,
    eval_labels: Sequence | np.ndarray,
    regression: bool,
) -> float:
    """Score of the best *constant* predictor that can be fitted on the training labels.

    A fine-tuned model that does not beat this number has learned nothing about the input; it is
    the yardstick of :func:`is_failed_run`. The constant is fitted on ``train_labels`` (not on
    ``eval_labels``, which would leak the evaluation distribution).

    * Classification: predict the most frequent training class (ties -> the smallest label). E.g.
      on SST-2's validation set (444 positive / 428 negative) a positive-majority predictor scores
      accuracy 444/872 = 0.509 and MCC 0.
    * Regression: predict the training mean. Pearson and Spearman are then ``0.0`` by this module's
      constant-prediction convention.

    Parameters
    ----------
    metric
        A name from :data:`METRICS`. Regression tasks accept only :data:`REGRESSION_METRICS`.
    train_labels, eval_labels
        1-D label arrays; both non-empty.
    regression
        Whether the task is regression (STS-B).

    Raises
    ------
    SpecError
        Unknown metric, or a classification metric requested for a regression task.
    ValueError
        Empty or non-1-D label arrays.
    """
    _check_metric_name(metric)
    if regression and metric not in REGRESSION_METRICS:
        raise SpecError(
            f"a regression task's metric must be one of {sorted(REGRESSION_METRICS)}, but got metric={metric!r}."
        )
    train = np.asarray(train_labels)
    evals = np.asarray(eval_labels)
    if train.ndim != 1 or train.shape[0] == 0:
        raise ValueError(f"train_labels must be a non-empty 1-D array, but got shape {train.shape}.")
    if evals.ndim != 1 or evals.shape[0] == 0:
        raise ValueError(f"eval_labels must be a non-empty 1-D array, but got shape {evals.shape}.")
    if regression:
        constant = np.full(evals.shape[0], float(np.mean(train.astype(np.float64))))
    else:
        values, counts = np.unique(train, return_counts=True)
        # np.unique sorts, and argmax returns the first maximum: ties go to the smallest label.
        constant = np.full(evals.shape[0], values[int(np.argmax(counts))])
    return METRICS[metric](constant, evals)


# --------------------------------------------------------------------------------------------------
# Failed runs (curves: freezestats.tasks.curve)
# --------------------------------------------------------------------------------------------------


def is_failed_run(
    pred: Sequence | np.ndarray,
    regression: bool,
    final_score: float,
    baseline: float,
    tol: float = 1e-9,
) -> bool:
    """Whether a run collapsed, i.e. ended no better than a constant predictor.

    Fine-tuning BERT-style models on small GLUE tasks fails in a sizeable fraction of seeds: the
    model degenerates to predicting one class (Devlin et al., 2019, Sec. 4.1, use random restarts on
    small tasks for this reason; Mosbach et al., 2021, call a run failed when it ends no better than
    the majority classifier).
    Such runs should be counted and reported separately rather than averaged with healthy ones.

    A run is failed if any of these holds for its final checkpoint:

    * classification: all predictions are the same class;
    * regression: predictions are non-finite or have standard deviation below ``1e-8``;
    * ``final_score`` is ``nan``/infinite, or ``final_score <= baseline + tol``.

    Parameters
    ----------
    pred
        Final-checkpoint predictions (class ids, or floats for regression).
    regression
        Whether the task is regression.
    final_score
        The run's final primary metric.
    baseline
        The task's :func:`majority_baseline` for that metric.
    tol
        Slack so that a score equal to the baseline up to floating-point noise counts as failed.

    Raises
    ------
    ValueError
        If ``pred`` is empty or not 1-D.
    """
    p = np.asarray(pred)
    if p.ndim != 1 or p.shape[0] == 0:
        raise ValueError(f"pred must be a non-empty 1-D array, but got shape {p.shape}.")
    if regression:
        pf = p.astype(np.float64)
        if not np.all(np.isfinite(pf)) or float(np.std(pf)) < _CONSTANT_STD:
            return True
    elif _is_constant(p):
        return True
    score = float(final_score)
    if not np.isfinite(score):
        return True
    return score <= float(baseline) + tol

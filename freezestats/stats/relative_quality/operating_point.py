r"""Lee, Tang & Lin (2019): quality relative to the full model, and how few layers reach 90% of it.

Lee et al. ("What Would Elsa Do? Freezing Layers During Transformer Fine-Tuning", 2019) report the
score of every freeze depth as a fraction of the fully fine-tuned model's score ("relative quality")
and conclude that fine-tuning only the top quarter of BERT's layers keeps about 90% of the quality.
:func:`relative_scores` computes the relative quality of every cell, and :func:`operating_point` the
fewest trainable layers that reach a given fraction of the full quality, both with bootstrap
intervals that resample *replicates* (seed and subset draw) rather than single runs.
:func:`lee_ratio_tests` (:mod:`.ratio_tests`) asks the 90% question as a test on a fitted
model: is :math:`\mu_k \ge 0.9\,\mu_0` shown, depth by depth in fixed sequence, with a Fieller interval for the
ratio. That test is the primary answer; the bootstrap operating point is a secondary display.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.checks import REPLICATE, check_confidence
from freezestats.stats.inference.sequence import depth_rank
from freezestats.stats.relative_quality.bootstrap import _bootstrap, _percentiles
from freezestats.stats.relative_quality.ratio_tests import lee_ratio_tests

__all__ = ["lee_ratio_tests", "operating_point", "relative_scores"]  # lee_ratio_tests: stats.lee_tests

RELATIVE_COLUMNS = [
    "task",
    "train_size",
    "frozen_layers",
    "trainable_layers",
    "n",
    "mean",
    "full_mean",
    "baseline",
    "difference",
    "difference_ci_low",
    "difference_ci_high",
    "relative",
    "relative_ci_low",
    "relative_ci_high",
]
OPERATING_COLUMNS = [
    "task",
    "train_size",
    "trainable_layers",
    "frozen_layers",
    "threshold",
    "ci_low",
    "ci_high",
    "p_reached",
    "n_boot",
    "n_valid",
    "full_mean",
    "baseline",
]
_TOL = 1e-12


def relative_scores(
    data: pd.DataFrame,
    response: str,
    task: str | None = None,
    reference: int = 0,
    relative_to: Literal["zero", "majority"] = "zero",
    n_boot: int = 2000,
    confidence: float = 0.95,
    rng: int | np.random.Generator | None = 0,
    unit: Sequence[str] = tuple(REPLICATE),
) -> pd.DataFrame:
    r"""Each freeze depth's mean score relative to the full model's, with bootstrap intervals.

    Parameters
    ----------
    data : pandas.DataFrame
        The results table (one row per run); needs ``role, task, train_size, frozen_layers,
        n_layers``, the ``unit`` columns, ``response`` and, for ``relative_to="majority"``,
        ``majority_baseline``.
    response : str
        Per-run score: ``"best_dev"``, ``"final_dev"``, ``"heldout"`` or a ``final_<metric>`` column.
    task : str or None
        The task to analyse; required when the table holds several tasks.
    reference : int
        Freeze depth of the "full" model; 0 (nothing frozen) as in Lee et al.
    relative_to : {"zero", "majority"}
        Origin of the ratio. ``"zero"`` is Lee et al.'s relative quality, ``mean / full_mean``;
        ``"majority"`` measures the improvement over the majority-class baseline,
        ``(mean - b) / (full_mean - b)``. See Notes.
    n_boot : int
        Number of bootstrap replicates (>= 1; 2000 or more for reported intervals).
    confidence : float
        Coverage of the percentile intervals, in (0, 1).
    rng : int, numpy.random.Generator or None
        Seed or generator of the bootstrap; the default 0 makes the result reproducible.
    unit : sequence of str
        Columns identifying the resampled unit; default ``("subset_draw", "seed")``. Pass
        ``("subset_draw",)`` to resample whole subset draws (see Notes).

    Returns
    -------
    pandas.DataFrame
        One row per (``train_size``, ``frozen_layers``) cell of the task, sorted:

        - ``task``, ``train_size``, ``frozen_layers``: the cell.
        - ``trainable_layers``: ``n_layers - max(frozen_layers, 0)`` (freezing only the embeddings,
          ``-1``, leaves every block trainable).
        - ``n``: runs with a finite response.
        - ``mean``: mean response of the cell.
        - ``full_mean``: mean response of the ``reference`` cell at the same training size.
        - ``baseline``: :math:`b`, the origin of the ratio: 0, or the mean ``majority_baseline`` of
          the training size.
        - ``difference``: ``mean - full_mean``.
        - ``difference_ci_low``, ``difference_ci_high``: bootstrap percentile interval.
        - ``relative``: ``(mean - b) / (full_mean - b)``; NaN when ``full_mean <= b``.
        - ``relative_ci_low``, ``relative_ci_high``: bootstrap percentile interval; NaN when some
          replicate has ``full_mean <= b`` (the ratio's distribution is then unbounded).

        Intervals use the replicates in which the cell (and its reference cell) is non-empty; in a
        balanced table that is every replicate.

    Raises
    ------
    ModelFitError
        Empty table, missing columns, unknown ``response``, no grid rows, several tasks and no
        ``task``, several models, a training size without the ``reference`` depth, fewer than two
        replicates, bad ``relative_to`` / ``n_boot`` / ``confidence``, several values of ``n_layers``.

    Notes
    -----
    With :math:`\bar y_{nk}` the mean of depth :math:`k` at training size :math:`n`, and
    :math:`k_0` the reference depth,

    .. math::

        \text{relative}_{nk} = \frac{\bar y_{nk} - b_n}{\bar y_{nk_0} - b_n},
        \qquad \text{difference}_{nk} = \bar y_{nk} - \bar y_{nk_0}.

    *Choice of origin.* Lee et al. use :math:`b = 0` ("relative_to='zero'"). For accuracy this flatters
    every model: a classifier that predicts the majority class of SST-2 (0.509) already has 57% of a 90%-accurate
    model's "quality". For MCC or Pearson, whose baseline is 0, both origins coincide, but the ratio is
    unstable when the full model's mean is near 0 (small data) and undefined when it is not positive.
    ``relative_to="majority"`` takes the improvement over the majority-class baseline as the quantity
    of interest, so 0 means "learned nothing" for every metric. Ratios whose denominator is not
    positive are reported as NaN, never as a number.

    *Bootstrap.* The unit resampled is a replicate, a (``subset_draw``, ``seed``) pair, with all its
    runs in every cell at once (Davison & Hinkley, 1997, Sec. 3.8). Runs of one replicate are
    dependent across cells: the training subsets are nested across sizes and shared across depths,
    and the seed fixes the head initialisation and the data order. Resampling cells independently
    would ignore the positive correlation between a depth's mean and the full model's mean and
    overstate the uncertainty of differences and ratios. With one subset draw crossed with several
    seeds this treats seeds as the independent units; with several draws, seeds within a draw share
    data, and ``unit=("subset_draw",)`` (a cluster bootstrap over draws) is the conservative choice.
    Replicate ``b`` draws :math:`U` units with replacement from the :math:`U` available, recomputes every
    cell mean (cells a replicate leaves empty are NaN) and the statistics above; the interval holds the
    :math:`\alpha/2` and :math:`1-\alpha/2` quantiles. With 5 seeds there are only 126 distinct resamples,
    and percentile intervals are too narrow: for a mean, the bootstrap standard error is
    :math:`\sqrt{(U-1)/U}` times the usual one and the interval uses normal rather than
    :math:`t_{U-1}` quantiles, so with :math:`U = 5` it is about
    :math:`0.89 \times 1.96 / 2.78 \approx 63\%` as wide as the t interval. Treat them as descriptive,
    and run more seeds where a decision depends on them.

    Missing data: runs with a missing response are dropped (listwise deletion); an unbalanced table is
    allowed (cell means use whichever runs a replicate contains).

    References
    ----------
    .. [1] Lee, J., Tang, R., & Lin, J. (2019). What would Elsa do? Freezing layers during transformer
       fine-tuning. *arXiv:1911.03090*.
    .. [2] Davison, A. C., & Hinkley, D. V. (1997). *Bootstrap Methods and their Application*.
       Cambridge University Press.
    """
    level = check_confidence(confidence, "relative_scores")
    boot = _bootstrap(data, response, task, reference, relative_to, n_boot, rng, unit, "relative_scores")
    alpha = 1.0 - level
    cells = boot.cells.copy()
    ref_index = boot.reference_index
    base = boot.baseline_per_cell
    point_ref = boot.point[ref_index]
    boot_ref = boot.replicates[:, ref_index]
    denominator = point_ref - base
    boot_denominator = boot_ref - base[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(denominator > 0, (boot.point - base) / denominator, np.nan)
        boot_relative = (boot.replicates - base[None, :]) / boot_denominator
    boot_difference = boot.replicates - boot_ref
    with np.errstate(invalid="ignore"):
        # NaN replicates (a cell left empty by the resample) are skipped; a non-positive denominator is not.
        defined = ~np.any(boot_denominator <= 0, axis=0) & (denominator > 0)
    cells["mean"] = boot.point
    cells["full_mean"] = point_ref
    cells["baseline"] = base
    cells["difference"] = boot.point - point_ref
    cells["difference_ci_low"], cells["difference_ci_high"] = _percentiles(boot_difference, alpha)
    cells["relative"] = relative
    low, high = _percentiles(boot_relative, alpha)
    cells["relative_ci_low"] = np.where(defined, low, np.nan)
    cells["relative_ci_high"] = np.where(defined, high, np.nan)
    return cells[RELATIVE_COLUMNS].reset_index(drop=True)


def operating_point(
    data: pd.DataFrame,
    response: str,
    task: str | None = None,
    threshold: float = 0.9,
    reference: int = 0,
    relative_to: Literal["zero", "majority"] = "zero",
    n_boot: int = 2000,
    confidence: float = 0.95,
    rng: int | np.random.Generator | None = 0,
    unit: Sequence[str] = tuple(REPLICATE),
) -> pd.DataFrame:
    r"""Fewest trainable layers whose mean reaches ``threshold`` of the full model's quality, per size.

    Parameters
    ----------
    data : pandas.DataFrame
        The results table (one row per run); columns as for :func:`relative_scores`.
    response : str
        Per-run score: ``"best_dev"``, ``"final_dev"``, ``"heldout"`` or a ``final_<metric>`` column.
    task : str or None
        The task to analyse; required when the table holds several tasks.
    threshold : float
        Required fraction of the full model's quality, in (0, 1]; Lee et al.'s 90% is 0.9.
    reference : int
        Freeze depth of the full model (0).
    relative_to : {"zero", "majority"}
        Origin of the quality ratio, as in :func:`relative_scores`.
    n_boot : int
        Number of bootstrap replicates (>= 1; 2000 or more for reported intervals).
    confidence : float
        Coverage of the percentile interval, in (0, 1).
    rng : int, numpy.random.Generator or None
        Seed or generator of the bootstrap; the default 0 makes the result reproducible.
    unit : sequence of str
        Columns identifying the resampled unit; default ``("subset_draw", "seed")``.

    Returns
    -------
    pandas.DataFrame
        One row per training size, sorted:

        - ``task``, ``train_size``.
        - ``trainable_layers``: the operating point, the fewest trainable blocks among the depths
          that reach the threshold.
        - ``frozen_layers``: the depth that achieves it (``-1`` rather than ``0`` when both qualify,
          since freezing the embeddings saves parameters at the same block count).
        - ``threshold``: as given.
        - ``ci_low``, ``ci_high``: percentile interval of the operating point's bootstrap distribution
          (values that occur in it, since the operating point is discrete).
        - ``p_reached``: share of valid replicates whose operating point is at most
          ``trainable_layers``, i.e. in which that many trainable layers (or fewer) suffice.
        - ``n_boot``: replicates drawn.
        - ``n_valid``: replicates in which the operating point is defined (every cell of the size
          non-empty and ``full_mean > baseline``); the interval and ``p_reached`` use these.
        - ``full_mean``: mean response of the reference depth.
        - ``baseline``: the ratio's origin :math:`b`.

        ``trainable_layers`` and ``frozen_layers`` have pandas' nullable ``Int64`` dtype: they and
        every statistic are missing (``<NA>`` / NaN) for a size whose ``full_mean`` does not exceed
        ``baseline`` (no quality to keep a fraction of).

    Raises
    ------
    ModelFitError
        As :func:`relative_scores`, and for a ``threshold`` outside (0, 1].

    Notes
    -----
    At training size :math:`n`, depth :math:`k` *reaches* the threshold :math:`t` when

    .. math:: \bar y_{nk} - b_n \;\ge\; t\,(\bar y_{nk_0} - b_n),

    and the operating point is the smallest ``trainable_layers`` over the depths that reach it. Every
    depth is checked, not just a run down from the full model: with a non-monotone curve (a deeper
    freeze that happens to score above a shallower one) the operating point is the deepest qualifying
    freeze, which is what "how few layers suffice" asks but can sit above a depth that misses.
    With :math:`t \le 1` the reference depth always qualifies, so the operating point exists whenever
    :math:`\bar y_{nk_0} > b_n`.

    The bootstrap resamples replicates (seed and subset draw) with all their runs in every cell, for
    the reasons given in :func:`relative_scores`, and recomputes the operating point in every replicate.
    Because the operating point is a discontinuous function of the cell means, its bootstrap
    distribution can be lumpy and percentile intervals carry no coverage guarantee; ``p_reached``
    (how often the estimated number of layers suffices) is the more direct summary. When all seeds
    agree the distribution is a point mass and the interval collapses to the estimate. Ratios and the
    choice ``relative_to`` are discussed in :func:`relative_scores`: Lee et al.'s origin 0 makes 90%
    of an accuracy an easy bar (predicting the majority class alone reaches 57% of a 0.90 SST-2
    accuracy and 86% of a 0.80 CoLA accuracy), so ``relative_to="majority"`` is the stricter reading.

    *A secondary display.* The operating point is a discontinuous function of five-seed cell means, and its
    percentile interval under-covers with 5 seeds (only 126 distinct resamples; the bootstrap SE of a mean is
    :math:`\sqrt{4/5}` of the usual one and normal rather than :math:`t_4` quantiles are used, see
    :func:`relative_scores`). Report :func:`lee_ratio_tests` (a t test of :math:`\mu_k \ge t\,\mu_0` on the
    fitted model, in fixed sequence, with a Fieller interval for the ratio) as the answer, and this table as an
    illustration of how stable the estimated operating point is across seeds.

    Missing data: runs with a missing response are dropped (listwise deletion); replicates that leave a
    cell of the size empty are not valid for that size.

    References
    ----------
    .. [1] Lee, J., Tang, R., & Lin, J. (2019). What would Elsa do? Freezing layers during transformer
       fine-tuning. *arXiv:1911.03090*.
    .. [2] Efron, B., & Tibshirani, R. J. (1993). *An Introduction to the Bootstrap*, Ch. 13
       (percentile intervals). Chapman & Hall.
    """
    level = check_confidence(confidence, "operating_point")
    try:
        t = float(threshold)
    except (TypeError, ValueError):
        t = float("nan")
    if not 0.0 < t <= 1.0:
        raise ModelFitError(
            f"operating_point: `threshold` must be in (0, 1] (a fraction of the full model's quality), "
            f"but got threshold={threshold!r}; Lee et al. use 0.9."
        )
    boot = _bootstrap(data, response, task, reference, relative_to, n_boot, rng, unit, "operating_point")
    alpha = 1.0 - level
    rows = []
    for size, index in boot.sizes.items():
        cells = boot.cells.iloc[index]
        ref = index[np.flatnonzero(cells["frozen_layers"].to_numpy() == reference)[0]]
        # Deepest freeze first, so the first qualifying column is the operating point.
        order = np.argsort(-depth_rank(cells["frozen_layers"].to_numpy()), kind="stable")
        columns = index[order]
        trainable = cells["trainable_layers"].to_numpy()[order]
        frozen = cells["frozen_layers"].to_numpy()[order]
        base = float(boot.baseline_per_cell[ref])
        full = float(boot.point[ref])
        row = {
            "task": boot.task,
            "train_size": int(size),
            "threshold": t,
            "n_boot": boot.n_boot,
            "full_mean": full,
            "baseline": base,
        }
        point = _first_reached(boot.point[None, columns], boot.point[None, ref], base, t)[0]
        if point < 0:
            row.update(trainable_layers=np.nan, frozen_layers=np.nan, ci_low=np.nan, ci_high=np.nan, p_reached=np.nan)
            row["n_valid"] = 0
            rows.append(row)
            continue
        first = _first_reached(boot.replicates[:, columns], boot.replicates[:, ref], base, t)
        valid = first >= 0
        draws = trainable[first[valid]].astype(float)
        row["trainable_layers"] = int(trainable[point])
        row["frozen_layers"] = int(frozen[point])
        row["n_valid"] = int(valid.sum())
        if draws.size:
            row["ci_low"] = float(np.quantile(draws, alpha / 2.0, method="inverted_cdf"))
            row["ci_high"] = float(np.quantile(draws, 1.0 - alpha / 2.0, method="inverted_cdf"))
            row["p_reached"] = float(np.mean(draws <= trainable[point]))
        else:
            row.update(ci_low=np.nan, ci_high=np.nan, p_reached=np.nan)
        rows.append(row)
    out = pd.DataFrame(rows)
    if out["trainable_layers"].isna().all():
        raise ModelFitError(
            f"operating_point: the full model (frozen_layers={reference}) must score above the baseline "
            f"(relative_to={relative_to!r}) at some training size, but it does not at any size of task "
            f"{boot.task!r} (full means: {out['full_mean'].round(4).tolist()}, baselines: "
            f"{out['baseline'].round(4).tolist()}); a fraction of no quality is undefined."
        )
    for column in ("trainable_layers", "frozen_layers"):
        out[column] = out[column].astype("Int64")
    return out[OPERATING_COLUMNS]


def _first_reached(means: np.ndarray, full: np.ndarray, base: float, threshold: float) -> np.ndarray:
    """Per row, the first column whose mean reaches the threshold; -1 where undefined.

    ``means`` has shape (B, K) with columns ordered deepest freeze first, ``full`` shape (B,).
    A row is undefined when the full mean does not exceed the baseline or some cell is empty (NaN).
    """
    gain = full - base
    with np.errstate(invalid="ignore"):
        reached = (means - base) >= threshold * gain[:, None] - _TOL
    defined = np.isfinite(gain) & (gain > 0) & np.all(np.isfinite(means), axis=1)
    first = np.argmax(reached, axis=1)
    found = reached[np.arange(len(first)), first]
    return np.where(defined & found, first, -1)

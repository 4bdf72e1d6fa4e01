r"""P(fail) per cell of one depth pair, following the fall of failure rates with train size (Firth logistic).

Why not the pooled GLMM here (:mod:`freezestats.stats.failures.pooled_rates`)
-------------------------------------------------------------------------------
The task-level contrast of a depth with the reference fits its failure rates on that pair's runs only (no
borrowing across depths, issue 28). The pooled GLMM's size effect is a random intercept: a size with no failed
run among its 10 runs is pulled towards the pair's other sizes, not towards their *trend*, and its Wilson
interval at the effective number of runs cannot put a rate below a few percent. A collapse costs ~35 points,
so every size of a pair that failed anywhere carried a failure part of several points, and the realistic
bench (``bench/coverage_task_level.py``) covered 0.975-1.000 at 200-1000 examples.

The model
---------
For the pair's runs (depth :math:`k` and the reference :math:`0`, every size), Firth's penalised logistic
regression (:mod:`freezestats.stats.failures.firth`: finite where a cell has no failed run, or only failed runs)

.. math:: \operatorname{logit} P(\text{fail}) = \beta_0 + \beta_1 [k] + (\beta_2 + \beta_3 [k])\,\log_2 n

i.e. depth, log2 train size and their interaction. It is fitted in the equivalent per-depth form (an intercept
and a slope for each depth): the Jeffreys penalty is invariant under that linear reparametrisation and the
Fisher information is block-diagonal in it, so the fit is the same, the two depths' rates are independent
given the flags, and a depth's rates are the same in every pair it enters (they are computed once).

``monotone``: a depth whose fitted slope is positive (rates rising with size) gets its slope fixed at 0, a
constant rate: the constrained maximum under a non-increasing trend, so that a rising slope fitted to one or
two failures at a large size is not extrapolated to the sizes beyond.

Each size's interval
--------------------
``interval="profile"`` (default): the profile penalised-likelihood interval of the cell's linear predictor
(the intercept of the depth's fit with log2 size centred at that size), transformed by expit. Wald's
interval on the logit scale (``interval="wald"``, ``expit(eta +- z se)``) is far too wide here: the smallest
size's flags (most runs there score near the majority rate) against few failures above it put the fit near
quasi-separation, where the logit SE of a large size can reach 6-8 and the interval on P spans 0 to 0.2-0.3 with no
failure seen (Heinze & Schemper 2002 recommend the profile interval with Firth's fit for this reason). On the
realistic simulator's flags (``bench/results/slope_rates_check.txt``, 200 studies) the interval of
:math:`P_k - P_0` at 500-1000 examples for depths -1..2 has median width 0.60-0.66 with Wald's, 0.37-0.38
with the pooled model's and 0.18-0.28 with the profile's. The two depths' intervals join by MOVER with
correlation 0 (the fits are independent) in :func:`slope_failure_sides`.

What it does not fix, measured
------------------------------
The flagged rate is not logistic-linear in log2 size. At 50 examples ~0.89 of every depth's runs are flagged
(healthy runs near the majority rate), at 100 only 0.12 of the reference's; deep depths fall off a cliff where
their healthy skill clears the majority rate (depth 4: 0.93, 0.69, 0.09, 0.05, 0.03 over 50..1000; depth 6:
0.84, 0.88, 0.95, 0.84, 0.10). The straight line through those is pulled by the smallest size: the rate
difference's profile interval covers 0.80-0.96 for depths -1..5 at 200-1000 examples but 0.69 and 0.56 at
100 (depths 4, 5) and 0.49-0.72 for depth 6. On the contrasts (``bench/results/coverage_task_level_slope.txt``,
400 studies) that gives 16 of 30 cells outside the Monte Carlo band (the pooled default: 25), the large sizes'
over-coverage gone (0.912-0.960 at 500-1000 for depths -1..5), but under-coverage the default does not have:
0.74-0.78 at 100 examples for depths 4-6, 0.865 at (200, 4), 0.835 at (1000, 6). So it is an option, not the
default. A local fit (each size with its neighbours), a quadratic in log2 size or a fit on the sizes from the
cell's upwards take the smallest size's leverage away and with it the narrowing: in a check on 100 studies
(scripts not kept) the rate difference's intervals at 1000 examples were then wider than the pooled model's
(median 0.46-0.74 against 0.37-0.45).

References
----------
Heinze, G. & Schemper, M. (2002). A solution to the problem of separation in logistic regression. *Statistics
in Medicine* 21(16), 2409-2419.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np
import pandas as pd
from scipy import special, stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.failures.firth import fit_firth, profile_interval

__all__ = ["INTERVALS", "SlopeRates", "slope_failure_probabilities"]

Cell = tuple[int, int]  # (frozen_layers, train_size)
Interval = Literal["profile", "wald"]
INTERVALS: tuple[str, ...] = ("profile", "wald")


@dataclass(frozen=True)
class SlopeRates:
    """Per cell of a depth pair: P(fail), the ``(row, Cov)`` of its linear predictor in its depth's own fit
    (``None`` where P is 0 or 1 by rule: no variance), and its interval ``(low, high)`` on the P scale."""

    p: dict[Cell, float]
    rows: dict[Cell, tuple[np.ndarray, np.ndarray] | None]
    bounds: dict[Cell, tuple[float, float]]


def slope_failure_probabilities(
    runs: pd.DataFrame,
    failed: np.ndarray,
    *,
    monotone: bool = True,
    interval: Interval = "profile",
    confidence: float = 0.95,
) -> SlopeRates:
    """P(fail) per (depth, size) of a pair of depths from Firth's depth x log2-size logistic model, with each
    cell's interval.

    Parameters
    ----------
    runs
        The two depths' runs at every size (``frozen_layers``, ``train_size``); at most two depths.
    failed
        Which runs failed, aligned with ``runs``.
    monotone
        Fix a depth's slope at 0 where its fitted slope is positive (module docstring).
    interval
        ``"profile"`` (profile penalised likelihood) or ``"wald"`` (Wald on the logit scale), both transformed
        to P by expit.
    confidence
        Level of each cell's two-sided interval.

    Returns
    -------
    SlopeRates
        With no failed run in the pair P is 0 everywhere, with only failed runs 1, both without variance
        (``rows`` None, a zero-width interval), as the pooled model gives them.

    Examples
    --------
    >>> runs = pd.DataFrame({"frozen_layers": [0] * 20 + [4] * 20, "train_size": [100, 200, 500, 1000] * 10})
    >>> failed = np.zeros(40, dtype=bool)
    >>> failed[[0, 4, 20, 24, 28, 21]] = True  # failures at 100 examples (both depths) and 200 (depth 4)
    >>> rates = slope_failure_probabilities(runs, failed)
    >>> rates.p[(0, 100)] > rates.p[(0, 1000)], rates.p[(4, 200)] > rates.p[(0, 200)]
    (True, True)
    """
    if interval not in INTERVALS:
        raise ModelFitError(f"slope_failure_probabilities: `interval` must be one of {INTERVALS}, got {interval!r}.")
    levels = runs["frozen_layers"].to_numpy(dtype=int)
    sizes = runs["train_size"].to_numpy(dtype=int)
    flags = np.asarray(failed, dtype=bool)
    if len(flags) != len(runs):
        raise ModelFitError(f"slope_failure_probabilities: {len(flags)} flags for {len(runs)} runs.")
    depths = sorted(set(levels.tolist()))
    if len(depths) > 2:
        raise ModelFitError(f"slope_failure_probabilities: one pair of depths at a time, but got depths={depths}.")
    if not flags.any() or flags.all():  # nothing to estimate: P is 0 (or 1) everywhere, exactly
        value = 1.0 if flags.any() else 0.0
        cells = set(zip(levels.tolist(), sizes.tolist(), strict=True))
        return SlopeRates({c: value for c in cells}, {c: None for c in cells}, {c: (value, value) for c in cells})
    p, rows, bounds = {}, {}, {}
    for depth in depths:
        own = levels == depth
        counts = tuple(sorted(zip(sizes[own].tolist(), flags[own].tolist(), strict=True)))
        for size, (p_cell, row, cov, low, high) in _depth_rates(counts, monotone, interval, confidence).items():
            p[(depth, size)], rows[(depth, size)], bounds[(depth, size)] = p_cell, (row, cov), (low, high)
    return SlopeRates(p, rows, bounds)


@lru_cache(maxsize=4096)
def _depth_rates(
    counts: tuple[tuple[int, bool], ...], monotone: bool, interval: Interval, confidence: float
) -> dict[int, tuple[float, np.ndarray, np.ndarray, float, float]]:
    """One depth's fit (intercept and slope in log2 size), per size ``(P, row, Cov, low, high)``. Cached on the
    depth's (size, failed) runs: the reference's fit is the same in every pair of a study (module docstring)."""
    sizes = np.array([n for n, _ in counts], dtype=float)
    y = np.array([f for _, f in counts], dtype=float)
    grid = sorted(set(sizes.tolist()))
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    crit = float(stats.chi2.ppf(confidence, 1))
    slope = len(grid) > 1
    out = {}
    for size in grid:
        # centred at this size, the intercept is the cell's linear predictor: its profile is one coefficient's
        x = np.column_stack([np.ones(len(y)), np.log2(sizes) - np.log2(size)]) if slope else np.ones((len(y), 1))
        fit = fit_firth(x, y)
        if monotone and slope and fit.beta[1] > 0:
            slope, x = False, np.ones((len(y), 1))
            fit = fit_firth(x, y)
        if not fit.converged:
            raise ModelFitError(f"Firth's fit of the failure rates did not converge at train_size={int(size)}.")
        se = float(np.sqrt(fit.cov[0, 0]))
        if interval == "profile":
            low, high = profile_interval(x, y, fit, 0, crit)
        else:
            low, high = fit.beta[0] - z * se, fit.beta[0] + z * se
        row = np.zeros(x.shape[1])
        row[0] = 1.0
        p = float(special.expit(fit.beta[0]))
        out[int(size)] = (p, row, fit.cov, float(special.expit(low)), float(special.expit(high)))
    return out


def slope_failure_sides(
    cells: tuple[tuple[float, tuple | None, tuple[float, float]], tuple[float, tuple | None, tuple[float, float]]],
    gaps: tuple[float, float],
) -> tuple[float, float, float]:
    """The failure part F = p_k (b_k - h_k) - p_0 (b_0 - h_0) from the two depths' independent fits: its
    delta-method variance and the lower and upper half-widths of its interval, as
    :func:`~freezestats.stats.failures.two_part.failure_sides` returns them for the pooled model.

    ``cells`` are the depth's and the reference's ``(P, (row, Cov) or None, (low, high))``; each term's interval
    is its P interval times its bracket, and the two join by MOVER (Zou & Donner 2008) with correlation 0, since
    the fits share no data. A cell whose P is 0 or 1 by rule (no row) adds nothing. No delta-method floor: that
    floor covers the pooled model's borrowing across sizes, which this fit does not do.

    >>> depth, reference = (0.1, (np.ones(1), np.eye(1)), (0.02, 0.3)), (0.0, None, (0.0, 0.0))
    >>> sides = slope_failure_sides((depth, reference), (-0.4, -0.4))
    >>> [round(v, 6) for v in sides]  # a collapse costs 0.4: F's interval is -0.4 x (0.02 .. 0.3) around -0.04
    [0.001296, 0.08, 0.032]
    """
    terms = [(p, row, bound, sign * gap) for (p, row, bound), sign, gap in zip(cells, (1, -1), gaps, strict=True)]
    below, above, variance = [], [], 0.0
    for p, row, (low, high), weight in terms:
        if row is None:
            continue
        ends = sorted((weight * low, weight * high))
        below.append(weight * p - ends[0])
        above.append(ends[1] - weight * p)
        vector, cov = row
        variance += (weight * p * (1 - p)) ** 2 * float(vector @ cov @ vector)
    return float(variance), float(np.hypot.reduce([0.0, *below])), float(np.hypot.reduce([0.0, *above]))

r"""The task-level contrast when some runs fail: the healthy runs paired by seed and item, the failure rates apart.

A collapsed run predicts the majority class on every item, tens of points below a healthy one, so a cell's
scores are a healthy spread plus, now and then, a far outlier. With 5 seeds a cell shows none three times in
four even when a quarter of its runs would collapse, and the paired seed x item interval of
:func:`~freezestats.stats.items.task_level.crossed_contrast` then has no trace of the failure mode in its
spread: on the realistic simulator (``bench/coverage_task_level.py``) it covered the task-level truth of deep
freezes at 100-500 examples 0.86-0.92 of the time, and the answer's familywise error at the margin was 0.117.
When a collapse *is* in the sample the same interval is far too wide (coverage 0.99-1.0). Both are the mixture,
so the contrast models its two parts where each is estimable, as
:mod:`freezestats.stats.failures.two_part` does for the mixed model:

.. math:: m_{kn} - m_{0n} = (h_{kn} - h_{0n}) + p_{kn}(b_{kn} - h_{kn}) - p_{0n}(b_{0n} - h_{0n})

with :math:`h` a cell's healthy mean, :math:`b` its failed runs' mean (the size's where the cell has none) and
:math:`p` its failure probability. The decomposition holds for any rule that splits runs into healthy and failed,
so it is exact for the analysis's own flags (the binomial rule against the majority rate).

* **The healthy difference** :math:`h_k - h_0` is the difference of the two cells' own healthy means, paired
  by item, and by seed where both of a seed's runs are healthy
  (:mod:`~freezestats.stats.items.partial_pairs`). Not the mean over the pairs where both runs are healthy:
  that is a selection of seeds when the flag follows the seed's skill (a healthy run near the majority rate is
  flagged), and it biased depth -1 at 50 examples by +1.6 points with 20 seeds. Its variance is weighted by
  :math:`(1 - \bar p)^2`, the share of the score the healthy part carries.
* **The failure part** takes :math:`p` from the binomial GLMM that pools sizes and cells
  (:func:`~freezestats.stats.failures.pooled_rates.pooled_failure_probabilities`, fitted on the depth's and the
  reference's runs at every size: 5 runs cannot show a rate of 10%, so a cell's rate is estimated with its
  depth's other sizes' help, never with other depths'). The two levels' SD is given (:data:`PAIR_LEVEL_SD`), not
  estimated: estimated from two levels it often came out near zero and pulled the depth's rate to the
  reference's, which made deep depths at 100 examples look 0.4-1.1 points better than they are. Its interval from
  :func:`~freezestats.stats.failures.two_part.failure_sides` (Wilson at the effective number of runs, MOVER
  over the two terms): not symmetric, since a rate near 0 has room above it and none below. That keeps the lower
  side 4-5 points long at 1000 examples even for depths that fail exactly as often as the reference: the two
  cells share their intercept and size effect, and MOVER cannot let the reference's rate rise with the depth's.
  ``failure_rates="pooled_joint"`` reads the interval from the two rates drawn jointly instead
  (:mod:`~freezestats.stats.failures.rate_posterior`), averaged over the level x size SD
  (:mod:`~freezestats.stats.failures.sd_integration`): on 400 studies of the realistic simulator no contrast
  below the band and 12 of 30 above it (Wilson-MOVER: 24 above), but a familywise error of 0.056 at the margin
  over 800 null studies (Wilson-MOVER 0.035; ``bench/results/coverage_task_level_integrated.txt`` and
  ``fwer_task_level_400_799.txt``), so it was an option. That error was the tests', which scaled the 95% side to
  their levels; since each reads the side at its own level (``lower_tail``,
  :mod:`~freezestats.stats.inference.tail_matched`) it is 0.015 over the same 800 (Wilson-MOVER 0.025 on 400),
  and the joint draws are the default (:data:`DEFAULT_FAILURE_RATES`).

The pooling is in the failure rates only, over the two depths' sizes, never over other depths: a depth's contrast is
the same whichever other depths the study ran. A depth with fewer than two healthy runs (most of its runs failed,
or flagged as failed because it scores at the majority rate) enters whole (all its runs) against the reference's
healthy runs, with the reference's failure part only; with fewer than two healthy reference runs the contrast is the
crossed contrast of all its pairs, as before. ``method`` says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.failures.pooled_rates import pooled_failure_fit
from freezestats.stats.failures.rate_posterior import RatePosterior
from freezestats.stats.failures.sd_integration import RateMixture
from freezestats.stats.failures.slope_rates import slope_failure_probabilities, slope_failure_sides
from freezestats.stats.failures.two_part import failed_mean, failure_delta_variance, failure_sides, joined_se
from freezestats.stats.inference.tail_matched import lower_ladder

__all__ = [
    "DEFAULT_FAILURE_RATES",
    "FAILURE_RATES",
    "FAILURE_SIDES",
    "FailureParts",
    "failure_parts",
    "with_failure_part",
]

Cell = tuple[int, int]  # (frozen_layers, train_size), as pooled_failure_probabilities keys its cells
FailureRates = Literal["pooled", "pooled_joint", "slope"]
#: How the failure part estimates the two cells' failure rates: ``pooled``, the binomial GLMM over the pair's
#: sizes (:mod:`~freezestats.stats.failures.pooled_rates`, Wilson at the effective n, MOVER); ``pooled_joint``, the
#: same model with the failure part's interval from the two rates drawn jointly from it, averaged over the level x
#: size SD (:mod:`~freezestats.stats.failures.sd_integration`; ``bench/results/coverage_task_level_integrated.txt``);
#: ``slope``, Firth's depth x log2-size
#: logistic fit of the pair (:mod:`~freezestats.stats.failures.slope_rates`, profile intervals, MOVER).
FAILURE_RATES: tuple[str, ...] = ("pooled", "pooled_joint", "slope")
#: The default failure part, everywhere a caller does not pick one (``analyze``, ``report``, the library): the
#: joint draws, which the realistic simulator shows within the 93-97% band at every cell (``pooled`` is above it at
#: 7 of 30, all conservative) with a familywise error at the margin of 0.015 over 800 null studies.
DEFAULT_FAILURE_RATES: FailureRates = "pooled_joint"
#: The failure part's interval, in a contrast's ``failure_sides``: Wilson-MOVER (``pooled``), the joint draws
#: (``pooled_joint``), Wilson-MOVER where ``pooled_joint`` asked for draws but got none it could trust (effective
#: sample size below :data:`~freezestats.stats.failures.rate_posterior.MIN_ESS`, or no proposal), or the slope
#: model's own intervals; "none" where the contrast has no failure part.
FAILURE_SIDES: tuple[str, ...] = ("Wilson-MOVER", "joint draws", "Wilson-MOVER (joint draws failed)", "slope", "none")
#: The SD of the depth's and the reference's effects in the pair's pooled failure model, given, not estimated: two
#: levels cannot estimate it (:mod:`~freezestats.stats.failures.pooled_rates`, "Two levels").
PAIR_LEVEL_SD = 2.5


@dataclass(frozen=True)
class FailureParts:
    """Per cell of one task: P(fail) with its linear-predictor row, the failed runs' mean (with its variance and
    df) and the healthy runs' mean; what :func:`with_failure_part` needs beside the healthy contrast."""

    p: dict[Cell, float]
    p_rows: dict[Cell, tuple[np.ndarray, np.ndarray] | None]
    failed: dict[Cell, tuple[float, float, float]]
    healthy: dict[Cell, float]
    bounds: dict[Cell, tuple[float, float]] | None = None  # the slope model's P intervals; None: pooled
    posterior: RatePosterior | RateMixture | None = None  # pooled_joint's draws; None: Wilson-MOVER or slope sides
    sides: str = "Wilson-MOVER"  # how the failure part's interval was built (:data:`FAILURE_SIDES`)


def _rates(runs: pd.DataFrame, failed: np.ndarray, failure_rates: FailureRates) -> tuple:
    """``(P, (row, Cov), P intervals, joint draws)`` per cell from the chosen failure-rate model
    (:data:`FAILURE_RATES`); the intervals are the slope model's, the draws the pooled model's."""
    if failure_rates == "slope":
        rates = slope_failure_probabilities(runs, failed)
        return rates.p, rates.rows, rates.bounds, None
    if failure_rates not in ("pooled", "pooled_joint"):
        raise ModelFitError(f"`failure_rates` must be one of {FAILURE_RATES}, but got {failure_rates!r}.")
    draws = "integrated" if failure_rates == "pooled_joint" else None
    p, rows, posterior = pooled_failure_fit(runs, failed, PAIR_LEVEL_SD, posterior=draws)
    return p, rows, None, posterior


def failure_parts(
    runs: pd.DataFrame,
    response: str,
    failure_rates: FailureRates = DEFAULT_FAILURE_RATES,
) -> FailureParts | None:
    """The failure model of one task's runs (boolean ``failed`` column), or None when no run failed: then every P
    is 0 and the contrasts need no failure part.

    ``runs`` are the depth's and the reference's runs at every size (module docstring); ``failure_rates`` picks the
    model of their failure rates (:data:`FAILURE_RATES`). Where it cannot be fitted (a degenerate failure pattern)
    this raises :class:`ModelFitError`, and the caller falls back to the contrasts of all runs.
    """
    if "failed" not in runs.columns:
        return None
    failed = runs["failed"].fillna(False).astype(bool).to_numpy()
    if not failed.any():
        return None
    p, p_rows, bounds, posterior = _rates(runs, failed, failure_rates)
    sides = {"slope": "slope", "pooled": "Wilson-MOVER"}.get(failure_rates) or (
        "joint draws" if posterior is not None else "Wilson-MOVER (joint draws failed)"
    )
    values = pd.to_numeric(runs[response], errors="coerce").to_numpy(dtype=float)
    cells = list(zip(runs["frozen_layers"].astype(int), runs["train_size"].astype(int), strict=True))
    frame = pd.DataFrame({"cell": cells, "size": [n for _, n in cells], "y": values, "failed": failed})
    study_failed = failed_mean(values[failed])
    by_size = {n: failed_mean(at["y"].to_numpy()) for n, at in frame[frame["failed"]].groupby("size")}
    failed_means, healthy = {}, {}
    for cell, at in frame.groupby("cell", sort=False):
        down = at.loc[at["failed"], "y"].to_numpy()
        failed_means[cell] = failed_mean(down) if len(down) else by_size.get(cell[1], study_failed)
        up = at.loc[~at["failed"], "y"]
        healthy[cell] = float(up.mean()) if len(up) else float("nan")

    def keyed(values: dict) -> dict:
        return {tuple(map(int, k)): v for k, v in values.items()}

    return FailureParts(p=keyed(p), p_rows=keyed(p_rows), failed=failed_means, healthy=healthy,
                        bounds=None if bounds is None else keyed(bounds), posterior=posterior,
                        sides=sides)  # fmt: skip


def with_failure_part(
    healthy_pairs: dict[str, float],
    parts: FailureParts,
    cell: tuple[int, int, int],
    confidence: float,
    whole_depth: bool = False,
) -> dict[str, float]:
    """The contrast of ``depth`` with ``reference`` at ``size``: the healthy runs' contrast (``estimate, se,
    df`` and their seed and item parts, from the crossed or the seed-only contrast) plus the failure part.

    Returns the healthy contrast's keys with ``estimate, se, df`` replaced by the whole contrast's, plus the lower
    and upper SEs and df of its asymmetric interval (``se_lower, df_lower, se_upper, df_upper``) and both cells'
    P(fail): the interval is ``estimate - t se_lower .. estimate + t se_upper``, and a non-inferiority test reads
    the lower side, at its own level from ``lower_tail`` (:func:`_lower_tail`). ``cell`` is (size, depth,
    reference).

    ``whole_depth``: the reference's healthy runs against all the depth's runs, failed ones included (a depth
    whose runs mostly fail, e.g. one that scores at the majority rate and is flagged by the binomial rule: it has
    no healthy mean to speak of). Its difference to the healthy reference then estimates
    :math:`m_k - h_0`, and only the reference's failure part is added.
    """
    size, depth, reference = cell
    k, r = (depth, size), (reference, size)
    p_k, p_0 = (0.0 if whole_depth else parts.p[k]), parts.p[r]
    row_k = None if whole_depth else parts.p_rows[k]
    (b_k, v_bk, df_bk), (b_0, v_b0, df_b0) = parts.failed[k], parts.failed[r]
    h_k, h_0 = (0.0 if whole_depth else parts.healthy[k]), parts.healthy[r]
    if not (np.isfinite(h_k) and np.isfinite(h_0)):
        raise ModelFitError(f"frozen_layers={depth} or the reference at train_size={size} has no healthy run.")
    estimate = healthy_pairs["estimate"] + p_k * (b_k - h_k) - p_0 * (b_0 - h_0)
    weight = 1.0 - (p_k + p_0) / 2
    known = [(weight**2 * healthy_pairs["se"] ** 2, healthy_pairs["df"]), (p_k**2 * v_bk, df_bk),
             (p_0**2 * v_b0, df_b0)]  # fmt: skip
    terms = ((k, p_k, row_k, b_k - h_k), (r, p_0, parts.p_rows[r], b_0 - h_0))
    v_fail, low, high = _sides(parts, terms, whole_depth, confidence)
    z = stats.norm.ppf(0.5 + confidence / 2)
    se, df = joined_se(known, v_fail)
    se_lower, df_lower = joined_se(known, (low / z) ** 2)
    se_upper, df_upper = joined_se(known, (high / z) ** 2)
    return {**healthy_pairs, "estimate": float(estimate), "se": se, "df": df, "se_lower": se_lower,
            "df_lower": df_lower, "se_upper": se_upper, "df_upper": df_upper, "p_fail": p_k,
            "p_fail_reference": p_0, "failure_sides": parts.sides,
            "lower_tail": _lower_tail(parts, terms, whole_depth, known)}  # fmt: skip


def _sides(parts: FailureParts, terms: tuple, whole_depth: bool, confidence: float) -> tuple[float, float, float]:
    """The failure part's delta-method variance and its interval's lower and upper half-widths at ``confidence``,
    by the rule ``parts`` was fitted with (:data:`FAILURE_SIDES`). ``terms`` are the depth's and the reference's
    ``(cell, P, (row, Cov) or None, b - h)``."""
    (k, p_k, row_k, gap_k), (r, p_0, row_0, gap_0) = terms
    if parts.posterior is not None:
        return _posterior_sides(parts, ((k, p_k, row_k), (r, p_0, row_0)), (gap_k, -gap_0), confidence)
    if parts.bounds is None:
        return failure_sides(((p_k, row_k), (p_0, row_0)), (gap_k, gap_0), confidence)
    # the slope model's own intervals; a depth entering whole has no failure term
    k_cell = (p_k, row_k, (0.0, 0.0) if whole_depth else parts.bounds[k])
    return slope_failure_sides((k_cell, (p_0, row_0, parts.bounds[r])), (gap_k, gap_0))


def _lower_tail(parts: FailureParts, terms: tuple, whole_depth: bool, known: list) -> tuple | None:
    """The contrast's lower SE and df with the failure part's lower side read at each one-sided level of
    :data:`~freezestats.stats.inference.tail_matched.TAIL_ALPHAS`, for tests at their own level; None for the
    slope model, whose intervals come at one level from its fit."""
    if parts.bounds is not None:
        return None
    return lower_ladder(known, lambda level: _sides(parts, terms, whole_depth, level)[1], joined_se)


def _posterior_sides(parts: FailureParts, cells: tuple, weights: tuple[float, float],
                     confidence: float) -> tuple[float, float, float]:  # fmt: skip
    """The failure part's delta-method variance and its interval's lower and upper half-widths, read from the
    pooled model's joint draws (:mod:`~freezestats.stats.failures.rate_posterior`): the equal-tailed interval of
    :math:`F` over the draws, measured from :math:`F` at the mode (a side that the draws put on the estimate's
    other side counts as 0). ``cells`` are ``(cell, P, (row, Cov) or None)`` of the depth and the reference; a
    cell with no row (P 0 or 1 by rule, or a depth entering whole) adds nothing, as in
    :func:`~freezestats.stats.failures.two_part.failure_sides`."""
    terms = [(cell, p, row, w) for (cell, p, row), w in zip(cells, weights, strict=True) if row is not None]
    if not terms:
        return 0.0, 0.0, 0.0
    variance = failure_delta_variance([(p, row, w) for _, p, row, w in terms])
    at_mode = sum(w * p for _, p, _, w in terms)
    low, high = parts.posterior.interval([(cell, w) for cell, _, _, w in terms], confidence)
    return variance, max(at_mode - low, 0.0), max(high - at_mode, 0.0)

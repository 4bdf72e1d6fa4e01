r"""Contrasts of the expected score when some runs fail: P(fail) and the healthy mean, modelled apart.

Failed runs sit at the majority class, tens of points below healthy ones, so a cell's scores are a healthy
spread plus, now and then, a far outlier. With 5 seeds a cell shows no failure three times in four even when 5%
of runs fail, and no interval built from the cell's (or the size's) own scores can cover the expected score
then: the spread it sees has no trace of the failure mode (`bench/coverage.py`, scenario b). The remedy is to
model the two parts where each is estimable:

.. math:: m_{kn} = (1 - p_{kn})\,h_{kn} + p_{kn}\,b_{kn},

with :math:`h_{kn}` the healthy runs' mean (the mixed model fitted without failed runs), :math:`p_{kn}` the
failure probability from a binomial GLMM that pools levels, sizes and cells
(:mod:`freezestats.stats.failures.pooled_rates`: (1 | level) + (1 | size) + (1 | level:size)), and :math:`b_{kn}` the
mean score of the cell's failed runs, or of the size's where the cell has none (a collapsed run's held-out score
still varies by a point or two, and where every run of a cell failed :math:`b` is all the cell has).

The interval of :math:`m_{kn} - m_{0n} = (h_k - h_0) + F` with :math:`F = p_k (b_k - h_k) - p_0 (b_0 - h_0)`
has two independent parts (the fits are independent given which runs failed):

* the healthy part, from the mixed model's covariance with Satterthwaite df, plus each failed mean's sampling
  variance (:math:`n_b - 1` df). A cell that the healthy fit leaves out (no healthy run at some size, or with a
  variance per cell only one, whose variance REML would fit near zero) is paired with the reference by seed:
  the variance of the per-seed differences carries the seed effects the two cells share, which an independent
  sum counts twice (scenario a's frozen 12 at n = 1000 covered 100% that way). A lone healthy run borrows the
  size's run variance (:func:`_run_variance`);
* the failure part :math:`F`, which is not symmetric: when the reference cell shows no failure its P comes out
  small, and the delta method's SE on the probability scale, which shrinks with P, leaves no room for the true
  rate above it (scenario b, frozen 12 vs 0 at n = 1000, covered 0.887 that way). So each P gets a Wilson
  interval at the number of runs its model variance is worth, :math:`p(1-p)/\operatorname{Var}(\hat p)` (the
  effective sample size of Korn & Graubard 1998), and the two terms of :math:`F` join by the method of variance
  estimates recovery with their correlation (MOVER, Zou & Donner 2008). Each side is at least as long as the
  delta method's half-width: the pooled failure model lends a level's failures at small sizes to its large
  ones (frozen 10 fails often at n = 100 in scenario b), and the symmetric width covers that bias where
  Wilson's short side does not (frozen 10 vs 0 at n = 1000 covered 0.899 with Wilson's sides alone). Each
  side's half-width becomes a per-side variance, added to the healthy part's.

So each contrast has a lower and an upper SE (``se_lower``, ``se_upper``, with their Welch–Satterthwaite df,
the failure part counted as normal); the interval is ``estimate - t se_lower .. estimate + t se_upper``, a
non-inferiority test uses the lower side, and ``se`` is the symmetric delta-method SE for reference. A contrast
with no variance at all (every run of both cells gave the same score) gets no interval (NaN), never a
zero-width one.

References
----------
Korn, E. L. & Graubard, B. I. (1998). Confidence intervals for proportions with small expected number of
positive counts estimated from survey data. *Survey Methodology* 24(2), 193-201.
Zou, G. Y. & Donner, A. (2008). Construction of confidence limits about effect measures: a general approach.
*Statistics in Medicine* 27(10), 1693-1702.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special, stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.failures.firth import fit_firth
from freezestats.stats.failures.pooled_rates import pooled_failure_probabilities
from freezestats.stats.inference.emm import _design_rows
from freezestats.stats.models.mixed import fit_mixed

__all__ = [
    "TWO_PART_COLUMNS",
    "failed_mean",
    "failure_delta_variance",
    "failure_sides",
    "failures_within_cells",
    "joined_se",
    "two_part_contrasts",
]

TWO_PART_COLUMNS = [
    "train_size", "frozen_layers", "reference", "estimate", "se", "df", "ci_low", "ci_high", "p_val",
    "se_lower", "df_lower", "se_upper", "df_upper",
    "p_fail", "p_fail_reference", "healthy_difference", "failed_mean",
]  # fmt: skip

_RUN_KEYS = ("seed", "subset_draw", "order_seed")  # what identifies a run within a cell, where present


@dataclass(frozen=True)
class _Cell:
    """One cell's pieces of m = (1 - p) h + p b, as the contrast needs them."""

    level: int
    row: np.ndarray | None  # the healthy fit's design row; None when the fit left the level out
    healthy: float  # h: the model's estimate, or the cell's healthy mean (b when it has no healthy run)
    healthy_var: float  # Var(h)
    failed: tuple[float, float, float]  # b, the variance of that mean, its df
    p: float
    p_row: tuple[np.ndarray, np.ndarray] | None  # (linear-predictor row, Cov); None where P is 0 or 1 by rule
    part: pd.Series  # the scores h averages (b's where no run is healthy), indexed by run identity
    all_failed: bool


def two_part_contrasts(
    runs: pd.DataFrame,
    response: str,
    *,
    reference: int = 0,
    variance: str = "per_size",
    failure_model: str = "pooled",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Each frozen level minus the reference, per train size, on the expected score with failures included.

    ``runs`` is one task's grid runs with a boolean ``failed`` column (the analysis passes failure judged on
    the analysed metric's checkpoint); the healthy runs' mixed model is fitted with ``variance``. P(fail) comes
    from ``failure_model``: ``pooled`` (:mod:`freezestats.stats.failures.pooled_rates`, the default) or ``firth``
    (one coefficient per level and a per-level slope in log2 size, the model before it). Returns
    :data:`TWO_PART_COLUMNS`, one row per (size, level); with no failure at all it is the healthy model's
    contrasts.
    """
    if "failed" not in runs.columns:
        raise ModelFitError("two_part_contrasts needs a `failed` column (which runs failed).")
    failed = runs["failed"].fillna(False).astype(bool).to_numpy()
    if failed.all():
        raise ModelFitError("two_part_contrasts: every run failed, so there is no healthy mean to model.")
    healthy = fit_mixed(runs, response, include_failed=False, variance=variance)
    if failure_model not in ("pooled", "firth"):
        raise ModelFitError(f"`failure_model` must be 'pooled' or 'firth', but got {failure_model!r}.")
    try:
        pooled = pooled_failure_probabilities(runs, failed) if failure_model == "pooled" else None
    except ModelFitError:  # a degenerate failure pattern: the per-level Firth model always has an estimate
        pooled = None
    p_fail, p_rows = pooled if pooled is not None else _failure_probabilities(runs, failed)
    values = pd.to_numeric(runs[response], errors="coerce").to_numpy(dtype=float)
    sizes, levels = runs["train_size"].to_numpy(), runs["frozen_layers"].to_numpy()
    keys = [c for c in _RUN_KEYS if c in runs.columns]
    identity = pd.MultiIndex.from_frame(runs[keys]) if keys else runs.index  # no keys: no two cells' runs pair
    rows = []
    for size in sorted(set(sizes)):
        at = failed & (sizes == size)
        b_size = failed_mean(values[at]) if at.any() else failed_mean(values[failed])

        def cell(level: int, run_var: float, size: int = size, b_size: tuple = b_size) -> _Cell:
            here = (sizes == size) & (levels == level)
            b = failed_mean(values[failed & here]) if (failed & here).any() else b_size
            row, h, v = _healthy_part(healthy, values, failed, here, level, size, b, run_var)
            all_failed = not (here & ~failed).any()
            use = here & (failed if all_failed else ~failed)
            part = pd.Series(values[use], index=identity[use])
            p, p_row = p_fail[(level, size)], p_rows[(level, size)]
            return _Cell(level, row, h, v, b, p, p_row, part, all_failed=all_failed)

        run_var = _run_variance(values, ~failed, sizes, levels, size)
        ref = cell(reference, run_var)
        for level in sorted(set(levels) - {reference}):
            rows.append(_contrast(size, cell(level, run_var), ref, healthy, confidence))
    return pd.DataFrame(rows)[TWO_PART_COLUMNS]


def failures_within_cells(
    runs: pd.DataFrame, failed: np.ndarray | pd.Series, response: str, *, alpha: float = 0.05
) -> bool:
    """Whether some cell mixes healthy runs with failed runs that form a second mode far below them: then the
    cell's scores are a healthy spread plus far outliers, which no normal model of the cell covers, and the
    answer comes from the two-part contrasts.

    The modes are apart when even the cell's highest failed run lies below its healthy mean by more than any of
    the size's N runs would stray by chance: ``z_{1 - alpha/N}`` times the size's pooled within-cell SD (a
    Bonferroni bound). That SD is of all runs, failed ones included, which can only widen it: the healthy runs
    alone are cut at the failure threshold, and their spread is too narrow where a cell straddles it.

    A collapsed run in a cell scoring 0.9 lies 30-60 SDs below. The runs of a deep cell whose mean sits at the
    majority rate straddle the failure threshold as one normal spread does (the highest failed run just below
    it, the healthy ones just above), and the per-size model covers their contrasts (``bench/coverage.py``,
    scenario a: with such cells counted, every study there went two-part and its intervals over-covered). Cells
    where every run failed do not count either: they are a point mass that a normal model with a floored
    variance describes.
    """
    flags = np.asarray(failed, dtype=bool)
    values = pd.to_numeric(runs[response], errors="coerce").to_numpy(dtype=float)
    table = pd.DataFrame({"level": runs["frozen_layers"].to_numpy(), "size": runs["train_size"].to_numpy(),
                          "y": values, "failed": flags})  # fmt: skip
    for _, at in table.groupby("size"):
        groups = at.groupby("level")["y"]
        spread = float(np.sqrt(_pooled_within_cell_variance(groups)))
        bound = stats.norm.ppf(1 - alpha / len(at)) * spread
        means = at[~at["failed"]].groupby("level")["y"].mean()
        highest = at[at["failed"]].groupby("level")["y"].max()
        mixed = highest.index.intersection(means.index)
        if (means[mixed] - highest[mixed] > bound).any():
            return True
    return False


def failed_mean(scores: np.ndarray) -> tuple[float, float, float]:
    """Mean of failed runs' scores, the variance of that mean and its df (n - 1); (0, 0, inf) for none.

    With no failure P(fail) is exactly 0 and the failed mean has no weight; 0.0 keeps the arithmetic finite.
    """
    scores = scores[np.isfinite(scores)]
    if len(scores) == 0:
        return 0.0, 0.0, np.inf
    if len(scores) == 1:
        return float(scores[0]), 0.0, np.inf
    return float(scores.mean()), float(np.var(scores, ddof=1)) / len(scores), float(len(scores) - 1)


def _failure_probabilities(runs: pd.DataFrame, failed: np.ndarray) -> tuple[dict, dict]:
    """P(fail) per (level, size) from Firth's logistic model (level + size + level × log2 size), and per cell
    ``(row, Cov(beta))`` of its linear predictor (``None`` when no run failed: P(fail) is then 0, with no
    variance)."""
    cells = runs[["frozen_layers", "train_size"]].drop_duplicates()
    if not failed.any():
        return {tuple(c): 0.0 for c in cells.to_numpy()}, {tuple(c): None for c in cells.to_numpy()}
    design = pd.get_dummies(runs[["frozen_layers", "train_size"]].astype(str), drop_first=True, dtype=float)
    # plus one smooth interaction: each frozen level's failure odds change along log2(size) at its own rate, as
    # deep freezing fails at every size while shallow levels fail at small sizes only
    log_size = np.log2(runs["train_size"].to_numpy(dtype=float))
    slope = pd.get_dummies(runs["frozen_layers"].astype(str), dtype=float).to_numpy()[:, 1:]
    x = np.column_stack([np.ones(len(runs)), design.to_numpy(), slope * (log_size - log_size.mean())[:, None]])
    fit = fit_firth(x, failed.astype(float))
    p_fail, rows = {}, {}
    for position in np.flatnonzero(~runs.duplicated(["frozen_layers", "train_size"]).to_numpy()):
        xi = x[position]  # the design row of the cell's first run (every run of a cell has the same row)
        key = (runs["frozen_layers"].iloc[position], runs["train_size"].iloc[position])
        p_fail[key] = float(special.expit(xi @ fit.beta))
        rows[key] = (xi, fit.cov)
    return p_fail, rows


def _run_variance(values: np.ndarray, healthy: np.ndarray, sizes: np.ndarray, levels: np.ndarray, size: int) -> float:
    """One healthy run's variance at ``size``, for a cell with a lone healthy run, which the healthy fit leaves out
    (a per-cell variance cannot be fitted from one run): the within-cell variance of the size's healthy runs,
    pooled over its cells with two or more. Runs within a cell differ by seed, so it holds the seed variance that
    an independent mean of one run carries. Pooled over every size where no cell of this one has two; 0 where
    no cell anywhere has."""
    for at in (healthy & (sizes == size), healthy):
        table = pd.DataFrame({"level": levels[at], "size": sizes[at], "y": values[at]}).dropna()
        groups = table.groupby(["level", "size"])["y"]
        if (groups.count() > 1).any():
            return _pooled_within_cell_variance(groups)
    return 0.0


def _pooled_within_cell_variance(groups: pd.core.groupby.SeriesGroupBy) -> float:
    """The cells' variances pooled by their df (n - 1); 0 where no cell has two values."""
    dof = (groups.count() - 1).clip(lower=0)
    return float((groups.var(ddof=1).fillna(0.0) * dof).sum() / dof.sum()) if dof.sum() > 0 else 0.0


def _healthy_part(healthy, values, failed, here, level, size, b, run_var) -> tuple:
    """The healthy mean of a cell: the model's design row (estimate from the fit), or, for a level the healthy
    fit left out, ``(None, cell mean, its variance)``: the failed mean ``b`` and its variance when the cell has
    no healthy run (the cell is then its failed runs); one healthy run borrows ``run_var``, the size's run
    variance (:func:`_run_variance`), and more than one keep their own spread, floored at a quarter of it."""
    if level in healthy.frozen_levels and size in healthy.train_sizes:
        row = _design_rows(healthy, np.array([level]), np.array([size]))[0]
        return row, float(row @ healthy.params), float(row @ healthy.cov_params @ row)
    cell = here & ~failed
    n = int(cell.sum())
    if n == 0:
        return None, b[0], b[1]
    spread = float(np.var(values[cell], ddof=1)) if n > 1 else run_var
    return None, float(values[cell].mean()), max(spread, run_var / 4) / n


def _contrast(size: int, k: _Cell, ref: _Cell, healthy, confidence: float) -> dict:
    """m_k - m_0 with a lower and an upper SE: the healthy part (and the failed means) symmetric, the failure
    part from :func:`failure_sides`, joined per side (module docstring)."""
    (b_k, v_b, df_b), (b_0, v_b0, df_b0) = k.failed, ref.failed
    estimate = (1 - k.p) * k.healthy + k.p * b_k - ((1 - ref.p) * ref.healthy + ref.p * b_0)
    weights = (1.0 if k.all_failed else 1 - k.p, 1.0 if ref.all_failed else 1 - ref.p)
    v_healthy, df_healthy = _healthy_variance(k, ref, weights, healthy)
    # a cell without healthy runs has its failed runs in the healthy part already (weight 1, h = b)
    v_b_parts = [(0.0 if c.all_failed else c.p**2 * v, d) for c, v, d in ((k, v_b, df_b), (ref, v_b0, df_b0))]
    v_fail, low, high = failure_sides(
        ((k.p, k.p_row), (ref.p, ref.p_row)), (b_k - k.healthy, b_0 - ref.healthy), confidence
    )
    known = [(v_healthy, df_healthy), *v_b_parts]
    se, df = joined_se(known, v_fail)
    z = stats.norm.ppf(0.5 + confidence / 2)
    se_lower, df_lower = joined_se(known, (low / z) ** 2)
    se_upper, df_upper = joined_se(known, (high / z) ** 2)
    facing_zero = (se_lower, df_lower) if estimate >= 0 else (se_upper, df_upper)
    with np.errstate(invalid="ignore"):
        p_val = float(2 * stats.t.sf(abs(estimate) / facing_zero[0], facing_zero[1]))
    return {
        "train_size": size, "frozen_layers": k.level, "reference": ref.level, "estimate": estimate, "se": se,
        "df": df, "ci_low": estimate - stats.t.ppf(0.5 + confidence / 2, df_lower) * se_lower,
        "ci_high": estimate + stats.t.ppf(0.5 + confidence / 2, df_upper) * se_upper, "p_val": p_val,
        "se_lower": se_lower, "df_lower": df_lower, "se_upper": se_upper, "df_upper": df_upper,
        "p_fail": k.p, "p_fail_reference": ref.p, "healthy_difference": k.healthy - ref.healthy, "failed_mean": b_k,
    }  # fmt: skip


def _healthy_variance(k: _Cell, ref: _Cell, weights: tuple[float, float], healthy) -> tuple[float, float]:
    """Variance and df of ``w_k h_k - w_0 h_0``: from the fit's covariance (Satterthwaite df) when both cells
    are in it, else from the two cells' scores paired by run identity (n_pairs - 1 df), else (fewer than two
    pairs) as independent means with 4 df."""
    w_k, w_0 = weights
    if k.row is not None and ref.row is not None:
        c = w_k * k.row - w_0 * ref.row
        df = float(np.asarray(healthy.contrast_df(c[None, :]))[0])
        return float(c @ healthy.cov_params @ c), df if np.isfinite(df) and df >= 1 else 1.0  # a floored variance
    unique = k.part.index.is_unique and ref.part.index.is_unique
    pairs = pd.concat([k.part.rename("k"), ref.part.rename("ref")], axis=1, join="inner").dropna() if unique else []
    if len(pairs) >= 2:
        differences = w_k * pairs["k"] - w_0 * pairs["ref"]
        return float(differences.var(ddof=1)) / len(pairs), float(len(pairs) - 1)
    return w_k**2 * k.healthy_var + w_0**2 * ref.healthy_var, 4.0


def failure_delta_variance(terms: Sequence[tuple[float, tuple[np.ndarray, np.ndarray], float]]) -> float:
    """The delta-method variance of :math:`\\sum_j w_j P_j` for ``terms`` = ``[(P_j, (row_j, Cov), w_j), ...]``
    over the pooled model's joint vector (:func:`~freezestats.stats.failures.pooled_rates.pooled_failure_fit`:
    every row shares one ``Cov``); what both the Wilson-MOVER and the joint-draw sides report as the failure
    part's variance."""
    gradient = sum(w * p * (1 - p) * row[0] for p, row, w in terms)
    return float(gradient @ terms[0][1][1] @ gradient)


def failure_sides(
    cells: tuple[tuple[float, tuple | None], tuple[float, tuple | None]], gaps: tuple[float, float], confidence: float
) -> tuple[float, float, float]:
    """The failure part F = p_k (b_k - h_k) - p_0 (b_0 - h_0): its delta-method variance and the lower and upper
    half-widths of its interval (``gaps`` are the two brackets). Each P gets a Wilson interval at its effective
    number of runs, the two terms join by MOVER with their correlation, and each side is at least the delta
    method's half-width (module docstring). ``cells`` are the depth's and the reference's ``(P, p_row)``, with
    ``p_row`` as :func:`~freezestats.stats.failures.pooled_rates.pooled_failure_probabilities` gives it; cells
    whose P is 0 or 1 by rule (``p_row`` None) add nothing."""
    known = [(p, row, sign * gap) for (p, row), sign, gap in zip(cells, (1, -1), gaps, strict=True)]
    known = [(p, r, w) for p, r, w in known if r is not None]
    if not known:
        return 0.0, 0.0, 0.0
    cov = known[0][1][1]
    design = np.array([r[0] for _, r, _ in known])
    p = np.array([p for p, _, _ in known])
    weight = np.array([w for _, _, w in known])
    eta_cov = design @ cov @ design.T
    z = stats.norm.ppf(0.5 + confidence / 2)
    below, above = [], []  # each term's distance from its estimate to its interval's lower and upper end
    for p_j, w_j, v_j in zip(p, weight, np.diag(eta_cov), strict=True):
        information = p_j * (1 - p_j) * v_j  # 1 / effective runs; 0 where P is 0 or 1 in floating point
        low, high = _wilson(p_j, 1.0 / information if information > 0 else np.inf, z)
        ends = sorted((w_j * low, w_j * high))
        below.append(w_j * p_j - ends[0])
        above.append(ends[1] - w_j * p_j)
    r = 0.0
    if len(known) == 2 and eta_cov[0, 0] > 0 and eta_cov[1, 1] > 0:
        r = float(np.sign(weight[0] * weight[1]) * eta_cov[0, 1] / np.sqrt(eta_cov[0, 0] * eta_cov[1, 1]))

    def joined(d: list[float]) -> float:
        return float(np.sqrt(max(sum(x * x for x in d) + (2 * r * d[0] * d[1] if len(d) == 2 else 0.0), 0.0)))

    v_delta = failure_delta_variance(known)
    # each side takes the longer of the two: Wilson's has room above a P near 0, and the delta method's symmetric
    # width has room for the failure model's own bias, a level that fails more at small sizes lending that to
    # its large sizes (bench/coverage.py, scenario b: frozen 12 vs 0 at n = 1000 covered 0.887 with the delta
    # method alone, frozen 10 vs 0 there 0.899 with Wilson alone)
    delta = z * np.sqrt(v_delta)
    return v_delta, max(joined(below), delta), max(joined(above), delta)


def _wilson(p: float, n: float, z: float) -> tuple[float, float]:
    """Wilson's interval for a proportion ``p`` estimated with the information of ``n`` runs: the effective
    number that the model's variance implies, ``p (1 - p) / Var(p)`` (Korn & Graubard 1998). Near 0 it leaves
    room above ``p`` that the delta method's symmetric SE, which shrinks with ``p``, does not."""
    if not np.isfinite(n):
        return p, p
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(centre - half, 0.0), min(centre + half, 1.0)


def joined_se(known: list[tuple[float, float]], v_normal: float) -> tuple[float, float]:
    """SE and Welch–Satterthwaite df of a sum of independent parts: ``known`` (variance, df) pairs plus one
    normal part; NaN SE where there is no variance at all (no interval, never a zero-width one)."""
    var = sum(v for v, _ in known) + v_normal
    denominator = sum(v**2 / d for v, d in known if v > 0 and np.isfinite(d))
    df = var**2 / denominator if denominator > 0 else np.inf
    return (float(np.sqrt(var)) if var > 0 else np.nan), float(df)

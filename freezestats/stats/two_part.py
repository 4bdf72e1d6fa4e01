r"""Contrasts of the expected score when some runs fail: P(fail) and the healthy mean, modelled apart.

Failed runs sit at the majority class, tens of points below healthy ones, so a cell's scores are a healthy
spread plus, now and then, a far outlier. With 5 seeds a cell shows no failure three times in four even when 5%
of runs fail, and no interval built from the cell's (or the size's) own scores can cover the expected score
then: the spread it sees has no trace of the failure mode (`bench/coverage.py`, scenario b). The remedy is to
model the two parts where each is estimable:

.. math:: m_{kn} = (1 - p_{kn})\,h_{kn} + p_{kn}\,b_{kn},

with :math:`h_{kn}` the healthy runs' mean (the mixed model fitted without failed runs), :math:`p_{kn}` the
failure probability from a binomial GLMM that pools levels, sizes and cells
(:mod:`freezestats.stats.failure_rates_pooled`: (1 | level) + (1 | size) + (1 | level:size)), and :math:`b_{kn}` the
mean score of the cell's failed runs, or of the size's where the cell has none (taken as known: it is the
majority rate up to a few items, but a collapsed run's held-out score still varies by a point or two, and where
every run of a size failed :math:`b` is all the contrast has). The contrast :math:`m_{kn} - m_{0n}` gets its
variance by the delta method from the two fits, which are independent given which runs failed, plus
:math:`p^2` times the variance of each failed mean; its df combine the healthy contrast's Satterthwaite df, the
failed means' :math:`n_b - 1` and a normal failure part (Welch–Satterthwaite). A contrast with no variance at
all (every run of both cells gave the same score) gets no interval (NaN), never a zero-width one.
Frozen levels that the healthy fit leaves out (some cell with no healthy run) use their
cell's healthy mean and variance where the cell has healthy runs, and :math:`b_{kn}` where it has none.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import special, stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.emm import _design_rows
from freezestats.stats.failure_rates_pooled import pooled_failure_probabilities
from freezestats.stats.failures import _firth
from freezestats.stats.mixed import fit_mixed

__all__ = ["TWO_PART_COLUMNS", "failures_within_cells", "two_part_contrasts"]

TWO_PART_COLUMNS = [
    "train_size", "frozen_layers", "reference", "estimate", "se", "df", "ci_low", "ci_high", "p_val",
    "p_fail", "p_fail_reference", "healthy_difference", "failed_mean",
]  # fmt: skip


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
    from ``failure_model``: ``pooled`` (:mod:`freezestats.stats.failure_rates_pooled`, the default) or ``firth``
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
    p_fail, p_grad = pooled if pooled is not None else _failure_probabilities(runs, failed)
    values = pd.to_numeric(runs[response], errors="coerce").to_numpy(dtype=float)
    sizes = runs["train_size"].to_numpy()
    levels = runs["frozen_layers"].to_numpy()
    # with no failure P(fail) is exactly 0 and the failed mean has no weight; 0.0 keeps the arithmetic finite
    overall_failed = _failed_mean(values[failed])
    rows = []
    for size in sorted(set(sizes)):
        at = failed & (sizes == size)
        b_size = _failed_mean(values[at]) if at.any() else overall_failed

        def b_of(level: int, size: int = size, b_size: tuple = b_size) -> tuple[float, float, float]:
            """Failed runs' mean score in the cell when it has any (a collapsed frozen cell sits a little above
            the majority rate), else at the size: (mean, variance of the mean, its df)."""
            cell = failed & (sizes == size) & (levels == level)
            return _failed_mean(values[cell]) if cell.any() else b_size

        b_ref = b_of(reference)
        ref = _healthy_part(healthy, runs, values, failed, reference, size, b_ref[0], 0.0)
        n_ref = int(((levels == reference) & (sizes == size) & ~failed).sum())
        run_var = ref[2] * max(n_ref, 1)  # one healthy run's variance at this size, from the reference's estimate
        for level in sorted(set(levels) - {reference}):
            b = b_of(level)
            part = _healthy_part(healthy, runs, values, failed, level, size, b[0], run_var)
            rows.append(_contrast(size, level, reference, part, ref, p_fail, p_grad, (b, b_ref), healthy, confidence))
    return pd.DataFrame(rows)[TWO_PART_COLUMNS]


def failures_within_cells(runs: pd.DataFrame, failed: np.ndarray | pd.Series) -> bool:
    """Whether some cell has failed *and* healthy runs: then its scores are a healthy spread plus far outliers,
    which no normal model of the cell covers, and the answer comes from the two-part contrasts.

    Cells where every run failed (a fully frozen encoder, or a size too small for any depth) do not count: they
    are a point mass at the majority rate that a normal model with a floored variance describes, and the
    per-size model covers their contrasts (``bench/coverage.py``, scenario a).
    """
    flags = pd.Series(np.asarray(failed, dtype=bool), index=runs.index)
    by_cell = flags.groupby([runs["frozen_layers"], runs["train_size"]]).agg(["any", "all"])
    return bool((by_cell["any"] & ~by_cell["all"]).any())


def _failed_mean(scores: np.ndarray) -> tuple[float, float, float]:
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
    ``(dp/dbeta, Cov(beta))`` for the delta method (``None`` when no run failed: P(fail) is then 0, with no
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
    fit = _firth(x, failed.astype(float))
    p_fail, grad = {}, {}
    for position in np.flatnonzero(~runs.duplicated(["frozen_layers", "train_size"]).to_numpy()):
        xi = x[position]  # the design row of the cell's first run (every run of a cell has the same row)
        p = float(special.expit(xi @ fit.beta))
        key = (runs["frozen_layers"].iloc[position], runs["train_size"].iloc[position])
        p_fail[key] = p
        grad[key] = (p * (1 - p) * xi, fit.cov)
    return p_fail, grad


def _healthy_part(healthy, runs, values, failed, level, size, b, run_var) -> tuple:
    """The healthy mean of a cell: the model's design row (estimate from the fit), or, for a level the healthy
    fit left out, ``(None, cell mean, its variance)`` (``b`` and 0 when the cell has no healthy run; one healthy
    run borrows ``run_var``, the size's run variance)."""
    if level in healthy.frozen_levels and size in healthy.train_sizes:
        row = _design_rows(healthy, np.array([level]), np.array([size]))[0]
        return row, float(row @ healthy.params), float(row @ healthy.cov_params @ row)
    cell = (runs["frozen_layers"].to_numpy() == level) & (runs["train_size"].to_numpy() == size) & ~failed
    n = int(cell.sum())
    if n == 0:
        return None, b, 0.0
    spread = float(np.var(values[cell], ddof=1)) if n > 1 else run_var
    return None, float(values[cell].mean()), max(spread, run_var / 4) / n


def _contrast(size, level, reference, part, ref, p_fail, p_grad, b, healthy, confidence) -> dict:
    """m_k - m_0 and its delta-method variance (healthy part from the fit's covariance, failure part from
    Firth's), with Satterthwaite df for the healthy share."""
    (row_k, h_k, v_k), (row_0, h_0, v_0) = part, ref
    ((b, v_b, df_b), (b_ref, v_b_ref, df_b_ref)), pk, p0 = b, p_fail[(level, size)], p_fail[(reference, size)]
    estimate = (1 - pk) * h_k + pk * b - ((1 - p0) * h_0 + p0 * b_ref)
    if row_k is not None and row_0 is not None:
        c = (1 - pk) * row_k - (1 - p0) * row_0
        v_healthy = float(c @ healthy.cov_params @ c)
        df_healthy = float(np.asarray(healthy.contrast_df(c[None, :]))[0])
        df_healthy = df_healthy if np.isfinite(df_healthy) and df_healthy >= 1 else 1.0  # a floored variance: df ~ 0
    else:  # a cell mean outside the fit: independent of the reference's estimate (conservative with paired seeds)
        v_healthy = (1 - pk) ** 2 * v_k + (1 - p0) ** 2 * v_0
        df_healthy = 4.0
    v_fail = 0.0
    known = [g for g in (p_grad[(level, size)], p_grad[(reference, size)]) if g is not None]
    if known:  # a cell whose P is 0 or 1 by rule (None) adds no failure variance
        cov = known[0][1]
        gk, g0 = (np.zeros(len(cov)) if g is None else g[0] for g in (p_grad[(level, size)], p_grad[(reference, size)]))
        a = (b - h_k) * gk - (b_ref - h_0) * g0
        v_fail = float(a @ cov @ a)
    v_b_parts = (pk**2 * v_b, p0**2 * v_b_ref)  # the failed means' own sampling variance
    var = v_healthy + v_fail + sum(v_b_parts)
    parts = [(v_healthy, df_healthy), (v_b_parts[0], df_b), (v_b_parts[1], df_b_ref)]
    denominator = sum(v**2 / d for v, d in parts if v > 0 and np.isfinite(d))
    df = var**2 / denominator if denominator > 0 else np.inf
    se = float(np.sqrt(var)) if var > 0 else np.nan  # no spread anywhere: no interval, not a zero-width one
    half = stats.t.ppf(0.5 + confidence / 2, df) * se
    return {
        "train_size": size, "frozen_layers": level, "reference": reference, "estimate": estimate, "se": se,
        "df": df, "ci_low": estimate - half, "ci_high": estimate + half,
        "p_val": float(2 * stats.t.sf(abs(estimate) / se, df)) if np.isfinite(se) else np.nan,
        "p_fail": pk, "p_fail_reference": p0, "healthy_difference": h_k - h_0, "failed_mean": b,
    }  # fmt: skip

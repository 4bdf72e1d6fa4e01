"""Holm and Bonferroni adjustment: the one copy every stats module uses.

``statsmodels.stats.multitest.multipletests`` gives the same numbers, but every call runs ``gc.collect()``
(statsmodels does so to free memory in its large-array paths). In a long-lived process holding a loaded model
(the test suite, a notebook) one collection costs tens of milliseconds, and an analysis makes a call per train
size, task and fit: seconds spent outside the statistics. The tests check these functions against
``multipletests``.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = ["adjust_p", "adjusted_t_tests", "holm"]


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p values; NaN entries stay NaN and do not count as tests."""
    p = np.asarray(p, dtype=float)
    adjusted = np.full(p.shape, np.nan)
    finite = np.flatnonzero(np.isfinite(p))
    m = finite.size
    if m == 0:
        return adjusted
    order = finite[np.argsort(p[finite], kind="stable")]
    steps = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted[order] = np.maximum.accumulate(steps)
    return adjusted


def adjust_p(p: np.ndarray, method: str) -> np.ndarray:
    """``holm``, ``bonferroni`` or ``none`` over the finite entries of ``p`` (NaN stays NaN)."""
    p = np.asarray(p, dtype=float)
    if method == "holm":
        return holm(p)
    if method == "bonferroni":
        m = int(np.isfinite(p).sum())
        return np.where(np.isfinite(p), np.minimum(1.0, p * m), np.nan)
    if method == "none":
        return p.copy()
    raise ValueError(f"`method` must be 'holm', 'bonferroni' or 'none', but got {method!r}.")


def adjusted_t_tests(
    estimate: np.ndarray, se: np.ndarray, df: np.ndarray, families: np.ndarray, adjust: str, confidence: float
) -> dict[str, np.ndarray]:
    """Two-sided t tests of ``estimate / se`` on ``df``, and their intervals, adjusted within each family.

    Returns ``p_val``, ``p_adj`` (:func:`adjust_p` within each value of ``families``), ``ci_low``/``ci_high``
    (per comparison) and ``ci_low_adj``/``ci_high_adj``: Bonferroni's simultaneous intervals over the family for
    ``holm`` and ``bonferroni`` (Holm's step-down has no interval form), the per-comparison ones for ``none``.
    """
    estimate, se, df = (np.asarray(a, dtype=float) for a in (estimate, se, df))
    with np.errstate(divide="ignore", invalid="ignore"):
        p_val = 2 * stats.t.sf(np.abs(estimate / se), df)
    p_adj = np.full(p_val.shape, np.nan)
    crit = stats.t.ppf(0.5 + confidence / 2, df)
    crit_adj = crit.copy()
    families = np.asarray(families)
    for family in dict.fromkeys(families.tolist()):
        idx = np.flatnonzero(families == family)
        p_adj[idx] = adjust_p(p_val[idx], adjust)
        if adjust in ("holm", "bonferroni"):
            crit_adj[idx] = stats.t.ppf(1 - (1 - confidence) / (2 * len(idx)), df[idx])
    return {
        "p_val": p_val,
        "p_adj": p_adj,
        "ci_low": estimate - crit * se,
        "ci_high": estimate + crit * se,
        "ci_low_adj": estimate - crit_adj * se,
        "ci_high_adj": estimate + crit_adj * se,
    }

"""Holm and Bonferroni adjustment: the one copy every stats module uses.

``statsmodels.stats.multitest.multipletests`` gives the same numbers, but every call runs ``gc.collect()``
(statsmodels does so to free memory in its large-array paths). In a long-lived process holding a loaded model
(the test suite, a notebook) one collection costs tens of milliseconds, and an analysis makes a call per train
size, task and fit: seconds spent outside the statistics. The tests check these functions against
``multipletests``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["adjust_p", "holm"]


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

"""The cost when both runs train: a mean difference over seed pairs and scored items, seeds and items crossed.

For one depth at one train size, pair each seed's run with full fine-tuning's run of the same seed (and so the
same training subset), keep the k pairs in which neither run collapsed, and score both runs on the same M items.
Per pair s and item i the difference is ``d[s, i] = score(depth) - score(full)`` (for accuracy: 1, 0 or -1), in
points. The estimate is the grand mean of d. Seeds and items are both samples (new training runs, new data from
the task), so its variance is that of a two-way crossed random-effects layout without replication,

    d[s, i] = mu + a[s] + b[i] + e[s, i],   Var(mean) = s2_seed / k + s2_item / M + s2_res / (k M),

estimated unbiasedly from the ANOVA mean squares as ``(MS_seed + MS_item - MS_res) / (k M)``, with
Satterthwaite's degrees of freedom for that sum of mean squares (Satterthwaite 1946). Where the estimate falls
below ``MS_res / (k M)``, the smallest variance the layout allows, the interval uses that floor and its df.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = ["CrossedCost", "VarianceParts", "crossed_cost"]


@dataclass(frozen=True)
class VarianceParts:
    """The three variance components of the per-item difference, in points squared."""

    seed: float
    item: float
    residual: float

    def se(self, seeds: int, items: int) -> float:
        """The standard error of the mean difference over ``seeds`` pairs and ``items`` items."""
        return float(np.sqrt(self.seed / seeds + self.item / items + self.residual / (seeds * items)))


@dataclass(frozen=True)
class CrossedCost:
    """The mean difference (depth - full) in points, its 95% interval, and what it was computed from."""

    estimate: float
    se: float
    df: float
    ci_low: float
    ci_high: float
    pairs: int
    items: int
    parts: VarianceParts


def crossed_cost(diffs: np.ndarray, confidence: float = 0.95) -> CrossedCost:
    """The cost interval from a (pairs x items) array of per-item differences in points (k >= 3 pairs)."""
    d = np.asarray(diffs, dtype=float)
    if d.ndim != 2 or d.shape[0] < 3 or d.shape[1] < 2:
        raise ValueError(f"the differences must be a (pairs >= 3) x (items >= 2) array, but got shape {d.shape}")
    k, m = d.shape
    grand = float(d.mean())
    seed_means, item_means = d.mean(axis=1), d.mean(axis=0)
    ms_seed = m * float(((seed_means - grand) ** 2).sum()) / (k - 1)
    ms_item = k * float(((item_means - grand) ** 2).sum()) / (m - 1)
    resid = d - seed_means[:, None] - item_means[None, :] + grand
    ms_res = float((resid**2).sum()) / ((k - 1) * (m - 1))
    combined = ms_seed + ms_item - ms_res
    if combined >= ms_res:  # the usual case: Satterthwaite on MS_seed + MS_item - MS_res
        terms = [(ms_seed, k - 1), (ms_item, m - 1), (ms_res, (k - 1) * (m - 1))]
        df = combined**2 / sum(ms**2 / dof for ms, dof in terms)
    else:  # the components' estimate is at or below the residual's share: use the residual's floor
        combined, df = ms_res, float((k - 1) * (m - 1))
    se = float(np.sqrt(combined / (k * m)))
    half = float(stats.t.ppf(0.5 + confidence / 2, df)) * se
    parts = VarianceParts(seed=max(0.0, (ms_seed - ms_res) / m), item=max(0.0, (ms_item - ms_res) / k), residual=ms_res)
    return CrossedCost(grand, se, float(df), grand - half, grand + half, k, m, parts)

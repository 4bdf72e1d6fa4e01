r"""A seed x item contrast of two cells whose runs are paired by seed only in part: each cell's own runs, both
scored on the same items.

Why not only the pairs. The two-part contrast (:mod:`freezestats.stats.items.task_two_part`) needs the healthy
means :math:`h_k = E[y_k \mid k \text{ healthy}]` and :math:`h_0`. The mean difference over the seeds where
*both* runs are healthy estimates :math:`E[y_k - y_0 \mid \text{both healthy}]` instead, and the two differ
whenever a run's flag depends on its seed's skill and the two depths' skills move together within a seed. The
binomial flag does depend on the skill (a healthy run that scores near the majority rate is flagged), and
depths near the reference move with it (correlation 0.99 on the realistic simulator). At 50 examples, where 80-100%
of the runs are flagged, keeping only the depth's runs whose reference partner is healthy picked the seeds where
both did well and biased depth -1's contrast by +1.6 points with 20 seeds (MC SE 0.7;
``bench/results/task_level_bias_n50_before.txt``; after: ``task_level_bias.txt``). Each cell's own mean
is unbiased whatever the flag; the pairing only lowers the variance, so it enters the variance and not the
estimate.

With :math:`A` and :math:`B` the two cells' units (seeds, or subset draws), :math:`n_{ab}` of them shared, and the
crossed layout :math:`\phi_{c,s,i} = \mu_c + u_{cs} + w_{ci} + e_{csi}` per cell, the estimate is
:math:`\bar y_A - \bar y_B` and its variance over new seeds and new items is estimated as

* **seeds:** :math:`s_A^2/n_A + s_B^2/n_B - 2\,n_{ab}\,r\,s_A s_B/(n_A n_B)`, with :math:`r` the correlation of
  the shared units' scores (0 with fewer than three: two points always correlate ±1). It is never negative
  (:math:`n_{ab} \le \sqrt{n_A n_B}`), and with every unit shared it is the paired t's :math:`s_d^2/S`.
  Its df are :math:`\min(n_A, n_B) - 1`: the paired t's with every unit shared, Welch's lower bound with none;
* **items:** :math:`(v_D - R)/I`, truncated at 0, where :math:`v_D` is the sample variance over items of the
  per-item mean difference and :math:`R = \sigma_A^2/n_A + \sigma_B^2/n_B - 2\,n_{ab}\,\kappa/(n_A n_B)` is what
  the run-by-item noise adds to it: :math:`\sigma_c^2` from each cell's double-centred residuals, :math:`\kappa`
  their covariance over shared units, divided by its expectation factor
  :math:`(I-1)\,n_{ab}(1 - 1/n_A - 1/n_B + n_{ab}/(n_A n_B))`. Satterthwaite df.

With every unit shared both parts are exactly :func:`~freezestats.stats.items.task_level.crossed_contrast`'s
(Cornfield-Tukey mean squares of the paired differences), which ``tests/data/task_level_reference.R`` checks
against lme4; ``tests/test_stats_partial_pairs.py`` checks that the variance is unbiased by simulation when
pairing is partial, and the arithmetic against the same formulas written again in base R
(``tests/data/partial_pairs_reference.R``, re-run when Rscript is there).
"""

from __future__ import annotations

import numpy as np

from freezestats.exceptions import ModelFitError
from freezestats.stats.items.uncertainty import excess_over_noise

__all__ = ["partially_paired_contrast", "seed_item_summary"]


def partially_paired_contrast(
    y_a: np.ndarray,
    y_b: np.ndarray,
    shared: list[tuple[int, int]],
    a: np.ndarray | None = None,
    b: np.ndarray | None = None,
) -> dict[str, float]:
    """Estimate, SEs and df of :math:`\\bar y_A - \\bar y_B` over new seeds and new items (module docstring).

    ``y_a``, ``y_b`` are the two cells' units' reported metric, ``shared`` the (unit of A, unit of B) index pairs
    that share a seed, and ``a`` (n_A x I), ``b`` (n_B x I) their per-item pseudo-values on the same items. Without
    ``a`` and ``b`` the items are held fixed (the evaluation set: seed part only). Returns the keys of
    :func:`~freezestats.stats.items.task_level.crossed_contrast`.
    """
    y_a, y_b = np.asarray(y_a, dtype=float), np.asarray(y_b, dtype=float)
    n_a, n_b = len(y_a), len(y_b)
    if min(n_a, n_b) < 2:
        raise ModelFitError(f"partially_paired_contrast: need >= 2 units per cell, but got {n_a} and {n_b}.")
    v_seed = _seed_variance(y_a, y_b, shared)
    df_seed = float(min(n_a, n_b) - 1)
    v_item, df_item, n_items = 0.0, float("inf"), 0
    if a is not None and b is not None:
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        if a.ndim != 2 or a.shape[0] != n_a or b.shape != (n_b, a.shape[1]) or a.shape[1] < 2:
            raise ModelFitError(
                f"partially_paired_contrast: need {n_a} and {n_b} rows on the same >= 2 items, "
                f"but got {a.shape} and {b.shape}."
            )
        v_item, df_item = _item_variance(a, b, shared)
        n_items = a.shape[1]
    return seed_item_summary(float(y_a.mean() - y_b.mean()), (v_seed, df_seed), (v_item, df_item), n_items)


def seed_item_summary(
    estimate: float, seed: tuple[float, float], item: tuple[float, float], n_items: int
) -> dict[str, float]:
    """A contrast's estimate with its seed and item parts, each ``(variance, df)``, and their sum's SE and
    Satterthwaite df: the keys every task-level contrast returns, whichever way its parts were estimated."""
    (v_seed, df_seed), (v_item, df_item) = seed, item
    var = v_seed + v_item
    parts = (v_seed**2 / df_seed if v_seed > 0 else 0.0) + (v_item**2 / df_item if np.isfinite(df_item) else 0.0)
    return {
        "estimate": float(estimate),
        "se_seed": float(np.sqrt(v_seed)),
        "df_seed": float(df_seed),
        "se_item": float(np.sqrt(v_item)),
        "df_item": float(df_item),
        "se": float(np.sqrt(var)),
        "df": float(var**2 / parts) if parts > 0 else float("inf"),
        "n_items": int(n_items),
    }


def _seed_variance(y_a: np.ndarray, y_b: np.ndarray, shared: list[tuple[int, int]]) -> float:
    """The seed part: each mean's variance less twice their covariance through the shared units."""
    n_a, n_b, n_ab = len(y_a), len(y_b), len(shared)
    s_a, s_b = float(np.std(y_a, ddof=1)), float(np.std(y_b, ddof=1))
    r = 0.0
    if n_ab >= 3:
        pa, pb = y_a[[i for i, _ in shared]], y_b[[j for _, j in shared]]
        if np.std(pa) > 0 and np.std(pb) > 0:
            r = float(np.corrcoef(pa, pb)[0, 1])
    return max(0.0, s_a**2 / n_a + s_b**2 / n_b - 2 * n_ab * r * s_a * s_b / (n_a * n_b))


def _item_variance(a: np.ndarray, b: np.ndarray, shared: list[tuple[int, int]]) -> tuple[float, float]:
    """The item part and its Satterthwaite df (``inf`` when truncated at 0)."""
    n_a, n_b, n_ab, n_items = a.shape[0], b.shape[0], len(shared), a.shape[1]
    v_d = float(np.var(a.mean(axis=0) - b.mean(axis=0), ddof=1))
    e_a, e_b = _residuals(a), _residuals(b)
    sigma_a = float(np.sum(e_a**2)) / ((n_a - 1) * (n_items - 1))
    sigma_b = float(np.sum(e_b**2)) / ((n_b - 1) * (n_items - 1))
    kappa = 0.0
    factor = n_ab * (1 - 1 / n_a - 1 / n_b + n_ab / (n_a * n_b))
    if n_ab >= 2 and factor > 0:
        cross = sum(float(e_a[i] @ e_b[j]) for i, j in shared)
        kappa = cross / ((n_items - 1) * factor)
    noise = sigma_a / n_a + sigma_b / n_b - 2 * n_ab * kappa / (n_a * n_b)
    excess = excess_over_noise(v_d, noise)
    if excess <= 0:
        return 0.0, float("inf")
    df_noise = (min(n_a, n_b) - 1) * (n_items - 1)
    df = excess**2 / (v_d**2 / (n_items - 1) + noise**2 / df_noise)
    return excess / n_items, float(df)


def _residuals(x: np.ndarray) -> np.ndarray:
    """The units x items table less its unit and item means (the two-way layout's residuals)."""
    return x - x.mean(axis=1, keepdims=True) - x.mean(axis=0, keepdims=True) + x.mean()

r"""A one-sided test that reads a skewed part's lower side at the test's own level, not extrapolated from 95%.

Why
---
A two-part contrast (:mod:`freezestats.stats.items.task_two_part`) adds to its healthy, t-distributed part a
failure part :math:`F` whose interval is not symmetric and not normal: a failure rate near 0 has a long tail above
it, so :math:`F`'s lower side at 99.9% is much longer than its side at 97.5% times :math:`z_{0.999}/z_{0.975}`.
The contrast keeps one lower SE per side, read at the interval's level (95%: ``se_lower = low_{0.975} / 1.96``
joined with the healthy part), and the task's non-inferiority tests ran at their local levels of 0.001-0.005
(:mod:`~freezestats.stats.inference.task_family`) with that SE, i.e. with :math:`F`'s tail extrapolated from its
97.5% point as if it were normal. Where :math:`F`'s tail is longer than normal the test claims too often: on the
realistic simulator the joint-draws failure part (``failure_rates="pooled_joint"``) erred at the margin in 0.056
of 800 null studies against a target of 0.05, at 0.018 per size against a level of 0.01
(``bench/results/fwer_task_level_400_799.txt``).

What it does
------------
A contrast that has a failure part carries a *ladder*: its lower SE and df with :math:`F`'s lower side read at each
one-sided level :math:`\alpha_j` of :data:`TAIL_ALPHAS` (each side from
the same rule as the interval's: Wilson-MOVER or the joint draws, at confidence :math:`1 - 2\alpha_j`). The lower
bound at level :math:`\alpha` is :math:`\hat\Delta - t_{1-\alpha,\,\nu(\alpha)}\, s(\alpha)` with :math:`s` and
:math:`\nu` interpolated in :math:`\log\alpha` between rungs (held at the end rungs outside them), so at
:math:`\alpha = 0.025` it is the 95% interval's own lower end. The test at level :math:`\alpha` rejects when that
bound is above :math:`-m`; since :math:`s(\alpha)` grows as :math:`\alpha` falls, the set of levels that reject is
:math:`[p^*, 1)` with :math:`p^*` the fixed point of :math:`g(\alpha) = P(T_{\nu(\alpha)} > (\hat\Delta + m) /
s(\alpha))`, which is the p value the graphical procedure gets: it rejects at a local level exactly when the
bound at that level clears the margin. A contrast without a ladder (no failure part) gets the plain t test.

Measured
--------
``bench/fwer_task_level.py`` on the realistic simulator's null studies at the margin (5 seeds): the joint draws'
familywise error 0.015 over 800 studies (was 0.056), the default Wilson-MOVER's 0.025 over 400 (was 0.033 on the
same studies). The 95% intervals are untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy import optimize, stats

__all__ = ["TAIL_ALPHAS", "Ladder", "lower_ladder", "matched_lower", "matched_p_value", "matched_side"]

#: ``((alpha_j, se_j, df_j), ...)``: a contrast's lower SE and df with its failure part read at one-sided level
#: ``alpha_j``, ascending in ``alpha_j``.
Ladder = Sequence[tuple[float, float, float]]
#: The one-sided levels at which a contrast's lower side is read, for tests at levels other than the interval's:
#: the task family's local levels are 0.001-0.01, a fixed sequence's alpha / sizes 0.01; below the lowest rung
#: the side is held there.
TAIL_ALPHAS: tuple[float, ...] = (0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1)


def lower_ladder(
    known: list[tuple[float, float]],
    low_at: Callable[[float], float],
    joined: Callable[[list[tuple[float, float]], float], tuple[float, float]],
) -> tuple[tuple[float, float, float], ...]:
    """A contrast's ladder: at each level of :data:`TAIL_ALPHAS`, the lower SE and df of ``known`` (variance, df)
    parts joined with the failure part's lower half-width ``low_at(confidence)`` at confidence ``1 - 2 alpha``,
    taken as a normal part at that level (``(low / z_alpha)^2``), by ``joined`` (Welch-Satterthwaite)."""
    rungs = []
    for alpha in TAIL_ALPHAS:
        low = low_at(1.0 - 2.0 * alpha)
        rungs.append((alpha, *joined(known, (low / stats.norm.isf(alpha)) ** 2)))
    return tuple(rungs)


def matched_side(alpha: float, se: float, df: float, ladder: Ladder | None = None) -> tuple[float, float]:
    """The lower side's ``(se, df)`` a test at ``alpha`` reads: the ladder's there, else ``(se, df)`` as given."""
    return _side(ladder, alpha) if ladder else (se, df)


def _side(ladder: Ladder, alpha: float) -> tuple[float, float]:
    """``(se, df)`` at ``alpha``: linear in log alpha between rungs, the end rung's outside them. An infinite df
    (no part with finite df) stays infinite."""
    alphas = np.log([a for a, _, _ in ladder])
    se = float(np.interp(np.log(alpha), alphas, [s for _, s, _ in ladder]))
    dfs = [d for _, _, d in ladder]
    if not all(np.isfinite(dfs)):
        return se, float("inf")
    return se, float(np.interp(np.log(alpha), alphas, dfs))


def matched_lower(estimate: float, alpha: float, se: float, df: float, ladder: Ladder | None = None) -> float:
    """The one-sided ``(1 - alpha)`` lower bound: with the ladder's side at ``alpha``, else ``estimate - t se``.

    >>> matched_lower(0.0, 0.025, 1.0, float("inf"))  # doctest: +ELLIPSIS
    -1.959...
    >>> ladder = ((0.001, 2.0, np.inf), (0.025, 1.0, np.inf))  # the side twice as long at 0.1% as at 2.5%
    >>> round(matched_lower(0.0, 0.001, 1.0, np.inf, ladder), 3), round(matched_lower(0.0, 0.001, 1.0, np.inf), 3)
    (-6.18, -3.09)
    """
    se, df = matched_side(alpha, se, df, ladder)
    return float(estimate - stats.t.ppf(1.0 - alpha, df) * se)


def matched_p_value(estimate: float, margin: float, se: float, df: float, ladder: Ladder | None = None) -> float:
    r"""The smallest level at which :func:`matched_lower` is above ``-margin`` (module docstring), in (0, 1].

    Without a ladder this is the t test's ``P(T_df > (estimate + margin) / se)``. NaN or non-positive ``se``
    (no spread): 1, no evidence.

    >>> round(matched_p_value(2.0, 0.0, 1.0, np.inf), 4)
    0.0228
    >>> ladder = ((0.001, 2.0, np.inf), (0.025, 1.0, np.inf))
    >>> p = matched_p_value(2.0, 0.0, 1.0, np.inf, ladder)  # the longer tail: a larger p value
    >>> round(p, 4), bool(abs(matched_lower(2.0, p, 1.0, np.inf, ladder)) < 1e-6)
    (0.0241, True)
    """
    if not ladder:
        if not (np.isfinite(se) and se > 0):
            return 1.0
        return float(stats.t.sf((estimate + margin) / se, df))
    if not all(np.isfinite(s) and s > 0 for _, s, _ in ladder):
        return 1.0

    def excess(log_alpha: float) -> float:
        """log g(alpha) - log alpha: positive where the test at alpha does not reject."""
        at = float(np.exp(log_alpha))
        s, d = _side(ladder, at)
        return float(stats.t.logsf((estimate + margin) / s, d)) - log_alpha

    low, high = np.log(1e-300), 0.0
    if excess(high) > 0:  # not even at level 1
        return 1.0
    if excess(low) <= 0:
        return 1e-300
    return float(np.exp(optimize.brentq(excess, low, high, xtol=1e-10)))

r"""One paired contrast at one look: its information fraction, its sequential p value and its repeated bounds.

The contrast is :func:`~freezestats.stats.items.task_level.task_level_contrasts`' (depth minus reference, paired
by seed, with the evaluation items' part where the items are given). Its variance with :math:`s` paired seeds is

.. math:: V(s) = \frac{a}{s} + b, \qquad a = (\mathrm{se}^2 - \mathrm{se}_{item}^2)\, s_j, \quad
   b = \mathrm{se}_{item}^2,

estimated at the current look :math:`j` (:math:`s_j` seeds): the seeds' part (and the failure part of a
two-part contrast) shrinks like one over the seeds, the items' part does not (the same items score every seed).
The information is :math:`1/V`, so look :math:`i`'s fraction is :math:`t_i = V(s_{max}) / V(s_i)`, with
:math:`V(s_{max})` projected from the current components; the earlier looks' boundaries are recomputed with
these fractions (the decisions taken at them stand), the usual practice when the information is estimated
(Jennison & Turnbull 2000, sec. 7.2.2). Where the items dominate, :math:`t_1` is already
close to 1: more seeds add little, and the spending function spends nearly all of the level at once.

The canonical correlation :math:`\sqrt{t_i/t_j}` holds because the seed sets are nested and the items shared:
:math:`\hat\theta_j` is :math:`\hat\theta_i` averaged with the later seeds' differences on the same items, so
:math:`\operatorname{Cov}(\hat\theta_i, \hat\theta_j) = \operatorname{Var}(\hat\theta_j)` (the item effects are
common to both; each seed's part enters :math:`\hat\theta_j` with weight :math:`1/s_j`).

The z boundary :math:`c_j` is turned into the t scale at the contrast's Satterthwaite df by its nominal level
(the "significance level approach", Jennison & Turnbull 2000, sec. 3.8 and 11.2): the bound at look :math:`j` is
:math:`\hat\theta_j - t_{df_j}^{-1}(1 - (1 - \Phi(c_j)))\,\mathrm{se}_j`. This is an approximation (the
variances are estimated, the fractions too); ``bench/adaptive_seeds.py`` measures the error rate it gives.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from freezestats.stats.inference.tail_matched import Ladder, matched_lower, matched_p_value
from freezestats.stats.sequential.spending import boundaries

__all__ = ["LookContrast", "fractions_of", "lower_bound", "sequential_p", "t_bound"]

_FLOOR = 1e-10  # the smallest level a sequential p value resolves


@dataclass(frozen=True)
class LookContrast:
    """One contrast's numbers at one look, the side a bound reads: estimate, SE and df, and the fractions; for
    the lower side of a two-part contrast also its ladder (:mod:`~freezestats.stats.inference.tail_matched`), the
    side read at each one-sided level, since a look tests at 0.001-0.005 where the failure part's tail is longer
    than its 95% side scaled."""

    estimate: float
    se: float
    df: float
    fractions: tuple[float, ...]
    ladder: Ladder | None = None


def fractions_of(se: float, se_item: float, counts: tuple[int, ...], max_seeds: int) -> tuple[float, ...]:
    """Information fractions :math:`V(s_{max}) / V(s_i)` of the looks at ``counts`` paired seeds (the last is the
    current look), from the current variance ``se**2`` and its item part ``se_item**2`` (module docstring).

    >>> [round(t, 3) for t in fractions_of(0.02, 0.0, (2, 4), 8)]
    [0.25, 0.5]
    >>> [round(t, 3) for t in fractions_of(0.02, 0.02, (2, 4), 8)]
    [1.0, 1.0]
    """
    total, item = float(se) ** 2, min(float(se_item) ** 2, float(se) ** 2)
    per_seed = (total - item) * counts[-1]
    var = np.array([per_seed / s + item for s in (*counts, max_seeds)])
    if not var[-1] > 0:
        return tuple(1.0 for _ in counts)
    return tuple(float(min(1.0, var[-1] / v)) for v in var[:-1])


def t_bound(look: LookContrast, level: float, kind: str) -> float:
    """The t-scale critical value at the last of ``look.fractions`` for a one-sided sequential test at ``level``."""
    c = boundaries(look.fractions, level, kind)[-1]
    return float(-special.stdtrit(look.df, special.ndtr(-c)))  # t.isf(p, df), without scipy.stats' overhead


def lower_bound(look: LookContrast, level: float, kind: str) -> float:
    """The look's one-sided lower bound for a sequential test at ``level``: at the boundary's nominal level
    :math:`1 - \\Phi(c_j)`, with the ladder's side there where the look has one."""
    nominal = float(special.ndtr(-boundaries(look.fractions, level, kind)[-1]))
    return matched_lower(look.estimate, nominal, look.se, look.df, look.ladder)


def sequential_p(look: LookContrast, margin: float, alpha: float, kind: str) -> float:
    """The smallest level at which the look's one-sided bound clears ``-margin``; 1 where even ``alpha`` does not.

    The bound at level :math:`a` is :math:`\\hat\\theta - q_j(a)\\,\\mathrm{se}` and :math:`q_j` falls as
    :math:`a` grows, so the set of levels that clear the margin is an interval :math:`[p, \\alpha]`: the graph
    (:func:`~freezestats.stats.inference.graphical.graphical_test`) then rejects exactly when :math:`p \\le w\\alpha`,
    with the same bound the table prints. Levels above ``alpha`` are never asked for (no weight exceeds 1).
    The look rejects at nominal level :math:`\\Phi(-c_j)` exactly when the fixed test's p value (with the ladder:
    :func:`~freezestats.stats.inference.tail_matched.matched_p_value`) is at most that level, so the search runs on
    that p value's z.
    """
    if not (np.isfinite(look.se) and look.se > 0):
        return 1.0
    if look.ladder:
        tail = matched_p_value(look.estimate, margin, look.se, look.df, look.ladder)
    else:
        tail = special.stdtr(look.df, -(look.estimate + margin) / look.se)  # t.sf
    z = -special.ndtri(tail) if tail > 0 else np.inf

    def gap(log_level: float) -> float:
        return float(boundaries(look.fractions, float(np.exp(log_level)), kind)[-1]) - z

    if gap(np.log(alpha)) > 0:
        return 1.0
    if gap(np.log(_FLOOR)) <= 0:
        return _FLOOR
    return float(np.exp(optimize.brentq(gap, np.log(_FLOOR), np.log(alpha), xtol=1e-6)))

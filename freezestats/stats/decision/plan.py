"""How many seeds and scored items a depth needs for its cost interval to decide, at a stated margin and power.

The cost interval (:mod:`.crossed`) shows a depth within the margin ``m`` when its lower bound is above ``-m``.
With variance components (seed, item, residual; points squared) its standard error over k pairs and M items is

    SE(k, M) = sqrt(s2_seed / k + s2_item / M + s2_res / (k M)),

and the chance that the lower 97.5% bound clears ``-m`` when the true cost is ``delta`` is that of a
noncentral t with ``k - 1`` degrees of freedom (the seed term's, the conservative choice when seeds dominate)
exceeding its critical value: ``power = 1 - F_t(t_{0.975, k-1}; k-1, ncp = |delta + m| / SE)`` (for a true
cost below ``-m`` that is the power to show it costs more than the margin).
More items shrink only the item and residual terms; more seeds shrink all but the item term. So a plan prices
both levers, and says when items alone cannot decide (the seed term by itself exceeds what the margin allows).
"""

from __future__ import annotations

from dataclasses import dataclass

from scipy import stats

from freezestats.stats.decision.crossed import VarianceParts

__all__ = ["DesignPower", "power", "seeds_needed"]


@dataclass(frozen=True)
class DesignPower:
    """A design (seed pairs, scored items) and the power of its within-margin test."""

    seeds: int
    items: int
    se: float
    power: float


def power(parts: VarianceParts, seeds: int, items: int, margin: float, true_cost: float = 0.0) -> DesignPower:
    """The power to show ``cost > -margin`` (points) with ``seeds`` pairs and ``items`` items, one-sided 2.5%;
    where ``true_cost < -margin``, the power to show ``cost < -margin`` (the same test, turned round)."""
    if seeds < 3 or items < 2:
        raise ValueError(f"a design needs >= 3 seed pairs and >= 2 items, but got {seeds} and {items}")
    se = parts.se(seeds, items)
    df = seeds - 1
    critical = stats.t.ppf(0.975, df)
    if se == 0:
        return DesignPower(seeds, items, se, 1.0 if true_cost + margin != 0 else 0.0)
    value = float(stats.nct.sf(critical, df, abs(true_cost + margin) / se))
    return DesignPower(seeds, items, se, value)


def seeds_needed(
    parts: VarianceParts, items: int, margin: float, target: float = 0.8, true_cost: float = 0.0, most: int = 200
) -> DesignPower | None:
    """The fewest seed pairs (3..``most``) that reach ``target`` power with ``items`` items, or ``None``."""
    for seeds in range(3, most + 1):
        design = power(parts, seeds, items, margin, true_cost)
        if design.power >= target:
            return design
    return None

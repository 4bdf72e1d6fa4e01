"""The cost when both runs train (seeds x items crossed) and the plan's power for it."""

from __future__ import annotations

import numpy as np
import pytest

from freezestats.stats.decision.crossed import VarianceParts, crossed_cost
from freezestats.stats.decision.plan import power, seeds_needed


def _draw(rng: np.random.Generator, parts: VarianceParts, k: int, m: int, mu: float) -> np.ndarray:
    a = rng.normal(0, np.sqrt(parts.seed), (k, 1))
    b = rng.normal(0, np.sqrt(parts.item), (1, m))
    return mu + a + b + rng.normal(0, np.sqrt(parts.residual), (k, m))


def test_the_interval_is_the_anova_formula_by_hand() -> None:
    d = np.array([[1.0, 0.0, 2.0, 1.0], [0.0, -1.0, 1.0, 0.0], [2.0, 2.0, 3.0, 1.0]])
    k, m = d.shape
    g = d.mean()
    ms_s = m * ((d.mean(1) - g) ** 2).sum() / (k - 1)
    ms_i = k * ((d.mean(0) - g) ** 2).sum() / (m - 1)
    r = d - d.mean(1, keepdims=True) - d.mean(0, keepdims=True) + g
    ms_r = (r**2).sum() / ((k - 1) * (m - 1))
    cost = crossed_cost(d)
    assert cost.estimate == pytest.approx(g)
    assert cost.se**2 == pytest.approx(max(ms_s + ms_i - ms_r, ms_r) / (k * m))
    assert (cost.pairs, cost.items) == (3, 4) and cost.ci_low < g < cost.ci_high


def test_too_few_pairs_give_no_interval() -> None:
    with pytest.raises(ValueError, match="pairs >= 3"):
        crossed_cost(np.zeros((2, 10)))


@pytest.mark.parametrize(
    "parts", [VarianceParts(seed=1.0, item=40.0, residual=900.0), VarianceParts(seed=0.05, item=2.0, residual=1500.0)]
)
def test_the_interval_covers_and_the_plan_promises_the_power_it_delivers(parts: VarianceParts) -> None:
    """Drawn from the crossed model itself: this checks the arithmetic, not the model's fit to real runs."""
    rng = np.random.default_rng(7)
    k, m, margin, n = 6, 300, 1.0, 1500
    costs = [crossed_cost(_draw(rng, parts, k, m, 0.0)) for _ in range(n)]
    covered = np.mean([c.ci_low <= 0.0 <= c.ci_high for c in costs])
    shown = np.mean([c.ci_low > -margin for c in costs])
    promised = power(parts, k, m, margin).power
    assert 0.93 <= covered <= 0.98  # a little conservative where the seed part is near 0 (the floor)
    assert abs(shown - promised) < 0.05


def test_seeds_needed_falls_with_items_until_the_seed_term_alone_is_left() -> None:
    parts = VarianceParts(seed=0.2, item=30.0, residual=1200.0)
    few, many = seeds_needed(parts, 436, 1.0), seeds_needed(parts, 5000, 1.0)
    assert few is not None and many is not None and many.seeds < few.seeds and many.power >= 0.8
    assert seeds_needed(VarianceParts(seed=4.0, item=0.0, residual=0.0), 10**6, 1.0, most=20) is None

"""The joint draws' rates projected onto rates that do not rise with size (freezestats.stats.failures.size_order).

The vectorised isotonic fit is checked against scikit-learn's IsotonicRegression, one sequence at a time; then
what the projection does to a pair's draws: every draw comes out in order, a draw already in order is unchanged,
and a pair whose only failure at the large sizes is at 1000 examples gets a shorter upper tail at 1000 than the
unordered draws give, while the sizes that showed failures keep their rates.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.isotonic import IsotonicRegression

from freezestats.stats.failures.pooled_rates import pooled_failure_fit
from freezestats.stats.failures.size_order import SizeOrder, non_increasing

SIZES = (50, 100, 200, 500, 1000)


def test_the_fit_is_scikit_learns_isotonic_regression_row_by_row() -> None:
    rng = np.random.default_rng(3)
    values = rng.random((200, 5)) ** 3  # skewed, as rates are, so that many rows are out of order
    weights = rng.integers(1, 8, 5).astype(float)
    fitted = non_increasing(values, weights)
    expected = [
        IsotonicRegression(increasing=False).fit_transform(np.arange(5), row, sample_weight=weights) for row in values
    ]
    np.testing.assert_allclose(fitted, np.array(expected), atol=1e-12)
    assert (np.diff(fitted, axis=1) <= 1e-12).all()
    ordered = -np.sort(-values, axis=1)
    np.testing.assert_allclose(non_increasing(ordered, weights), ordered, atol=1e-12)  # in order: unchanged


def test_groups_are_each_levels_cells_by_increasing_size_with_their_runs() -> None:
    counts = {(3, 1000): (0, 5), (0, 50): (4, 5), (3, 50): (2, 4), (0, 1000): (1, 5)}
    order = SizeOrder.of(counts)
    assert order.groups == (((((0, 50), (0, 1000))), (5.0, 5.0)), (((3, 50), (3, 1000)), (4.0, 5.0)))


def _pair(failed_0: dict[int, int], failed_k: dict[int, int]) -> pd.DataFrame:
    """Depths 0 and 1, 5 runs a cell at 50-1000 examples, with the given number of failed runs per size."""
    rows = []
    for depth, failed in ((0, failed_0), (1, failed_k)):
        for size in SIZES:
            rows += [{"frozen_layers": depth, "train_size": size, "failed": s < failed.get(size, 0)} for s in range(5)]
    return pd.DataFrame(rows)


def test_a_pairs_draws_come_out_in_order_and_a_late_failure_is_pooled_with_the_sizes_before_it() -> None:
    runs = _pair({50: 4, 100: 1}, {50: 5, 100: 1, 1000: 1})  # the depth fails once at 1000, never at 200 or 500
    fits = {order: pooled_failure_fit(runs, runs["failed"].to_numpy(), 2.5, size_order=order)[2] for order in (0, 1)}
    unordered, ordered = fits[0], fits[1]
    assert all(part.order is not None for _, part in ordered.parts)
    assert all(part.order is None for _, part in unordered.parts)
    for _, part in ordered.parts:  # every draw of every level in order
        for level in (0, 1):
            rates = np.column_stack([part.values([((level, n), 1.0)]) for n in SIZES])
            assert (np.diff(rates, axis=1) <= 1e-12).all()
    # the same draws and weights: only the values move
    np.testing.assert_array_equal(ordered.parts[0][1].weights, unordered.parts[0][1].weights)
    high_unordered = unordered.interval([((1, 1000), 1.0)], 0.95)[1]
    high_ordered = ordered.interval([((1, 1000), 1.0)], 0.95)[1]
    assert high_ordered < 0.8 * high_unordered  # pooled with 200 and 500, where the depth never failed
    # at 50 examples, where both levels failed most, the order has nothing to pool
    for level in (0, 1):
        assert ordered.interval([((level, 50), 1.0)], 0.95) == pytest.approx(
            unordered.interval([((level, 50), 1.0)], 0.95), abs=0.02
        )

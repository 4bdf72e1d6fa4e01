"""bench/adaptive_seeds.py's reading of the equal-power fixed design between the grid's designs."""

from __future__ import annotations

from pathlib import Path

import pytest
from _scripts import load_script

BENCH = Path(__file__).resolve().parents[1] / "bench" / "adaptive_seeds.py"


def test_the_equal_power_fixed_design_is_read_between_the_two_designs_that_bracket_the_power() -> None:
    interpolated = load_script(BENCH).interpolated_seeds
    power = {"4": 0.1, "8": 0.15, "12": 0.2, "16": 0.25, "20": 0.3}  # as a saved record has them (JSON keys)
    fwer = {"4": 0.03, "8": 0.02, "12": 0.02, "16": 0.01, "20": 0.01}
    seeds, low, high = interpolated(0.225, power, fwer, 0.05)
    assert (low, high) == (12, 16) and seeds == pytest.approx(14.0)
    assert interpolated(0.3, power, fwer, 0.05) == pytest.approx((20.0, 16, 20))
    # a design over its level is no match: 12 seeds erring in 0.08 drops out, and 8..16 bracket the power
    seeds, low, high = interpolated(0.225, power, {**fwer, "12": 0.08}, 0.05)
    assert (low, high) == (8, 16) and seeds == pytest.approx(8 + 0.075 / 0.1 * 8)
    assert interpolated(0.35, power, fwer, 0.05) is None and interpolated(0.05, power, fwer, 0.05) is None
    assert interpolated(0.225, {4: 0.1, 12: 0.2, 16: 0.25}, {4: 0.0, 12: 0.0, 16: 0.0}, 0.05)[0] == pytest.approx(14)


def test_the_allocation_floor_gives_each_cell_its_own_seeds_and_the_reference_the_most_of_its_size() -> None:
    floor = load_script(BENCH.with_name("allocation_floor.py")).allocation_floor
    rows = [
        {"train_size": 50, "frozen_layers": 1, "truth": 0.0, "fixed_4": 0.3, "fixed_8": 0.6},
        {"train_size": 50, "frozen_layers": 2, "truth": -0.1, "fixed_4": 0.0, "fixed_8": 0.0},  # below the margin
        {"train_size": 100, "frozen_layers": 1, "truth": 0.0, "fixed_4": 0.5, "fixed_8": 0.5},  # flat in seeds
    ]
    # every cell gets at least the 2-seed screen; a shown depth needs its reference at as many seeds as it has
    assert floor(rows, 0.03, [4, 8], 0.25) == 2 + 2 + 2 + 4 + 4  # n=100's depth at 4 seeds, the rest screened
    assert floor(rows, 0.03, [4, 8], 0.4) == (4 + 4 + 2) + (4 + 4)  # both at 4: power (0.3 + 0.5) / 2
    assert floor(rows, 0.03, [4, 8], 0.55) == (8 + 8 + 2) + (4 + 4)  # n=50's at 8: (0.6 + 0.5) / 2
    assert floor(rows, 0.03, [4, 8], 0.6) is None
    assert floor(rows[1:2], 0.03, [4, 8], 0.1) is None  # no comparison within the margin: no power to reach

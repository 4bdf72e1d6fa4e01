"""Failure rates of a depth pair from Firth's depth x log2-size logistic fit (freezestats.stats.failures.slope_rates).

Checked against the joint model it claims to equal (Firth's fit of depth, log2 size and their interaction in one
design), against rates planted in large simulated samples, and against hand-computed MOVER sides.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import special

from freezestats.exceptions import ModelFitError
from freezestats.stats.failures.firth import fit_firth
from freezestats.stats.failures.slope_rates import SlopeRates, slope_failure_probabilities, slope_failure_sides
from freezestats.stats.items.task_level import task_level_contrasts
from freezestats.stats.items.task_two_part import failure_parts

SIZES = (100, 200, 500, 1000)


def _pair(counts: dict[tuple[int, int], int], runs_per_cell: int) -> tuple[pd.DataFrame, np.ndarray]:
    """A pair's runs: ``runs_per_cell`` runs a (depth, size) cell, the first ``counts[cell]`` of them failed."""
    rows, flags = [], []
    for (depth, size), failed in counts.items():
        rows += [{"frozen_layers": depth, "train_size": size}] * runs_per_cell
        flags += [True] * failed + [False] * (runs_per_cell - failed)
    return pd.DataFrame(rows), np.array(flags)


def _difference(rates: SlopeRates, depth: int, size: int) -> tuple[float, float, float]:
    """P_k - P_0 at ``size`` with its MOVER interval from the two cells' P intervals (correlation 0)."""
    (pk, (lk, uk)), (p0, (l0, u0)) = ((rates.p[(d, size)], rates.bounds[(d, size)]) for d in (depth, 0))
    low = pk - p0 - np.hypot(pk - lk, u0 - p0)
    high = pk - p0 + np.hypot(uk - pk, p0 - l0)
    return pk - p0, low, high


def test_the_per_depth_fit_is_the_joint_depth_by_size_interaction_fit() -> None:
    counts = {(0, 100): 2, (0, 200): 1, (0, 500): 0, (0, 1000): 1, (4, 100): 4, (4, 200): 2, (4, 500): 1, (4, 1000): 0}
    runs, failed = _pair(counts, 5)
    rates = slope_failure_probabilities(runs, failed, monotone=False)
    s = np.log2(runs["train_size"].to_numpy(float))
    d = (runs["frozen_layers"] == 4).to_numpy(float)
    joint = fit_firth(np.column_stack([np.ones_like(s), d, s, d * s]), failed.astype(float))
    for depth, size in counts:
        eta = joint.beta @ [1.0, float(depth == 4), np.log2(size), float(depth == 4) * np.log2(size)]
        assert rates.p[(depth, size)] == pytest.approx(special.expit(eta), rel=1e-6)


def test_no_failure_at_large_sizes_gives_a_near_zero_difference_with_a_finite_interval() -> None:
    # both depths fail at the small sizes only; at 1000 neither has failed: the trend puts both rates near 0
    counts = {(0, 100): 3, (0, 200): 1, (0, 500): 0, (0, 1000): 0, (2, 100): 3, (2, 200): 2, (2, 500): 0, (2, 1000): 0}
    rates = slope_failure_probabilities(*_pair(counts, 5))
    estimate, low, high = _difference(rates, 2, 1000)
    assert abs(estimate) < 0.02
    assert np.isfinite(low) and np.isfinite(high) and low <= estimate <= high
    assert -0.35 < low < 0 < high < 0.35  # finite, and narrower than a Wilson interval of 0/5 (0 .. 0.43)
    for depth in (0, 2):
        p_low, p_high = rates.bounds[(depth, 1000)]
        assert 0 <= p_low <= rates.p[(depth, 1000)] <= p_high < rates.bounds[(depth, 200)][1]


def test_a_depth_that_never_failed_gets_a_small_finite_rate() -> None:
    counts = {**{(0, n): c for n, c in zip(SIZES, (2, 1, 1, 0), strict=True)}, **{(5, n): 0 for n in SIZES}}
    rates = slope_failure_probabilities(*_pair(counts, 5))
    for size in SIZES:
        p, (low, high) = rates.p[(5, size)], rates.bounds[(5, size)]
        assert 0 < p < 0.1 and low < p < high < 0.5


def test_a_planted_rate_difference_is_recovered_within_its_interval() -> None:
    rng = np.random.default_rng(5)
    truth = {0: (-2.0, -0.8), 4: (-1.0, -0.5)}  # logit P = a + b (log2 n - log2 100) per depth

    def rate(depth: int, size: int) -> float:
        a, b = truth[depth]
        return float(special.expit(a + b * (np.log2(size) - np.log2(100))))

    per_cell = 4000
    rows, flags = [], []
    for depth in truth:
        for size in SIZES:
            rows += [{"frozen_layers": depth, "train_size": size}] * per_cell
            flags.append(rng.random(per_cell) < rate(depth, size))
    # at 99.9% a chance miss is rare (4 sizes, 1 in 250 each); a wrong fit would still miss by far
    rates = slope_failure_probabilities(pd.DataFrame(rows), np.concatenate(flags), confidence=0.999)
    for size in SIZES:
        estimate, low, high = _difference(rates, 4, size)
        planted = rate(4, size) - rate(0, size)
        assert low <= planted <= high
        assert estimate == pytest.approx(planted, abs=0.02)
        assert high - low < 0.06  # informative: a wrong slope or intercept would fall outside it


def test_monotone_fixes_a_rising_slope_at_zero() -> None:
    counts = {**{(0, n): c for n, c in zip(SIZES, (0, 0, 1, 2), strict=True)}, **{(1, n): 1 for n in SIZES}}
    runs, failed = _pair(counts, 5)
    flat = slope_failure_probabilities(runs, failed)
    assert len({round(flat.p[(0, n)], 12) for n in SIZES}) == 1  # constant: 3 of 20
    assert flat.p[(0, 100)] == pytest.approx(3.5 / 21, rel=1e-6)  # Firth's intercept-only rate: (y + 1/2) / (n + 1)
    rising = slope_failure_probabilities(runs, failed, monotone=False)
    assert rising.p[(0, 1000)] > rising.p[(0, 100)]


def test_profile_and_wald_intervals_bracket_the_estimate_and_wald_is_wider_near_separation() -> None:
    counts = {**{(0, n): c for n, c in zip(SIZES, (4, 0, 0, 0), strict=True)}, **{(1, n): 1 for n in SIZES}}
    runs, failed = _pair(counts, 5)
    profile = slope_failure_probabilities(runs, failed, interval="profile")
    wald = slope_failure_probabilities(runs, failed, interval="wald")
    for cell in profile.p:
        assert profile.p[cell] == wald.p[cell]
        for bounds in (profile.bounds[cell], wald.bounds[cell]):
            assert bounds[0] <= profile.p[cell] <= bounds[1]
    assert wald.bounds[(0, 1000)][1] > profile.bounds[(0, 1000)][1]


def test_degenerate_pairs_and_bad_arguments() -> None:
    runs, failed = _pair({(0, 100): 0, (0, 1000): 0, (3, 100): 0, (3, 1000): 0}, 5)
    none = slope_failure_probabilities(runs, failed)
    assert set(none.p.values()) == {0.0} and set(none.rows.values()) == {None}
    every = slope_failure_probabilities(runs, ~failed)
    assert set(every.p.values()) == {1.0}
    with pytest.raises(ModelFitError, match="interval"):
        slope_failure_probabilities(runs, failed, interval="score")  # type: ignore[arg-type]
    with pytest.raises(ModelFitError, match="one pair"):
        slope_failure_probabilities(runs.assign(frozen_layers=[0, 1, 2] * 6 + [0, 1]), failed)
    with pytest.raises(ModelFitError, match="failure_rates"):
        failure_parts(runs.assign(failed=~failed, heldout=0.5), "heldout", "glmm")  # type: ignore[arg-type]


def test_failure_sides_are_mover_over_the_two_terms() -> None:
    one = np.ones(1), np.eye(1) * 0.25
    depth, reference = (0.2, one, (0.1, 0.4)), (0.05, one, (0.01, 0.2))
    variance, below, above = slope_failure_sides((depth, reference), (-0.3, -0.4))
    # terms: -0.3 P_k in (-0.12, -0.03) around -0.06; +0.4 P_0 in (0.004, 0.08) around 0.02
    assert below == pytest.approx(np.hypot(0.06, 0.016))
    assert above == pytest.approx(np.hypot(0.03, 0.06))
    assert variance == pytest.approx((0.3 * 0.16) ** 2 * 0.25 + (0.4 * 0.0475) ** 2 * 0.25)
    assert slope_failure_sides(((0.0, None, (0.0, 0.0)), (1.0, None, (1.0, 1.0))), (-0.3, -0.4)) == (0.0, 0.0, 0.0)


def test_task_level_contrasts_take_the_slope_rates_into_the_failure_part() -> None:
    from freezestats.stats.simulation.realistic import blog_shaped, realistic_task, simulate_realistic

    study = simulate_realistic(realistic_task(blog_shaped()), rng=7)
    runs = study.results[study.results["train_size"] >= 100].reset_index(drop=True)
    assert runs["failed"].any()
    args = {"response": "heldout", "metric": "accuracy", "population": "evaluation_set"}
    pooled = task_level_contrasts(runs, None, **args).set_index(["train_size", "frozen_layers"])
    slope = task_level_contrasts(runs, None, failure_rates="slope", **args).set_index(["train_size", "frozen_layers"])
    assert (pooled["method"] == slope["method"]).all()
    two_part = slope["method"] == "two-part"
    assert two_part.any()
    for (size, depth), row in slope[two_part].iterrows():
        own = runs[runs["frozen_layers"].isin([0, depth])]
        rates = slope_failure_probabilities(own, own["failed"].to_numpy())
        assert row["p_fail"] == pytest.approx(rates.p[(depth, size)])
        assert row["p_fail_reference"] == pytest.approx(rates.p[(0, size)])
    # the healthy pairs are the same: only the failure part (its rates and its interval) moved
    assert not np.allclose(pooled.loc[two_part, "ci_low"], slope.loc[two_part, "ci_low"])
    assert (slope["ci_low"] <= slope["estimate"]).all() and (slope["estimate"] <= slope["ci_high"]).all()

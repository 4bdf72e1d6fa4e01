"""Power by simulation agrees with the exact noncentral-t power of the same test."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from freezestats.exceptions import ModelFitError
from freezestats.stats.inference.power import power_by_simulation, seeds_for_power


class _Fit:
    def __init__(self, seed_sd: float, resid_sd: float) -> None:
        self.variance_components = pd.DataFrame(
            {"component": ["seed", "residual"], "variance": [seed_sd**2, resid_sd**2], "sd": [seed_sd, resid_sd]}
        )


def test_simulated_power_matches_the_noncentral_t() -> None:
    curve = power_by_simulation(_Fit(0.03, 0.02), delta=0.02, n_seeds=[2, 5, 10, 20], n_sim=4000)
    assert np.all(np.abs(curve.power - curve.analytic_power) < 4 * curve.mc_se + 1e-3)
    assert curve.power.is_monotonic_increasing
    # The seed intercept cancels in the paired contrast: the same power with no seed variance.
    no_seed = power_by_simulation(_Fit(0.0, 0.02), delta=0.02, n_seeds=[2, 5, 10, 20], n_sim=4000)
    np.testing.assert_allclose(curve.analytic_power, no_seed.analytic_power)


def test_seeds_for_power() -> None:
    curve = power_by_simulation(_Fit(0.01, 0.02), delta=0.03, n_seeds=range(2, 16), n_sim=2000)
    n = seeds_for_power(curve, 0.8)
    assert n is not None and curve.set_index("n_seeds").loc[n, "power"] >= 0.8
    assert curve.set_index("n_seeds").loc[n - 1, "power"] < 0.8
    assert seeds_for_power(power_by_simulation(_Fit(0.0, 1.0), delta=1e-3, n_seeds=[2, 3], n_sim=200)) is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"delta": 0.0}, "`delta` must be a finite non-zero"),
        ({"delta": 0.1, "n_seeds": [1]}, "must be >= 2"),
        ({"delta": 0.1, "alpha": 1.5}, "`alpha` must lie in"),
    ],
)
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ModelFitError, match=message):
        power_by_simulation(_Fit(0.01, 0.02), **kwargs)


class _PerSizeFit:
    """A per-size fit with four frozen levels: residual SD 0.05 at n = 50 and 0.005 at n = 1000."""

    frozen_levels = (0, 2, 4, 6)

    def __init__(self) -> None:
        self.variance_components = pd.DataFrame(
            {
                "component": ["seed", "residual:50", "residual:1000"],
                "variance": [1e-4, 0.05**2, 0.005**2],
                "sd": [0.01, 0.05, 0.005],
                "train_size": [np.nan, 50.0, 1000.0],
            }
        )


def test_per_size_power_simulates_the_holm_family_and_non_inferiority() -> None:
    from scipy import stats

    curve = power_by_simulation(_PerSizeFit(), delta=0.01, n_seeds=[3, 5, 8], n_sim=4000, margin=0.01, rng=1)
    assert set(curve["train_size"]) == {50.0, 1000.0} and (curve["n_levels"] == 4).all()
    big = curve[curve["train_size"] == 1000].set_index("n_seeds")
    small = curve[curve["train_size"] == 50].set_index("n_seeds")
    assert (big["power"] > small["power"]).all()  # the stable size needs fewer seeds
    # Holm over 3 contrasts costs power against the unadjusted test of the same df.
    assert (curve["power"] <= curve["analytic_power"] + 4 * curve["mc_se"]).all()
    assert (big["analytic_power"] - big["power"]).max() > 0.02
    # Non-inferiority of a level with no true cost: P(lower bound > -margin) is a noncentral t probability.
    for n, row in big.iterrows():
        df = (n - 1) * 3
        exact = stats.nct.sf(stats.t.ppf(0.95, df), df, 0.01 / (np.sqrt(2 / n) * 0.005))
        assert abs(row["power_noninferior"] - exact) < 4 * np.sqrt(exact * (1 - exact) / 4000) + 1e-3

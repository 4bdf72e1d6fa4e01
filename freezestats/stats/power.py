"""How many seeds per cell a freeze study needs: power by simulation from a fitted mixed model.

A study asks "does freezing k layers change the metric by Δ at size n?"; the answer is a contrast between
two cells measured over the same seeds. This module simulates that comparison many times from the fitted
variance components and reports the share of simulations in which the contrast is significant.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.exceptions import ModelFitError

__all__ = ["power_by_simulation", "seeds_for_power"]


def power_by_simulation(
    fit: object,
    delta: float,
    n_seeds: Iterable[int] = range(2, 21),
    *,
    n_sim: int = 2000,
    alpha: float = 0.05,
    rng: int = 0,
) -> pd.DataFrame:
    """Power to detect a difference ``delta`` between two freeze levels at one train size, per number of seeds.

    Parameters
    ----------
    fit
        A :class:`~freezestats.stats.models.MixedFit`; its ``seed`` and ``residual`` variance components are
        the truth the simulation draws from.
    delta
        The true difference between the two cells (in metric units, e.g. 0.02 for two accuracy points).
    n_seeds
        Numbers of seeds per cell to evaluate (each ≥ 2).
    n_sim
        Simulated studies per number of seeds.
    alpha
        Two-sided significance level.
    rng
        Seed of the simulation.

    Returns
    -------
    pandas.DataFrame
        One row per number of seeds: ``n_seeds, power, mc_se`` (Monte Carlo standard error of ``power``),
        ``analytic_power`` (the same test's exact power from the noncentral t distribution, a check on the
        simulation), ``delta, alpha, seed_sd, resid_sd, n_sim``.

    Notes
    -----
    Each simulated study draws, for ``n`` seeds, ``y[s, c] = μ_c + b_s + e[s, c]`` with
    ``b_s ~ N(0, σ²_seed)``, ``e ~ N(0, σ²_resid)`` and ``μ_1 − μ_0 = Δ``, and tests the contrast with the
    mixed model's test for this balanced two-cell design: a paired t-test on the per-seed differences, with
    ``n − 1`` degrees of freedom (the seed intercept cancels, so ``σ²_seed`` does not affect power). In a full
    study the contrast's residual variance is pooled over all cells, which gives more degrees of freedom:
    the power reported here is therefore slightly conservative for small ``n``. Failed (collapsed) runs are
    not simulated; fit the model without them (``include_failed=False``) when they are analysed apart.

    References
    ----------
    Green, P. & MacLeod, C. J. (2016). SIMR: an R package for power analysis of generalized linear mixed
    models by simulation. Methods in Ecology and Evolution, 7(4), 493–498.
    """
    components = getattr(fit, "variance_components", None)
    if components is None:
        raise ModelFitError("power_by_simulation needs a mixed-model fit (fit_mixed) with variance components.")
    sd = dict(zip(components["component"], components["sd"], strict=True))
    if "residual" not in sd:
        raise ModelFitError(f"The fit has no residual variance component; it has {sorted(sd)}.")
    seed_sd, resid_sd = float(sd.get("seed", 0.0)), float(sd["residual"])
    if not np.isfinite(delta) or delta == 0:
        raise ModelFitError(f"`delta` must be a finite non-zero difference, but got delta={delta}.")
    if not 0 < alpha < 1:
        raise ModelFitError(f"`alpha` must lie in (0, 1), but got alpha={alpha}.")
    sizes = sorted(set(int(n) for n in n_seeds))
    if not sizes or sizes[0] < 2:
        raise ModelFitError(f"Every number of seeds must be >= 2 (a paired test needs 2), but got {sizes}.")
    generator = np.random.default_rng(rng)
    rows = []
    for n in sizes:
        seed_effect = generator.normal(0.0, seed_sd, size=(n_sim, n, 1))
        noise = generator.normal(0.0, resid_sd, size=(n_sim, n, 2))
        y = np.array([0.0, delta]) + seed_effect + noise
        diff = y[:, :, 1] - y[:, :, 0]
        t = diff.mean(axis=1) / (diff.std(axis=1, ddof=1) / np.sqrt(n))
        p = 2 * stats.t.sf(np.abs(t), df=n - 1)
        power = float(np.mean(p < alpha))
        crit = stats.t.ppf(1 - alpha / 2, df=n - 1)
        ncp = delta / (np.sqrt(2) * resid_sd / np.sqrt(n))
        analytic = float(stats.nct.sf(crit, n - 1, ncp) + stats.nct.cdf(-crit, n - 1, ncp))
        rows.append(
            {
                "n_seeds": n,
                "power": power,
                "mc_se": float(np.sqrt(power * (1 - power) / n_sim)),
                "analytic_power": analytic,
                "delta": float(delta),
                "alpha": alpha,
                "seed_sd": seed_sd,
                "resid_sd": resid_sd,
                "n_sim": n_sim,
            }
        )
    return pd.DataFrame(rows)


def seeds_for_power(curve: pd.DataFrame, target: float = 0.8) -> int | None:
    """The smallest number of seeds whose simulated power reaches ``target`` (None when none does)."""
    reached = curve.loc[curve["power"] >= target, "n_seeds"]
    return int(reached.min()) if len(reached) else None

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
        A :class:`~freezestats.stats.models.MixedFit`; its ``seed`` and residual variance components are the
        truth the simulation draws from: one curve per train size for the default per-size model (the seed
        spread at 50 examples is ~15x that at 1000, so one pooled figure would be wrong at both ends).
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
        One row per train size and number of seeds: ``train_size`` (``nan`` for the pooled model), ``n_seeds,
        power, mc_se`` (Monte Carlo standard error of ``power``),
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
    The estimated SDs are used as if known: their sampling uncertainty (with 5 seeds a per-size SD rests on
    ~12 df) is ignored, so read the seeds needed as a point estimate.

    References
    ----------
    Green, P. & MacLeod, C. J. (2016). SIMR: an R package for power analysis of generalized linear mixed
    models by simulation. Methods in Ecology and Evolution, 7(4), 493–498.
    """
    components = getattr(fit, "variance_components", None)
    if components is None:
        raise ModelFitError("power_by_simulation needs a mixed-model fit (fit_mixed) with variance components.")
    residuals = _residual_sds(components)
    seed_sd = float(dict(zip(components["component"], components["sd"], strict=True)).get("seed", 0.0))
    if not np.isfinite(delta) or delta == 0:
        raise ModelFitError(f"`delta` must be a finite non-zero difference, but got delta={delta}.")
    if not 0 < alpha < 1:
        raise ModelFitError(f"`alpha` must lie in (0, 1), but got alpha={alpha}.")
    sizes = sorted(set(int(n) for n in n_seeds))
    if not sizes or sizes[0] < 2:
        raise ModelFitError(f"Every number of seeds must be >= 2 (a paired test needs 2), but got {sizes}.")
    generator = np.random.default_rng(rng)
    frames = []
    for train_size, resid_sd in residuals:
        curve = _power_curve(generator, sizes, delta, seed_sd, resid_sd, n_sim, alpha)
        frames.append(curve.assign(train_size=train_size))
    columns = ["train_size", "n_seeds", "power", "mc_se", "analytic_power", "delta", "alpha", "seed_sd", "resid_sd"]
    return pd.concat(frames, ignore_index=True)[[*columns, "n_sim"]]


def _residual_sds(components: pd.DataFrame) -> list[tuple[float, float]]:
    """(train_size, residual SD) per train size of a per-size fit; (nan, SD) for the pooled model."""
    names = components["component"].astype(str)
    if "residual" in set(names):
        return [(float("nan"), float(components.loc[names == "residual", "sd"].iloc[0]))]
    per_size = components[names.str.fullmatch(r"residual:\d+")]
    if per_size.empty:
        raise ModelFitError(
            "power_by_simulation needs one residual variance per train size (or one for all runs), but the fit "
            f"has {sorted(names)}; per-cell variances give no single power per size."
        )
    return [(float(n), float(sd)) for n, sd in zip(per_size["train_size"], per_size["sd"], strict=True)]


def _power_curve(
    generator: np.random.Generator,
    sizes: list[int],
    delta: float,
    seed_sd: float,
    resid_sd: float,
    n_sim: int,
    alpha: float,
) -> pd.DataFrame:
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
    """The smallest number of seeds whose simulated power reaches ``target`` at every train size (None: none).

    With a per-size fit the hardest size decides: the seeds must be enough where runs spread most. Per size,
    filter ``curve`` by ``train_size`` first.
    """
    reached = curve[curve["power"] >= target]
    if "train_size" in curve.columns and curve["train_size"].notna().any():
        sizes = curve["train_size"].dropna().unique()
        per_size = [reached.loc[reached["train_size"] == n, "n_seeds"].min() for n in sizes]
        return None if any(pd.isna(v) for v in per_size) else int(max(per_size))
    return int(reached["n_seeds"].min()) if len(reached) else None

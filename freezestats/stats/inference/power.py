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
    margin: float | None = None,
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
    margin
        Non-inferiority margin; adds ``power_noninferior`` and ``margin`` columns.

    Returns
    -------
    pandas.DataFrame
        One row per train size and number of seeds: ``train_size`` (``nan`` for the pooled model), ``n_seeds,
        power, mc_se`` (Monte Carlo standard error of ``power``),
        ``analytic_power`` (the same test's exact power from the noncentral t distribution, a check on the
        simulation), ``delta, alpha, seed_sd, resid_sd, n_sim``.

    Notes
    -----
    Each simulated study draws, at one train size, ``y[s, c] = μ_c + b_s + e[s, c]`` for ``n`` seeds and the
    fit's ``K`` frozen levels, with ``e ~ N(0, σ²_size)`` (that size's residual variance) and one level ``Δ`` away
    from the reference (the others null), and runs the analysis ``analyze`` runs there: the per-size model's
    contrasts (the seed and seed-by-size effects cancel within a size, so the residual variance is estimated
    from the seed × level table with ``(n − 1)(K − 1)`` df), Holm-adjusted over the ``K − 1`` contrasts of the
    size. Nothing is refitted: the contrast depends on one size's variance only, so its sampling distribution
    is simulated directly, which keeps this fast. ``analytic_power`` is the unadjusted test's exact power
    (noncentral t), equal to the simulated power when ``K = 2``. With ``margin``, ``power_noninferior`` is the
    power to call a level with no true cost non-inferior (one-sided lower bound above ``-margin``). Failed
    (collapsed) runs are
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
        levels = len(getattr(fit, "frozen_levels", (0, 1)))
        curve = _power_curve(generator, sizes, delta, seed_sd, resid_sd, n_sim, alpha, levels, margin)
        frames.append(curve.assign(train_size=train_size))
    columns = ["train_size", "n_seeds", "power", "mc_se", "analytic_power", "delta", "alpha", "seed_sd", "resid_sd"]
    extra = ["power_noninferior", "margin"] if margin is not None else []
    return pd.concat(frames, ignore_index=True)[[*columns, *extra, "n_levels", "n_sim"]]


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
    n_levels: int = 2,
    margin: float | None = None,
) -> pd.DataFrame:
    """Simulate the within-size analysis that ``analyze`` runs: ``n_levels`` frozen levels over ``n`` seeds, the
    residual variance estimated from the seed x level table (the per-size model's, with the seed effects absorbed
    by ``seed:train_size``: df ``(n-1)(n_levels-1)``), ``n_levels - 1`` contrasts against the reference, Holm within
    the size. One level differs by ``delta``; the others are null. With a margin, also the power to call a level
    with no true cost non-inferior (one-sided lower bound above ``-margin``)."""
    rows = []
    m = n_levels - 1
    for n in sizes:
        df = (n - 1) * m
        means = np.zeros(n_levels)
        means[1] = delta
        y = means + generator.normal(0.0, resid_sd, size=(n_sim, n, n_levels))  # seed effects cancel: not drawn
        resid = y - y.mean(axis=1, keepdims=True) - y.mean(axis=2, keepdims=True) + y.mean(axis=(1, 2), keepdims=True)
        sigma2 = (resid**2).sum(axis=(1, 2)) / df
        se = np.sqrt(2 * sigma2 / n)
        estimate = y[:, :, 1:].mean(axis=1) - y[:, :, :1].mean(axis=1)  # n_sim x m
        t = estimate / se[:, None]
        p = 2 * stats.t.sf(np.abs(t), df=df)
        power = float(np.mean(_holm_rows(p)[:, 0] < alpha))
        crit = stats.t.ppf(1 - alpha / 2, df=df)
        ncp = delta / (np.sqrt(2) * resid_sd / np.sqrt(n))
        row = {
            "n_seeds": n,
            "power": power,
            "mc_se": float(np.sqrt(power * (1 - power) / n_sim)),
            "analytic_power": _analytic_power(crit, df, ncp),
            "delta": float(delta),
            "alpha": alpha,
            "seed_sd": seed_sd,
            "resid_sd": resid_sd,
            "n_levels": n_levels,
            "n_sim": n_sim,
        }
        if margin is not None:
            null_estimate = estimate[:, -1] - (delta if m == 1 else 0.0)  # a level with no true cost
            lower = null_estimate - stats.t.ppf(1 - alpha, df) * se
            row["power_noninferior"] = float(np.mean(lower > -margin))
            row["margin"] = float(margin)
        rows.append(row)
    return pd.DataFrame(rows)


def _analytic_power(crit: float, df: float, ncp: float) -> float:
    """Exact two-sided power of the unadjusted t test; scipy's noncentral t gives NaN far in the tail (power 1)."""
    value = float(stats.nct.sf(crit, df, ncp) + stats.nct.cdf(-crit, df, ncp))
    return value if np.isfinite(value) else float(abs(ncp) > crit)


def _holm_rows(p: np.ndarray) -> np.ndarray:
    """Holm-adjusted p values of each row (one simulated family per row), vectorised."""
    m = p.shape[1]
    order = np.argsort(p, axis=1)
    ranked = np.take_along_axis(p, order, axis=1) * (m - np.arange(m))
    adjusted = np.minimum(1.0, np.maximum.accumulate(ranked, axis=1))
    out = np.empty_like(p)
    np.put_along_axis(out, order, adjusted, axis=1)
    return out


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

"""The pair's level SD integrated out of the joint draws (freezestats.stats.failures.level_prior).

Checked against an independent computation: the half-normal mixture's density by adaptive quadrature over the SD
(scipy.integrate.quad), and the posterior of a three-coefficient pair model (flat intercept, two level effects)
with that density by brute-force integration on a grid, for the failure part's interval and for the evidence
ratio the SD grid reweighs its parts by. Then what it is for: a pair that fails alike gets a narrower difference
of level effects than the SD given at 2.5 allows, and a pair that fails apart keeps its difference.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from _posterior_mode import laplace_mode
from scipy import integrate, special, stats

from freezestats.stats.failures.level_prior import LevelPrior
from freezestats.stats.failures.pooled_rates import pooled_failure_fit
from freezestats.stats.failures.rate_posterior import sample_rate_posterior

SCALE = 2.5


def _half_normal(sigma: float, scale: float) -> float:
    """The half-normal density (math, not scipy.stats: quad calls it thousands of times)."""
    return math.sqrt(2 / math.pi) / scale * math.exp(-0.5 * (sigma / scale) ** 2)


def _mixture_density(d: float, scale: float = SCALE) -> float:
    """The difference's prior density: N(d; 0, 2 sigma^2) over a half-normal(scale) sigma, by quadrature."""

    def integrand(sigma: float) -> float:
        spread = math.sqrt(2) * sigma
        return _half_normal(sigma, scale) * math.exp(-0.5 * (d / spread) ** 2) / (spread * math.sqrt(2 * math.pi))

    breaks = [abs(d) / 4, abs(d), 4 * abs(d)] if d else None
    return integrate.quad(integrand, 1e-12, 20 * scale, points=breaks, limit=400)[0]


def _mixture_cdf(x: float, scale: float = SCALE) -> float:
    """The difference's prior CDF, by quadrature over sigma: N(0, 2 sigma^2) has CDF erfc(-x / (2 sigma)) / 2."""

    def integrand(sigma: float) -> float:
        return _half_normal(sigma, scale) * 0.5 * math.erfc(-x / (2 * sigma))

    breaks = [abs(x) / 4, abs(x), 4 * abs(x)] if x else None
    return integrate.quad(integrand, 1e-12, 20 * scale, points=breaks, limit=400)[0]


@pytest.mark.parametrize("d", [0.05, 0.3, 1.0, 3.0, 8.0])
def test_the_difference_density_is_the_half_normal_mixture(d: float) -> None:
    prior = LevelPrior((0, 1), SCALE)
    # at u = (-d/2, d/2) the sum is 0: the log density is log p(d) + log N(0; 0, sqrt(2) s) + log 2 (Jacobian)
    log_density = prior.log_density(np.array([[-d / 2, d / 2]]))[0]
    log_d = log_density - stats.norm.logpdf(0.0, scale=np.sqrt(2) * SCALE) - np.log(2.0)
    assert np.exp(log_d) == pytest.approx(_mixture_density(d), rel=0.03)


def test_the_density_integrates_to_one_and_keeps_the_given_sds_variance() -> None:
    prior = LevelPrior((1, 0), SCALE)  # the columns in either order
    # the difference's marginal, integrated over d with the sum at 0 removed as above
    d = np.concatenate([-np.geomspace(60, 1e-4, 4000), np.geomspace(1e-4, 60, 4000)])
    log_d = prior.log_density(np.column_stack([d / 2, -d / 2])) - stats.norm.logpdf(0.0, scale=np.sqrt(2) * SCALE)
    density = np.exp(log_d - np.log(2.0))
    assert integrate.trapezoid(density, d) == pytest.approx(1.0, abs=0.01)
    # E[d^2] = 2 E[sigma^2] = 2 scale^2: the given SD's variance, so the prior is not narrower on average
    assert integrate.trapezoid(density * d**2, d) == pytest.approx(2 * SCALE**2, rel=0.05)


@pytest.mark.parametrize(("failed_0", "failed_k"), [(2, 2), (0, 3)])
def test_the_draws_match_integration_on_a_grid(failed_0: int, failed_k: int) -> None:
    # intercept (flat) + the reference's and the depth's level effects; 10 runs each
    design = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
    failed, runs = np.array([failed_0, failed_k], dtype=float), np.array([10.0, 10.0])
    precision = np.array([0.0, 1 / SCALE**2, 1 / SCALE**2])
    theta, cov = laplace_mode(design, failed, runs, precision)
    cells = {(0, 1000): design[0], (4, 1000): design[1]}
    counts = {(0, 1000): (failed_0, 10), (4, 1000): (failed_k, 10)}
    prior = LevelPrior((1, 2), SCALE)
    post = sample_rate_posterior(cells, counts, theta, cov, precision, level_prior=prior)
    low, high = post.interval([((4, 1000), -0.4), ((0, 1000), 0.4)], 0.95)
    # the reference, on a grid: the two cells' linear predictors are c -+ d/2 with c = intercept + (u_0 + u_k)/2,
    # which is flat as the intercept is, so the sum's prior integrates out and the posterior of (c, d) is the
    # likelihood times the difference's prior. That prior enters as its mass per grid cell over the cell's width,
    # from the mixture's CDF by quadrature (its density has a log spike at 0 that point values would overweight).
    d_axis = np.linspace(-12, 12, 241)
    edges = np.concatenate([d_axis - 0.05, [d_axis[-1] + 0.05]])
    log_pd = np.log(np.diff([_mixture_cdf(e) for e in edges]) / 0.1)
    c, d = np.meshgrid(np.linspace(-16, 8, 961), d_axis, indexing="ij")
    eta = np.stack([c - d / 2, c + d / 2], axis=-1)  # intercept + u_0, intercept + u_k
    log_lik = (failed * -np.logaddexp(0, -eta) + (runs - failed) * -np.logaddexp(0, eta)).sum(-1)
    log_post = log_lik + log_pd[None, :]
    mass = np.exp(log_post - log_post.max())
    value = 0.4 * special.expit(eta[..., 0]) - 0.4 * special.expit(eta[..., 1])
    order = np.argsort(value.ravel())
    cumulative = np.cumsum(mass.ravel()[order]) / mass.sum()
    expected = value.ravel()[order][np.searchsorted(cumulative, [0.025, 0.975])]
    assert (low, high) == pytest.approx(tuple(expected), abs=0.006)
    # the evidence ratio against the Gaussian prior of both effects at the given SD, whose difference is
    # N(0, 2 SD^2) with the sum integrated out in the same way
    log_gauss = stats.norm.logpdf(d, scale=np.sqrt(2) * SCALE)
    ratio = special.logsumexp(log_post) - special.logsumexp(log_lik + log_gauss)
    assert post.log_evidence_ratio == pytest.approx(ratio, abs=0.03)


def _pair(failed_0: dict[int, int], failed_k: dict[int, int]) -> pd.DataFrame:
    """Depths 0 and 3, 5 runs a cell at 50-1000 examples, with the given number of failed runs per size."""
    rows = []
    for depth, failed in ((0, failed_0), (3, failed_k)):
        for size in (50, 100, 200, 500, 1000):
            rows += [{"frozen_layers": depth, "train_size": size, "failed": s < failed.get(size, 0)} for s in range(5)]
    return pd.DataFrame(rows)


def _level_difference(runs: pd.DataFrame, level_sd_prior: bool) -> tuple[float, float]:
    """The weighted mean and 95% width of the depth's level effect minus the reference's over the joint draws."""
    mixture = pooled_failure_fit(runs, runs["failed"].to_numpy(), SCALE, level_sd_prior=level_sd_prior)[2]
    values, weights = [], []
    for share, part in mixture.parts:
        # the depth's rows minus the reference's, summed over sizes: +-5 at the two level columns, +-1 at the cells'
        gap = sum(part.rows[(3, n)] - part.rows[(0, n)] for n in (50, 100, 200, 500, 1000))
        values.append(part.draws[:, np.argmax(gap)] - part.draws[:, np.argmin(gap)])
        weights.append(share * part.weights)
    values, weights = np.concatenate(values), np.concatenate(weights)
    order = np.argsort(values)
    cumulative = np.cumsum(weights[order]) / weights.sum()
    low, high = values[order][np.searchsorted(cumulative, [0.025, 0.975])]
    return float(weights @ values / weights.sum()), float(high - low)


def test_a_pair_that_fails_alike_gets_a_narrower_difference_and_one_apart_keeps_it() -> None:
    alike = _pair({50: 4, 100: 2, 200: 1}, {50: 4, 100: 2, 200: 1})
    _, width_given = _level_difference(alike, level_sd_prior=False)
    _, width_integrated = _level_difference(alike, level_sd_prior=True)
    assert width_integrated < 0.9 * width_given
    apart = _pair({50: 2, 100: 1}, {50: 5, 100: 4, 200: 3, 500: 2, 1000: 1})
    mean_given, _ = _level_difference(apart, level_sd_prior=False)
    mean_integrated, _ = _level_difference(apart, level_sd_prior=True)
    assert mean_given > 1.5 and mean_integrated > 0.85 * mean_given  # not pulled to the reference's rate

"""A normal prior on the pair's intercept in the joint failure-rate draws (``intercept_scale``, an experiment).

Checked against independent computations: one cell's posterior interval and evidence ratio by quadrature on the
logit, the moved mode against scipy's optimiser on the same penalised likelihood. Then what it is for: a pair
that failed at 50 examples only keeps room for failures at the larger sizes, where the flat intercept let the
draws put those rates at expit(-20).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _posterior_mode import laplace_mode
from scipy import integrate, optimize, special, stats

from freezestats.stats.failures import pooled_rates
from freezestats.stats.failures.pooled_rates import pooled_failure_fit
from freezestats.stats.failures.rate_posterior import sample_rate_posterior

SCALE = 2.5


def _log_lik(beta: float, failed: int, runs: int) -> float:
    return failed * -np.logaddexp(0.0, -beta) + (runs - failed) * -np.logaddexp(0.0, beta)


@pytest.mark.parametrize(("failed", "runs"), [(0, 10), (1, 5), (7, 10), (2, 20)])
def test_one_cell_matches_quadrature_over_its_logit(failed: int, runs: int) -> None:
    # the proposal is the flat prior's Laplace fit (a pseudo-count keeps 0 failures finite); the prior moves it
    design = np.ones((1, 1))
    theta, cov = laplace_mode(design, np.array([failed + 0.5]), np.array([runs + 1.0]), np.zeros(1))
    cell = {(0, 100): design[0]}
    precision = np.array([1 / SCALE**2])  # a positive intercept precision: the normal prior, against the flat one
    post = sample_rate_posterior(cell, {(0, 100): (failed, runs)}, theta, cov, precision)
    low, high = post.interval([((0, 100), 1.0)], 0.95)
    # the reference: the posterior of the logit on a fine grid, likelihood times N(0, SCALE^2)
    beta = np.linspace(-40, 40, 80_001)
    log_lik = _log_lik(beta, failed, runs)
    log_post = log_lik + stats.norm.logpdf(beta, scale=SCALE)
    mass = np.exp(log_post - log_post.max())
    cumulative = np.cumsum(mass) / mass.sum()
    expected = special.expit(beta[np.searchsorted(cumulative, [0.025, 0.975])])
    assert (low, high) == pytest.approx(tuple(expected), abs=0.01)
    if failed == 0:
        return  # the flat prior's posterior is improper with no failure: no evidence to compare with
    # the evidence ratio: Z with the normal prior over Z with the flat one (both by quadrature)
    with_prior = integrate.quad(lambda b: np.exp(_log_lik(b, failed, runs)) * stats.norm.pdf(b, scale=SCALE),
                                -40, 40, points=[0.0], limit=200)[0]  # fmt: skip
    flat = integrate.quad(lambda b: np.exp(_log_lik(b, failed, runs)), -60, 60, points=[0.0], limit=200)[0]
    assert post.log_evidence_ratio == pytest.approx(np.log(with_prior / flat), abs=0.03)


def _pair(failed_at_50: tuple[int, int]) -> pd.DataFrame:
    """Depths 0 and -1, 5 runs a cell at 50-1000 examples; failures at 50 examples only (reference, depth)."""
    rows = []
    for size in (50, 100, 200, 500, 1000):
        for depth, failed in zip((0, -1), failed_at_50, strict=True):
            for seed in range(5):
                rows.append({"train_size": size, "frozen_layers": depth, "seed": seed,
                             "failed": size == 50 and seed < failed})  # fmt: skip
    return pd.DataFrame(rows)


def test_the_moved_mode_is_the_penalised_likelihoods_maximum(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = _pair((2, 5))
    y = runs["failed"].to_numpy().astype(float)
    caught = {}
    original = pooled_rates._with_intercept_prior

    def keep(at, y_, scale, steps=50):
        moved = original(at, y_, scale, steps)
        caught.setdefault("pair", (at, moved))
        return moved

    monkeypatch.setattr(pooled_rates, "_with_intercept_prior", keep)
    pooled_failure_fit(runs, y.astype(bool), 2.5, intercept_scale=SCALE)
    at, moved = caught["pair"]
    precision = at.prior_precision.copy()
    precision[0] = 1 / SCALE**2

    def objective(theta: np.ndarray) -> float:
        eta = at.design @ theta
        return -float((y * -np.logaddexp(0, -eta) + (1 - y) * -np.logaddexp(0, eta)).sum() - 0.5 * theta**2 @ precision)

    reference = optimize.minimize(objective, at.theta, method="BFGS", options={"gtol": 1e-9}).x
    assert moved.theta == pytest.approx(reference, abs=1e-4)
    assert moved.theta[0] > at.theta[0] + 2  # the flat fit's intercept sat far below: the prior lifts it
    assert np.all(np.linalg.eigvalsh(moved.cov) > 0)


def test_a_pair_that_failed_at_50_examples_only_keeps_room_at_the_larger_sizes() -> None:
    runs = _pair((2, 5))
    failed = runs["failed"].to_numpy()
    flat = pooled_failure_fit(runs, failed, 2.5)[2]
    normal = pooled_failure_fit(runs, failed, 2.5, intercept_scale=SCALE)[2]
    assert flat is not None and normal is not None and normal.ess > 1000
    for size in (200, 1000):
        _, flat_high = flat.interval([((0, size), 1.0)], 0.95)
        _, high = normal.interval([((0, size), 1.0)], 0.95)
        assert flat_high < 0.01 < high and high > 2 * flat_high  # the flat intercept: below 1%; the normal's: above
        # the depth that failed 5 of 5 against 2 of 5 keeps a rate above the reference's there
        difference = normal.interval([((-1, size), 1.0), ((0, size), -1.0)], 0.95)
        flat_difference = flat.interval([((-1, size), 1.0), ((0, size), -1.0)], 0.95)
        assert difference[1] > flat_difference[1] + 0.02

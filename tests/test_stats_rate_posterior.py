"""The failure part's interval from the pair's rates drawn jointly (freezestats.stats.failures.rate_posterior).

Checked against closed forms (a flat prior on one logit gives a Beta posterior), against an independent
implementation (brute-force integration on a grid of a three-coefficient model), and on the task-level contrast:
two depths that fail alike get a shorter lower side than the per-cell Wilson-MOVER construction gave them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _posterior_mode import laplace_mode
from scipy import special, stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.failures.pooled_rates import pooled_failure_fit, pooled_failure_probabilities
from freezestats.stats.failures.rate_posterior import sample_rate_posterior
from freezestats.stats.failures.sd_integration import PRIOR_SCALE, SD_GRID, RateMixture
from freezestats.stats.items.task_level import task_level_contrasts
from freezestats.stats.models.laplace import fit_binomial_laplace
from freezestats.stats.models.laplace_layout import RandomTerm


@pytest.mark.parametrize(("failed", "runs"), [(2, 10), (9, 40), (1, 5)])
def test_one_cell_with_a_flat_logit_prior_has_a_beta_posterior(failed: int, runs: int) -> None:
    # a flat prior on the logit is Beta(0, 0) on P: the posterior is Beta(failed, runs - failed)
    design = np.ones((1, 1))
    theta, cov = laplace_mode(design, np.array([failed]), np.array([runs]), np.zeros(1))
    post = sample_rate_posterior({(0, 100): design[0]}, {(0, 100): (failed, runs)}, theta, cov, np.zeros(1))
    low, high = post.interval([((0, 100), 1.0)], 0.95)
    assert (low, high) == pytest.approx(tuple(stats.beta(failed, runs - failed).ppf([0.025, 0.975])), abs=0.008)
    assert post.ess > 2000


def test_a_difference_of_two_rates_matches_integration_on_a_grid() -> None:
    # intercept (flat) + a random effect per cell (SD 1.5): two cells, one with 0 of 10 failed, one with 3 of 10
    design = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
    failed, runs = np.array([0.0, 3.0]), np.array([10.0, 10.0])
    precision = np.array([0.0, 1 / 1.5**2, 1 / 1.5**2])
    theta, cov = laplace_mode(design, failed, runs, precision)
    cells = {(0, 1000): design[0], (4, 1000): design[1]}
    post = sample_rate_posterior(cells, {(0, 1000): (0, 10), (4, 1000): (3, 10)}, theta, cov, precision)
    weights = (((4, 1000), -0.4), ((0, 1000), 0.4))  # F = -0.4 P_4 + 0.4 P_0
    low, high = post.interval(list(weights), 0.95)
    # the independent reference: the posterior on a 3-d grid, F's weighted quantiles
    axes = [np.linspace(m - 7 * s, m + 7 * s, 121) for m, s in zip(theta, np.sqrt(np.diag(cov)) * 1.6, strict=True)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    eta = grid @ design.T
    log_post = (failed * -np.logaddexp(0, -eta) + (runs - failed) * -np.logaddexp(0, eta)).sum(1)
    log_post -= 0.5 * grid**2 @ precision
    mass = np.exp(log_post - log_post.max())
    value = -0.4 * special.expit(eta[:, 1]) + 0.4 * special.expit(eta[:, 0])
    order = np.argsort(value)
    cumulative = np.cumsum(mass[order]) / mass.sum()
    expected = value[order][np.searchsorted(cumulative, [0.025, 0.975])]
    assert (low, high) == pytest.approx(tuple(expected), abs=0.006)


def _pair_study(seed: int) -> pd.DataFrame:
    """Depths 0 and 2 with the same collapse rates (nearly all runs at 50 examples, falling to none at 1000, as in
    the realistic simulator), 5 seeds a cell, healthy runs 1 point apart."""
    rng = np.random.default_rng(seed)
    rows = []
    for size, rate, healthy in ((50, 0.9, 0.55), (100, 0.3, 0.80), (200, 0.1, 0.85), (1000, 0.0, 0.90)):
        for depth in (0, 2):
            for s in range(5):
                collapsed = rng.random() < rate
                score = 0.5 if collapsed else healthy - depth * 0.005 + rng.normal(0, 0.01)
                rows.append({"trial": len(rows), "train_size": size, "frozen_layers": depth, "seed": s,
                             "heldout": score, "failed": collapsed})  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.parametrize("seed", [0, 3, 5])
def test_depths_that_fail_alike_get_a_shorter_lower_side_than_wilson_mover(seed: int) -> None:
    # the shared intercept and size effect are all but unknown at 1000 examples (no failure there), so each rate's
    # Wilson interval reaches ~10%; drawn jointly, the two rates rise together and their difference stays small
    runs = _pair_study(seed)
    assert not runs.loc[runs["train_size"] == 1000, "failed"].any()
    args = {"response": "heldout", "metric": "accuracy", "population": "evaluation_set"}
    joint = task_level_contrasts(runs, None, failure_rates="pooled_joint", **args).set_index(
        ["train_size", "frozen_layers"]
    )
    wilson = task_level_contrasts(runs, None, failure_rates="pooled", **args).set_index(["train_size", "frozen_layers"])
    at = (1000, 2)
    assert joint.loc[at, "method"] == wilson.loc[at, "method"] == "two-part"
    assert joint.loc[at, "estimate"] == pytest.approx(wilson.loc[at, "estimate"])  # same rates, same estimate
    joint_low = joint.loc[at, "estimate"] - joint.loc[at, "ci_low"]
    wilson_low = wilson.loc[at, "estimate"] - wilson.loc[at, "ci_low"]
    assert joint_low < 0.75 * wilson_low
    assert (joint["ci_low"] <= joint["estimate"]).all() and (joint["estimate"] <= joint["ci_high"]).all()
    again = task_level_contrasts(runs, None, failure_rates="pooled_joint", **args)
    again = again.set_index(["train_size", "frozen_layers"])
    pd.testing.assert_frame_equal(joint, again)  # fixed draws: the same interval every time


def test_the_fit_without_draws_is_the_probabilities_function() -> None:
    runs = _pair_study(5)
    failed = runs["failed"].to_numpy()
    p, rows, posterior = pooled_failure_fit(runs, failed, 2.5)
    p_only, rows_only = pooled_failure_probabilities(runs, failed, level_sd=2.5)
    assert p == p_only and posterior is not None and posterior.ess >= 200
    assert all(np.array_equal(rows[c][0], rows_only[c][0]) for c in rows)
    assert pooled_failure_fit(runs, failed, 2.5, posterior=None)[2] is None
    assert pooled_failure_fit(runs, failed, 2.5, posterior="fitted")[2].ess >= 200  # given the fitted SDs
    with pytest.raises(ModelFitError, match="`posterior` must be"):
        pooled_failure_fit(runs, failed, 2.5, posterior="joint")
    assert pooled_failure_fit(runs, np.zeros(len(runs), dtype=bool), 2.5)[2] is None  # no failure: P = 0, no draws


def _mean_sd(runs: pd.DataFrame) -> float:
    """The level x size SD's mean over the integrated draws' grid points (by their shares)."""
    mixture = pooled_failure_fit(runs, runs["failed"].to_numpy(), 2.5)[2]
    assert isinstance(mixture, RateMixture)
    return sum(sd * share for sd, (share, _) in zip(mixture.sds, mixture.parts, strict=True))


def test_the_sd_grid_weights_are_the_laplace_likelihood_times_the_prior_and_the_cell_width() -> None:
    runs = _pair_study(3)
    failed = runs["failed"].to_numpy().astype(int)
    keys = pd.Series(list(zip(runs["frozen_layers"], runs["train_size"], strict=True)))
    codes = {"level:size": pd.factorize(keys)[0], "level": pd.factorize(runs["frozen_layers"])[0],
             "size": pd.factorize(runs["train_size"])[0]}  # fmt: skip
    terms = [RandomTerm(name, c, np.zeros(c.max() + 1, dtype=int), (name,)) for name, c in codes.items()]

    def loglik(sd: float) -> float:
        given = {"level": 2.5, "level:size": sd}
        return fit_binomial_laplace(failed, np.ones_like(failed), np.ones((len(runs), 1)), terms, given_sd=given).loglik

    logliks = np.array([loglik(sd) for sd in SD_GRID])
    grid = np.array(SD_GRID)
    width = np.diff(np.concatenate([[grid[0] / 2], (grid[1:] + grid[:-1]) / 2, [grid[-1]]]))
    expected = np.exp(logliks - logliks.max()) * stats.halfnorm.pdf(grid, scale=PRIOR_SCALE) * width
    expected /= expected.sum()
    mixture = pooled_failure_fit(runs, failed.astype(bool), 2.5)[2]
    kept = expected >= 0.01
    assert mixture.sds == tuple(grid[kept])
    assert np.allclose([share for share, _ in mixture.parts], expected[kept] / expected[kept].sum(), rtol=1e-6)


def test_cells_that_fail_differently_move_the_weight_to_larger_sds() -> None:
    # the same two depths, once failing alike, once with the depth failing at 200 examples where the reference does
    # not (and not at the other sizes): a cell effect the level and size effects cannot explain
    alike = _pair_study(0).assign(failed=lambda d: d["failed"] & (d["train_size"] == 50))
    apart = alike.assign(failed=alike["failed"] | ((alike["train_size"] == 200) & (alike["frozen_layers"] == 2)))
    mean_sd = [_mean_sd(r) for r in (alike, apart)]
    assert mean_sd[1] > mean_sd[0] + 0.3


def test_integrating_the_sd_lengthens_a_side_the_fitted_sd_left_without_cell_room() -> None:
    # where the fitted level x size SD is 0 the fitted draws give each cell no room of its own; averaged over the
    # SD they do, so the interval of the depth's rate minus the reference's is wider
    runs = _pair_study(5)
    failed = runs["failed"].to_numpy()
    fitted = pooled_failure_fit(runs, failed, 2.5, posterior="fitted")[2]
    integrated = pooled_failure_fit(runs, failed, 2.5, posterior="integrated")[2]
    # the fitted SD is 0: its draws have no cell effects (intercept, 2 levels, 4 sizes); the integrated ones do
    assert fitted.draws.shape[1] == 7 and all(part.draws.shape[1] == 15 for _, part in integrated.parts)
    terms = [((2, 100), 1.0), ((0, 100), -1.0)]
    low_f, high_f = fitted.interval(terms, 0.95)
    low_i, high_i = integrated.interval(terms, 0.95)
    assert high_i - low_i > 1.1 * (high_f - low_f)

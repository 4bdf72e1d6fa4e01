"""The pair's failure rates paired by seed (``freezestats.stats.failures.seed_pairs``): the quadrature against
numerical integration, the independent binomials where the seed SD is 0, and a narrower rate difference where
the pairs fail together."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, special, stats

from freezestats.stats.failures.pooled_rates import pooled_failure_fit
from freezestats.stats.failures.rate_posterior import sample_rate_posterior
from freezestats.stats.failures.seed_pairs import SeedGroups, conditional_scale, marginal_rates
from freezestats.stats.items.task_two_part import seed_groups


def _quad(function) -> float:
    return integrate.quad(lambda z: function(z) * stats.norm.pdf(z), -12, 12, epsabs=1e-12)[0]


@pytest.mark.parametrize(("eta", "sd"), [(-3.0, 0.5), (-1.0, 2.0), (0.5, 4.0), (-6.0, 3.0), (-2.0, 4.0), (-9.0, 4.0)])
def test_the_marginal_rate_is_the_integral_over_a_new_seed(eta: float, sd: float) -> None:
    expected = _quad(lambda z: special.expit(eta + sd * z))
    assert marginal_rates(np.array([eta]), sd)[0] == pytest.approx(expected, abs=1e-5)
    assert marginal_rates(np.array([eta]), 0.0)[0] == special.expit(eta)


def test_a_groups_likelihood_is_the_integral_of_its_runs_given_the_seed() -> None:
    cells = [(4, 100), (0, 100), (4, 100), (0, 100), (4, 200)]
    failed = np.array([True, True, True, False, False])
    groups = SeedGroups.of(cells, failed, np.array([0, 0, 1, 1, 2]), sds=(1.7,))
    eta = {(4, 100): np.array([-0.4]), (0, 100): np.array([-1.1]), (4, 200): np.array([-2.0])}

    def run(e: float, y: bool, z: float, sd: float = 1.7) -> float:
        p = special.expit(conditional_scale(sd) * e + sd * z)  # the marginal logit made the logit given the seed
        return p if y else 1 - p

    both = _quad(lambda z: run(-0.4, True, z) * run(-1.1, True, z))
    depth_only = _quad(lambda z: run(-0.4, True, z) * run(-1.1, False, z))
    alone = _quad(lambda z: run(-2.0, False, z))
    expected = np.log(both) + np.log(depth_only) + np.log(alone)
    assert groups.log_likelihood(eta)[0][0] == pytest.approx(expected, abs=2e-4)  # the quadrature's accuracy
    # with no seed SD every group factorises: the cells' independent Bernoulli likelihood
    independent = SeedGroups.of(cells, failed, np.array([0, 0, 1, 1, 2]), sds=(0.0,))
    bernoulli = sum(np.log(run(eta[c][0], y, 0.0, sd=0.0)) for c, y in zip(cells, failed, strict=True))
    assert independent.log_likelihood(eta)[0][0] == pytest.approx(bernoulli, abs=1e-12)
    # over the grid: the prior-weighted sum of the grid points' likelihoods, and each draw's posterior over them
    grid = SeedGroups.of(cells, failed, np.array([0, 0, 1, 1, 2]), sds=(0.0, 1.7))
    total, posterior = grid.log_likelihood(eta)
    at = np.array([bernoulli, expected]) + grid.log_prior
    assert total[0] == pytest.approx(np.logaddexp(*at), abs=2e-4)
    assert posterior[0] == pytest.approx(np.exp(at - total[0]), abs=2e-4)


def test_groups_with_the_same_runs_enter_once_with_their_count() -> None:
    cells = [(1, 50), (0, 50)] * 3
    groups = SeedGroups.of(cells, np.array([True, True, True, True, False, False]), np.repeat([0, 1, 2], 2))
    assert sorted(groups.counts.tolist()) == [1.0, 2.0] and len(groups.patterns) == 2


def _pair_runs(concordant: bool) -> pd.DataFrame:
    """A depth (1) and the reference (0), 5 seeds at each of three sizes; failures of the two cells on the same
    seeds (``concordant``) or on different ones, at the same counts."""
    rows = []
    for size, n_failed in ((50, 3), (100, 2), (200, 1)):
        for seed in range(1, 6):
            ref_fails = seed <= n_failed
            depth_fails = ref_fails if concordant else seed > 5 - n_failed  # the last seeds instead of the first
            rows.append({"frozen_layers": 0, "train_size": size, "seed": seed, "failed": ref_fails})
            rows.append({"frozen_layers": 1, "train_size": size, "seed": seed, "failed": depth_fails})
    return pd.DataFrame(rows)


def test_concordant_failures_narrow_the_rate_difference_and_discordant_ones_do_not() -> None:
    widths, seed_sds = {}, {}
    for concordant in (True, False):
        runs = _pair_runs(concordant)
        failed = runs["failed"].to_numpy()
        terms = [((1, 100), 1.0), ((0, 100), -1.0)]
        for paired in (False, True):
            groups = seed_groups(runs) if paired else None
            _, _, posterior = pooled_failure_fit(runs, failed, 2.5, posterior="fitted", seed_groups=groups)
            low, high = posterior.interval(terms, 0.95)
            widths[concordant, paired] = high - low
            if paired:  # the posterior mean of the seed SD
                seed_sds[concordant] = float(posterior.weights @ posterior.seeds[1] @ posterior.seeds[0].sds)
            assert posterior.ess >= 200
    # the posterior puts the seed SD high where the pairs fail together, low where they fail apart
    assert seed_sds[True] > 2.0 and seed_sds[False] < 1.0
    assert widths[True, True] < 0.8 * widths[True, False]  # concordant pairs: a narrower difference
    assert widths[False, True] == pytest.approx(widths[False, False], rel=0.15)


def test_a_seed_sd_of_zero_gives_the_unpaired_draws_exactly() -> None:
    rows = {(1, 100): np.array([1.0, 1.0]), (0, 100): np.array([1.0, 0.0])}
    counts = {(1, 100): (2, 5), (0, 100): (1, 5)}
    theta, cov, precision = np.array([-1.4, 0.5]), np.diag([0.5, 0.8]), np.array([0.0, 0.16])
    plain = sample_rate_posterior(rows, counts, theta, cov, precision, n_draws=2000)
    cells = [(1, 100)] * 5 + [(0, 100)] * 5
    failed = np.array([1, 1, 0, 0, 0, 1, 0, 0, 0, 0], dtype=bool)
    groups = SeedGroups.of(cells, failed, np.tile(np.arange(5), 2), sds=(0.0,))
    paired = sample_rate_posterior(rows, counts, theta, cov, precision, n_draws=2000, seed_groups=groups)
    np.testing.assert_allclose(paired.weights, plain.weights, rtol=1e-9)
    assert abs(paired.log_evidence_ratio) < 1e-9


def test_seed_groups_are_a_seed_at_a_size() -> None:
    runs = pd.DataFrame(
        {"train_size": [50, 50, 100, 100, 50], "seed": [1, 1, 1, 2, 2], "frozen_layers": [0, 1, 0, 1, 0]}
    )
    codes = seed_groups(runs)
    assert codes[0] == codes[1] and len({codes[0], codes[2], codes[3], codes[4]}) == 4


def test_the_contrasts_failure_part_pairs_by_seed_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    from freezestats.stats.items import task_two_part

    runs = _pair_runs(concordant=True)
    runs["heldout"] = np.where(runs["failed"], 0.51, 0.8)
    monkeypatch.setattr(task_two_part, "PAIR_SEED_SHARED", False)
    unpaired = task_two_part.failure_parts(runs, "heldout", "pooled_joint")
    monkeypatch.setattr(task_two_part, "PAIR_SEED_SHARED", True)
    paired = task_two_part.failure_parts(runs, "heldout", "pooled_joint")
    assert all(part.seeds is None for _, part in unpaired.posterior.parts)
    assert all(part.seeds is not None for _, part in paired.posterior.parts)
    assert paired.p == unpaired.p  # the point estimates are the unpaired fit's; the draws change the interval
    terms = [((1, 100), 1.0), ((0, 100), -1.0)]
    width = {name: np.subtract(*parts.posterior.interval(terms, 0.95)[::-1]) for name, parts in
             (("paired", paired), ("unpaired", unpaired))}  # fmt: skip
    assert width["paired"] < 0.8 * width["unpaired"]


def test_where_the_seed_decides_a_group_has_the_frechet_bounds_probability() -> None:
    cells = [(4, 100), (0, 100), (4, 100), (0, 100), (4, 100), (0, 100), (4, 200)]
    failed = np.array([True, True, True, False, False, False, False])
    codes = np.array([0, 0, 1, 1, 2, 2, 3])
    eta = {(4, 100): np.array([-0.4]), (0, 100): np.array([-1.1]), (4, 200): np.array([-2.0])}
    # the limit of a large seed SD: the quadrature at an SD of 50 with the same marginal rates
    large = SeedGroups.of(cells, failed, codes, sds=(50.0,))
    marginal = {c: special.logit(marginal_rates(conditional_scale(50.0) * v, 50.0)) for c, v in eta.items()}
    decide = SeedGroups.of(cells, failed, codes, sds=(float("inf"),))
    assert decide.log_likelihood(marginal)[0][0] == pytest.approx(large.log_likelihood(eta)[0][0], abs=1e-6)
    # by hand: both fail (min P), the depth alone (its P above the reference's), both healthy, one run healthy
    p4, p0, p4b = (special.expit(eta[c][0]) for c in ((4, 100), (0, 100), (4, 200)))
    by_hand = np.log(min(p4, p0)) + np.log(p4 - p0) + np.log(1 - max(p4, p0)) + np.log(1 - p4b)
    assert decide.log_likelihood(eta)[0][0] == pytest.approx(by_hand, abs=1e-12)
    # a pair failing the other way round (the cell with the lower rate alone) is impossible there, not on the grid
    wrong = SeedGroups.of([(4, 100), (0, 100)], np.array([False, True]), np.array([0, 0]), sds=(0.0, 1.0, float("inf")))
    total, posterior = wrong.log_likelihood(eta)
    assert np.isfinite(total[0]) and posterior[0, 2] == 0.0


def test_the_grid_reaching_infinity_takes_the_half_cauchy_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    from freezestats.stats.failures import seed_pairs

    cells, failed, codes = [(1, 50), (0, 50)], np.array([True, True]), np.array([0, 0])
    assert seed_pairs.default_sds() == seed_pairs.SEED_SD_GRID
    monkeypatch.setattr(seed_pairs, "SEEDS_DECIDE", True)
    groups = SeedGroups.of(cells, failed, codes)
    assert groups.sds[-1] == np.inf and len(groups.sds) == len(seed_pairs.SEED_SD_GRID) + 1
    mass = np.exp(groups.log_prior)
    assert mass.sum() == pytest.approx(1.0)
    # every SD above the last finite point's range (4 stands for 3..5) is the limit's
    assert mass[-1] == pytest.approx(stats.halfcauchy.sf(5.0, scale=seed_pairs.SEED_SD_SCALE), rel=1e-9)
    # a lone finite point stands for 0 to twice itself (was an IndexError)
    lone = SeedGroups.of(cells, failed, codes, sds=(1.5, np.inf))
    tail = stats.halfcauchy.sf(3.0, scale=seed_pairs.SEED_SD_SCALE)
    assert np.exp(lone.log_prior) == pytest.approx([1 - tail, tail], rel=1e-9)


def test_letting_the_seed_decide_narrows_concordant_pairs_further(monkeypatch: pytest.MonkeyPatch) -> None:
    from freezestats.stats.failures import seed_pairs

    runs = _pair_runs(concordant=True)
    failed, groups = runs["failed"].to_numpy(), seed_groups(runs)
    terms, widths = [((1, 100), 1.0), ((0, 100), -1.0)], {}
    for decide in (False, True):
        monkeypatch.setattr(seed_pairs, "SEEDS_DECIDE", decide)
        _, _, posterior = pooled_failure_fit(runs, failed, 2.5, posterior="fitted", seed_groups=groups)
        low, high = posterior.interval(terms, 0.95)
        widths[decide] = high - low
        assert posterior.ess >= 200
    assert widths[True] < 0.9 * widths[False]

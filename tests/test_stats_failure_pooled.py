"""The pooled failure model of the two-part contrasts: glmer's fit, its structural cells, and its pooling."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _r_reference import r_reference

from freezestats.exceptions import ModelFitError
from freezestats.stats.failures.pooled_rates import pooled_failure_probabilities
from freezestats.stats.models.laplace import RandomTerm, fit_binomial_laplace

DATA = Path(__file__).parent / "data"


def _fixture() -> pd.DataFrame:
    return pd.read_csv(DATA / "failure_glmm_fixture.csv")


def _our_fit(table: pd.DataFrame):
    """The GLMM as failure_rates_pooled fits it, with the level names R gives the modes."""
    parts = {"cell": table["cell"], "level": table["frozen_layers"], "size": table["train_size"]}
    codes = {name: pd.factorize(values) for name, values in parts.items()}
    terms = [RandomTerm(name, c, np.zeros(len(levels), dtype=int), (name,)) for name, (c, levels) in codes.items()]
    y = table["failed"].to_numpy()
    fit = fit_binomial_laplace(y, np.ones_like(y), np.ones((len(y), 1)), terms)
    return fit, {name: [str(v) for v in levels] for name, (_, levels) in codes.items()}


def _compare(reference: dict) -> None:
    fit, names = _our_fit(_fixture())
    np.testing.assert_allclose(fit.beta, np.atleast_1d(reference["beta"]), atol=1e-4)
    np.testing.assert_allclose(fit.sd, [reference["sd"][k] for k in ("cell", "level", "size")], atol=1e-4)
    expected = [reference[f"modes_{name}"][v] for name in ("cell", "level", "size") for v in names[name]]
    np.testing.assert_allclose(fit.modes, expected, atol=1e-4)
    np.testing.assert_allclose(fit.cov_beta_conditional, np.atleast_2d(reference["vcov_conditional"]), rtol=1e-3)
    assert fit.deviance == pytest.approx(reference["deviance"], abs=1e-5)


def test_the_fixture_is_what_its_generator_writes() -> None:
    import sys

    sys.path.insert(0, str(DATA))
    from make_failure_glmm_fixture import fixture

    pd.testing.assert_frame_equal(fixture().reset_index(drop=True), _fixture(), check_dtype=False, atol=1e-12)


def test_the_failure_glmm_matches_the_committed_glmer_fit() -> None:
    _compare(json.loads((DATA / "failure_glmm_reference.json").read_text()))


def test_the_failure_glmm_matches_glmer_run_now_where_r_is(tmp_path: Path) -> None:
    script, fixture, committed = "failure_glmm_reference.R", "failure_glmm_fixture.csv", "failure_glmm_reference.json"
    _compare(r_reference(script, fixture, committed, ("lme4", "jsonlite"), tmp_path))


def test_the_model_gives_the_glmm_probabilities_and_a_prediction_covariance() -> None:
    table = _fixture()
    p, grad = pooled_failure_probabilities(table, table["failed"].to_numpy().astype(bool))
    fit, names = _our_fit(table)
    modes = dict(zip([f"{k}={v}" for k in ("cell", "level", "size") for v in names[k]], fit.modes, strict=True))
    for name in names["cell"]:
        level, size = map(int, name.split(":"))
        eta = fit.beta[0] + modes[f"cell={name}"] + modes[f"level={level}"] + modes[f"size={size}"]
        assert p[(level, size)] == pytest.approx(1 / (1 + np.exp(-eta)), rel=1e-8)
        gradient, cov = grad[(level, size)]
        assert np.all(np.linalg.eigvalsh(cov) > 0) and gradient @ cov @ gradient > 0
    every = table.groupby(["frozen_layers", "train_size"])["failed"].all()
    assert all(0.5 < p[cell] < 1.0 for cell in every[every].index)  # all-failed cells: high, not certain


def _runs(failures: dict[tuple[int, int], int], seeds: int = 5) -> tuple[pd.DataFrame, np.ndarray]:
    rows, failed = [], []
    for level in (0, 2, 4, 6):
        for size in (50, 200, 1000):
            k = failures.get((level, size), 0)
            for seed in range(seeds):
                rows.append({"frozen_layers": level, "train_size": size, "seed": seed})
                failed.append(seed < k)
    return pd.DataFrame(rows), np.array(failed)


def test_without_failures_or_with_only_failures_every_p_is_exact() -> None:
    runs, failed = _runs({})
    p, grad = pooled_failure_probabilities(runs, failed)
    assert set(p.values()) == {0.0} and all(g is None for g in grad.values())
    p, grad = pooled_failure_probabilities(runs, np.ones(len(runs), dtype=bool))
    assert set(p.values()) == {1.0} and all(g is None for g in grad.values())


def test_levels_borrow_strength_and_a_failing_level_stands_out() -> None:
    # level 6 fails in 7 of its 15 runs, the others in 1 of 15 each: level 6's P stays far above the rest, and
    # a level with no failure is pulled up towards the others (not to 0, not to Firth's per-level ~2%)
    failures = {(6, 50): 3, (6, 200): 2, (6, 1000): 2, (0, 50): 1, (2, 200): 1, (4, 50): 1}
    runs, failed = _runs(failures)
    p, grad = pooled_failure_probabilities(runs, failed)
    assert p[(6, 200)] > 2 * max(p[(0, 200)], p[(2, 200)], p[(4, 200)])
    assert 0.0 < p[(0, 1000)] < p[(6, 1000)]
    assert grad[(0, 1000)] is not None


def _pair_fit(reference: dict):
    """The pair's model as the task-level contrast fits it: the two levels' SD given, sizes' and cells' estimated."""
    table = _fixture()
    table = table[table["frozen_layers"].isin(reference["levels"])].reset_index(drop=True)
    parts = {"cell": table["cell"], "level": table["frozen_layers"], "size": table["train_size"]}
    codes = {name: pd.factorize(values) for name, values in parts.items()}
    terms = [RandomTerm(name, c, np.zeros(len(levels), dtype=int), (name,)) for name, (c, levels) in codes.items()]
    y = table["failed"].to_numpy()
    fit = fit_binomial_laplace(
        y, np.ones_like(y), np.ones((len(y), 1)), terms, given_sd={"level": reference["level_sd"]}
    )
    return fit, {name: [str(v) for v in levels] for name, (_, levels) in codes.items()}


def _compare_pair(reference: dict) -> None:
    fit, names = _pair_fit(reference)
    assert fit.sd[1] == reference["level_sd"]  # held, not estimated
    np.testing.assert_allclose(fit.beta, np.atleast_1d(reference["beta"]), atol=1e-4)
    np.testing.assert_allclose(fit.sd, [reference["sd"][k] for k in ("cell", "level", "size")], atol=1e-4)
    expected = [reference[f"modes_{name}"][v] for name in ("cell", "level", "size") for v in names[name]]
    np.testing.assert_allclose(fit.modes, expected, atol=1e-4)
    assert fit.deviance == pytest.approx(reference["deviance"], abs=1e-5)


def test_the_pair_model_with_a_given_level_sd_matches_glmmtmb() -> None:
    _compare_pair(json.loads((DATA / "failure_glmm_pair_reference.json").read_text()))


def test_the_pair_model_matches_glmmtmb_run_now_where_r_is(tmp_path: Path) -> None:
    script, fixture, committed = (
        "failure_glmm_pair_reference.R",
        "failure_glmm_fixture.csv",
        "failure_glmm_pair_reference.json",
    )
    _compare_pair(r_reference(script, fixture, committed, ("glmmTMB", "jsonlite"), tmp_path))


def test_two_levels_keep_their_own_rates_with_the_given_sd() -> None:
    """Estimated from two levels, the level SD collapses and the depth's rate is pulled to the reference's; given
    (2.5), the depth that fails in 6 of 25 runs keeps a rate well above the reference's 1 of 25, at every size."""
    rows = [{"frozen_layers": level, "train_size": size, "seed": seed} for level in (0, 4)
            for size in (50, 100, 200, 500, 1000) for seed in range(5)]  # fmt: skip
    runs = pd.DataFrame(rows)
    failed = np.zeros(len(runs), dtype=bool)
    failed[[25, 26, 30, 31, 35, 0]] = True  # depth 4: 2 at n=50, 2 at 100, 1 at 200 and 1 more at 100; ref: 1 at 50
    failed[32] = True
    given, _ = pooled_failure_probabilities(runs, failed, level_sd=2.5)
    estimated, _ = pooled_failure_probabilities(runs, failed)
    assert all(given[(4, n)] > 2 * given[(0, n)] for n in (50, 100, 200, 500, 1000))
    assert given[(4, 100)] - given[(0, 100)] > estimated[(4, 100)] - estimated[(0, 100)]


def test_a_level_that_never_failed_keeps_a_finite_rate_with_the_given_sd() -> None:
    """Separation: the depth fails in 6 of 25 runs, the reference in none. The given SD is a prior on the level
    effects, so the reference's rate is small but above 0, with a finite linear-predictor variance."""
    rows = [{"frozen_layers": level, "train_size": size, "seed": seed} for level in (0, 4)
            for size in (50, 100, 200, 500, 1000) for seed in range(5)]  # fmt: skip
    runs = pd.DataFrame(rows)
    failed = np.zeros(len(runs), dtype=bool)
    failed[[25, 26, 27, 30, 31, 35]] = True
    p, rows_cov = pooled_failure_probabilities(runs, failed, level_sd=2.5)
    for size in (50, 100, 200, 500, 1000):
        assert 0.0 < p[(0, size)] < p[(4, size)] < 1.0
        row, cov = rows_cov[(0, size)]
        assert np.isfinite(row @ cov @ row) and row @ cov @ row > 0


@pytest.mark.parametrize(
    ("given", "names"),
    [({"depth": 2.5}, "unknown ['depth']"), ({"level": 0.0}, "non-positive {'level': 0.0}"),
     ({"level": float("nan")}, "non-positive {'level': nan}")],
)  # fmt: skip
def test_a_given_sd_must_name_a_term_and_be_positive(given: dict, names: str) -> None:
    table = _fixture()
    codes, levels = pd.factorize(table["frozen_layers"])
    terms = [RandomTerm("level", codes, np.zeros(len(levels), dtype=int), ("level",))]
    y = table["failed"].to_numpy()
    with pytest.raises(ModelFitError, match="given_sd") as err:
        fit_binomial_laplace(y, np.ones_like(y), np.ones((len(y), 1)), terms, given_sd=given)
    assert names in str(err.value)

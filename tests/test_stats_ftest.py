"""F tests with Satterthwaite's df, the interaction test of the per-size model, and their agreement with R.

The reference is ``tests/data/ftest_reference.R`` run on ``tests/data/hetero_fixture.csv``: re-run when
``Rscript`` with nlme, lmerTest and jsonlite is present, otherwise the committed ``ftest_reference.json``.
(a) lmerTest's ``contest`` / ``anova(ddf = "Satterthwaite")`` on a homoscedastic, unbalanced version of the
fixture, against :func:`wald_f_test` on the same model fitted by ``_reml`` with one residual group; (b) nlme's
ML fits of the per-size model, full vs additive, against ``interaction_test(method="lrt")``; (c) nlme's fits of
the pooled model of two tasks against :func:`fit_pooled` and ``task_interaction_test(method="lrt")``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _r_reference import r_reference
from scipy import stats

import freezestats.stats.models.mixed_grouped as mixed_grouped
from freezestats.exceptions import ModelFitError
from freezestats.stats import contrasts_vs_reference, fit_mixed, interaction_test, simulate_results
from freezestats.stats.comparisons.pooled_tasks import fit_pooled
from freezestats.stats.comparisons.task_interaction import task_interaction_test
from freezestats.stats.design.model_frame import _design, _prepare
from freezestats.stats.inference.ftest import TEST_COLUMNS, bootstrap_lrt, f_test_ddf, grouped_model, wald_f_test
from freezestats.stats.models.mixed_grouped import _random_terms
from freezestats.stats.models.reml import Component, fit_components
from freezestats.stats.simulation.results import blog_run_sds

DATA = Path(__file__).parent / "data"
R_PACKAGES = ("nlme", "lmerTest", "jsonlite")
GENERATING_SD = {50: 0.07, 200: 0.02, 1000: 0.0044}  # make_hetero_fixture.py
DROPPED = ((5, 2, 200), (1, -1, 1000), (3, 4, 50))  # (seed, frozen_layers, train_size), as in ftest_reference.R


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """R's numbers: fresh from R when R and its packages are here, else the committed JSON."""
    return r_reference(
        "ftest_reference.R", "hetero_fixture.csv", "ftest_reference.json", R_PACKAGES, tmp_path_factory.mktemp("ftest")
    )


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return pd.read_csv(DATA / "hetero_fixture.csv")


def homoscedastic(table: pd.DataFrame) -> pd.DataFrame:
    """Part (a)'s table: deviations from the cell means rescaled to SD 0.02 at every size, three runs dropped."""
    cell_mean = table.groupby(["frozen_layers", "train_size"])["best_dev"].transform("mean")
    scale = 0.02 / table["train_size"].map(GENERATING_SD)
    out = table.assign(best_dev=cell_mean + (table["best_dev"] - cell_mean) * scale)
    drop = np.zeros(len(out), dtype=bool)
    for seed, frozen, size in DROPPED:
        drop |= (out["seed"] == seed) & (out["frozen_layers"] == frozen) & (out["train_size"] == size)
    return out[~drop].reset_index(drop=True)


@pytest.fixture(scope="module")
def lmer_like(table: pd.DataFrame, reference: dict):
    """lmer's model of part (a) by _reml: (1 | seed) + (1 | seed:train_size) and one residual variance."""
    hom = homoscedastic(table)
    ref = reference["homoscedastic"]
    assert len(hom) == ref["n_obs"] and hom["best_dev"].sum() == pytest.approx(ref["sum_y"], abs=1e-9)
    prepared = _prepare(hom, "best_dev", task=None, include_failed=True, caller="test")
    x = _design(prepared)
    residual = Component("residual", "residual", mask=np.ones(len(prepared.frame), dtype=bool), lower=1e-12)
    seeds = prepared.frame["seed"].to_numpy()
    fit = fit_components(
        prepared.frame["best_dev"].to_numpy(float),
        x.to_numpy(float),
        [*_random_terms(prepared), residual],
        [np.flatnonzero(seeds == s) for s in np.unique(seeds)],
    )
    return fit, list(x.columns)


def test_the_homoscedastic_fit_is_lmers(lmer_like, reference: dict) -> None:
    fit, names = lmer_like
    ref = reference["homoscedastic"]
    variances = ref["variances"]
    expected = [variances["seed"], variances["seed:train_size"], variances["residual"]]
    np.testing.assert_allclose(fit.theta, expected, rtol=1e-5)
    assert fit.loglik == pytest.approx(ref["reml_loglik"], abs=1e-6)
    lme4 = pd.DataFrame(ref["fixed_effects"]).set_index("term")["estimate"]
    np.testing.assert_allclose(fit.beta, lme4.loc[names].to_numpy(), atol=1e-8)


@pytest.mark.parametrize("name", ["interaction", "frozen", "size", "mixed", "rank_deficient"])
def test_f_tests_match_lmertest_contest(lmer_like, reference: dict, name: str) -> None:
    """Joint F tests of several L (unit rows, rows mixing strata, a rank-deficient L) as lmerTest computes them."""
    fit, names = lmer_like
    ref = reference["homoscedastic"]["contest"][name]
    matrix = pd.DataFrame(ref["L"])[names].to_numpy(float)
    ours = wald_f_test(fit, matrix).iloc[0]
    assert ours["num_df"] == ref["num_df"]
    assert ours["f_stat"] == pytest.approx(ref["f_stat"], rel=1e-6, abs=1e-4)
    assert ours["den_df"] == pytest.approx(ref["den_df"], rel=1e-3)
    assert ours["p_val"] == pytest.approx(ref["p_val"], rel=1e-3)
    assert ours["method"] == "F (Satterthwaite)"


def test_interaction_row_of_lmertests_anova(lmer_like, reference: dict) -> None:
    """Type III anova of the top term: the same hypothesis as the interaction coefficients."""
    fit, names = lmer_like
    row = pd.DataFrame(reference["homoscedastic"]["anova"]).set_index("term").loc["frozen_layers:train_size"]
    inter = [n for n in names if ":" in n]
    ours = wald_f_test(fit, np.eye(len(names))[[names.index(n) for n in inter]]).iloc[0]
    assert ours["f_stat"] == pytest.approx(row["f_stat"], abs=1e-4)
    assert ours["den_df"] == pytest.approx(row["den_df"], rel=1e-3)
    assert ours["num_df"] == row["num_df"] == 6


def test_one_row_is_the_squared_t_test(lmer_like, reference: dict) -> None:
    fit, names = lmer_like
    ref = reference["homoscedastic"]["contest1d"]
    row = np.array([ref["L"][n] for n in names], dtype=float)
    ours = wald_f_test(fit, row).iloc[0]
    assert ours["num_df"] == 1
    assert ours["f_stat"] == pytest.approx(ref["t_stat"] ** 2, rel=1e-6)
    assert ours["den_df"] == pytest.approx(ref["df"], rel=1e-3)
    assert ours["den_df"] == pytest.approx(float(fit.satterthwaite_df(row)[0]), rel=1e-12)


def test_per_size_lrt_matches_nlme(table: pd.DataFrame, reference: dict) -> None:
    ref = reference["per_size_lrt"]
    row = interaction_test(table, method="lrt").iloc[0]
    for key in ("lr_stat", "llf_full", "llf_reduced"):
        assert row[key] == pytest.approx(ref[key], abs=1e-4)
    assert row["df"] == row["num_df"] == ref["df"] == 6
    assert row["p_val"] == pytest.approx(stats.chi2.sf(row["lr_stat"], 6), rel=1e-9)
    assert row["method"] == "LRT (chi-square, ML)" and math.isnan(row["f_stat"])
    # The full ML fit is fit_mixed's (its dropping of zero terms does not change the likelihood).
    assert row["llf_full"] == pytest.approx(fit_mixed(table, reml=False).diagnostics.llf, abs=1e-6)


def two_tasks(table: pd.DataFrame) -> pd.DataFrame:
    """Part (c)'s table: task a is the fixture, task b its homoscedastic version plus a size-dependent effect."""
    cell_mean = table.groupby(["frozen_layers", "train_size"])["best_dev"].transform("mean")
    scale = 0.02 / table["train_size"].map(GENERATING_SD)
    effect = 0.02 * (table["frozen_layers"] != 0) * np.log10(table["train_size"] / 50)
    b = table.assign(task="b", best_dev=cell_mean + (table["best_dev"] - cell_mean) * scale + effect)
    return pd.concat([table.assign(task="a"), b], ignore_index=True)


def test_pooled_model_matches_nlme(table: pd.DataFrame, reference: dict) -> None:
    """REML variances and likelihood, and the ML likelihood-ratio test of task x freezing, as nlme fits them.

    On this table the default start of the variances stops in a second mode 4.3 log-likelihood units below
    nlme's (task b's seed-by-size spread is 20x larger at n = 1000 than at n = 50); the pooled fits start
    twice (_reml.fit_components) and keep the better one.
    """
    ref = reference["pooled"]
    two = two_tasks(table)
    assert len(two) == ref["n_obs"] and two["best_dev"].sum() == pytest.approx(ref["sum_y"], abs=1e-9)
    fit = fit_pooled(two)
    assert fit.result.loglik == pytest.approx(ref["reml_loglik"], abs=1e-6)
    components = fit.variance_components.set_index("component")["sd"]
    for name, sd in ref["random_sd"].items():
        assert components[name] == pytest.approx(sd, rel=1e-4)
    for row in ref["residual_sd"]:
        task, size = row["group"].split(".")
        assert components[f"residual:{task}@{size}"] == pytest.approx(row["sd"], rel=1e-4)
    lrt = task_interaction_test(two, method="lrt").iloc[0]
    for key in ("lr_stat", "llf_full", "llf_reduced"):
        assert lrt[key] == pytest.approx(ref[key], abs=1e-4)
    assert lrt["df"] == ref["df"] == 9


# ---------------------------------------------------------------------------------------------------------------
# interaction_test: the default F test


def test_default_is_the_f_test_of_the_per_size_fit(table: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    """One REML fit of the per-size model, nothing refitted; the same numbers as wald_f_test on fit_mixed."""
    calls = []
    real = mixed_grouped.fit_components

    def counting(*args, **kwargs):
        calls.append(kwargs.get("reml"))
        return real(*args, **kwargs)

    monkeypatch.setattr(mixed_grouped, "fit_components", counting)
    result = interaction_test(table)
    assert calls == [True]
    assert list(result.columns) == list(TEST_COLUMNS) and list(result.index) == ["frozen_layers:train_size"]
    row = result.iloc[0]
    assert row["method"] == "F (Satterthwaite)" and row["num_df"] == row["df"] == 6
    assert all(math.isnan(row[k]) for k in ("lr_stat", "llf_full", "llf_reduced"))
    fit = fit_mixed(table)
    names = [n for n in fit.design_info.column_names if ":" in n]
    direct = wald_f_test(fit, names).iloc[0]
    assert row["f_stat"] == pytest.approx(direct["f_stat"], rel=1e-12)
    assert row["den_df"] == pytest.approx(direct["den_df"], rel=1e-12)
    assert 2 < row["den_df"] < 60 and row["p_val"] == pytest.approx(stats.f.sf(row["f_stat"], 6, row["den_df"]))
    calls.clear()
    again = interaction_test(table, fit=fit)  # a fit at hand: nothing is fitted
    assert calls == [] and again.iloc[0]["f_stat"] == row["f_stat"]


def test_f_test_has_power_and_other_variance_structures(table: pd.DataFrame) -> None:
    assert interaction_test(simulate_results(rng=21))["p_val"].iloc[0] < 1e-6
    pooled = interaction_test(table, variance="pooled").iloc[0]
    per_cell = interaction_test(table, variance="per_cell").iloc[0]
    assert pooled["num_df"] == per_cell["num_df"] == 6
    assert np.isfinite([pooled["den_df"], per_cell["den_df"]]).all()
    one_size = interaction_test(table[table["train_size"] == 200]).iloc[0]
    assert one_size["num_df"] == 0 and math.isnan(one_size["p_val"])


def test_parametric_bootstrap() -> None:
    table = simulate_results(
        0.8, frozen_levels=(0, 4, 12), train_sizes=(50, 1000), resid_sd={50: 0.05, 1000: 0.01}, rng=22
    )
    seen: list[tuple[int, int]] = []
    boot = interaction_test(table, method="bootstrap", n_boot=19, rng=3, progress=lambda i, n: seen.append((i, n)))
    lrt = interaction_test(table, method="lrt")
    row = boot.iloc[0]
    assert seen == [(i, 19) for i in range(1, 20)]
    assert row["lr_stat"] == pytest.approx(lrt.iloc[0]["lr_stat"], abs=1e-8)
    assert row["p_val"] in {k / 20 for k in range(1, 21)}
    assert row["method"] == "parametric bootstrap LRT (ML, 19 draws)"
    prepared = _prepare(table, "best_dev", task=None, include_failed=True, caller="test")
    draws = bootstrap_lrt(
        grouped_model(prepared, "best_dev"),
        grouped_model(prepared, "best_dev", "frozen_layers + train_size"),
        n_boot=19,
        rng=3,
    )
    # The same seed, the same draws: p = (1 + #{LR* >= LR}) / (n_boot + 1).
    assert draws["p_val"] == (1 + np.sum(draws["lr_star"] >= draws["lr_stat"])) / 20 == row["p_val"]
    with pytest.raises(ModelFitError, match="method"):
        interaction_test(table, method="wald")
    with pytest.raises(ModelFitError, match="bootstrap"):
        interaction_test(table, method="bootstrap", variance="pooled")


def test_lrt_uses_one_variance_structure_for_both_models(table: pd.DataFrame) -> None:
    """The additive model has the full model's random terms and residual groups, only the fixed part differs."""
    prepared = _prepare(table, "best_dev", task=None, include_failed=True, caller="test")
    full = grouped_model(prepared, "best_dev")
    additive = grouped_model(prepared, "best_dev", "frozen_layers + train_size")
    assert [c.name for c in full.components] == [c.name for c in additive.components]
    assert [c.name for c in full.components] == [
        "seed",
        "seed:train_size",
        "residual:50",
        "residual:200",
        "residual:1000",
    ]
    assert full.x.shape[1] - additive.x.shape[1] == 6


# ---------------------------------------------------------------------------------------------------------------
# wald_f_test and the df rule


def test_f_test_ddf_rule() -> None:
    assert f_test_ddf([7.5]) == 7.5
    assert f_test_ddf([10.0, 10.0, 10.0]) == pytest.approx(10.0)
    assert f_test_ddf([1.5, 30.0]) == 2.0  # lmerTest: any nu <= 2 gives 2
    nu = np.array([5.0, 12.0, 40.0])
    e = np.sum(nu / (nu - 2))
    assert f_test_ddf(nu) == pytest.approx(2 * e / (e - 3))
    assert min(nu) < f_test_ddf(nu) < max(nu)
    assert f_test_ddf([np.inf, np.inf]) == np.inf
    assert f_test_ddf([np.inf, 10.0]) == pytest.approx(2 * (1 + 10 / 8) / (1 + 10 / 8 - 2))
    assert math.isnan(f_test_ddf([]))


def test_wald_f_test_inputs(table: pd.DataFrame) -> None:
    fit = fit_mixed(table)
    names = list(fit.design_info.column_names)
    by_name = wald_f_test(fit, ["frozen_layers[T.2]"]).iloc[0]
    con = contrasts_vs_reference(fit, adjust="none").set_index(["frozen_layers", "train_size"]).loc[(2, 50)]
    assert by_name["f_stat"] == pytest.approx((con["estimate"] / con["se"]) ** 2, rel=1e-9)
    assert by_name["den_df"] == pytest.approx(con["df"], rel=1e-9)
    shifted = wald_f_test(fit, ["frozen_layers[T.2]"], rhs=float(con["estimate"])).iloc[0]
    assert shifted["f_stat"] == pytest.approx(0.0, abs=1e-20)
    empty = wald_f_test(fit, np.zeros((0, len(names)))).iloc[0]
    assert empty["num_df"] == 0 and math.isnan(empty["p_val"])
    with pytest.raises(ModelFitError, match="no coefficient"):
        wald_f_test(fit, ["frozen_layers[T.99]"])
    with pytest.raises(ModelFitError, match="columns"):
        wald_f_test(fit, np.ones((1, 3)))
    with pytest.raises(ModelFitError, match="needs a fit"):
        wald_f_test(object(), np.ones((1, 3)))


# ---------------------------------------------------------------------------------------------------------------
# Size under the null


ADDITIVE_BASE = {50: 0.705, 100: 0.866, 200: 0.875, 500: 0.897, 1000: 0.905}  # the blog's full fine-tuning means
ADDITIVE_OFFSET = {-1: -0.01, 0: 0.0, 2: 0.0, 4: 0.005, 8: -0.01, 10: -0.05, 12: -0.15}
ADDITIVE_TRUTH = {(k, n): ADDITIVE_BASE[n] + ADDITIVE_OFFSET[k] for k in ADDITIVE_OFFSET for n in ADDITIVE_BASE}


def null_table(i: int) -> pd.DataFrame:
    """A blog-shaped SST-2 table with no interaction: 7 frozen levels x 5 sizes (24 interaction df), 5 seeds."""
    return simulate_results(
        ADDITIVE_TRUTH, seed_sd=0.01, seed_size_sd=0.005, resid_sd=blog_run_sds("sst2"), rng=10_000 + i
    )


def test_f_test_holds_its_level_under_the_null() -> None:
    """Rejections at 5% of the default F test on 50 null tables: at most 6 (the 5% level + 2.3 MC SEs of 3.1%).

    Bench, not timed here (``null_table(i)`` for i = 0..999: per-size run SDs 0.071 / 0.024 / 0.0094 / 0.0042 /
    0.0044, seed SD 0.01, seed-by-size SD 0.005, 5 seeds; 24 interaction df; ``interaction_test(table)`` and
    ``interaction_test(table, method="lrt")``; MC SE = binomial SE over the 1000 tables)::

        test                          reject at 5%       reject at 1%
        F (Satterthwaite), default    2.3% (SE 0.5%)     0.1% (SE 0.1%)
        LRT (chi-square, ML)          14.1% (SE 1.1%)    4.1% (SE 0.6%)

    The chi-square LRT rejects a true null almost 3 times as often as it should. The F test errs the other way:
    its denominator df (median 32, 5-95% 30-34) match the statistic's mean (1.067 over the 1000 tables, the
    mean of F(24, 32)) but its variance is 0.11 against F(24, 32)'s 0.18, so the reference is too wide and the
    test conservative (lmerTest's rule matches the mean only; Kenward-Roger would also match the variance).
    On the first 100 tables: F 2 rejections, LRT 17; on the first 50 (this test): F 1.
    """
    rejections = sum(interaction_test(null_table(i))["p_val"].iloc[0] < 0.05 for i in range(50))
    assert rejections <= 6

"""freezestats.stats.models and .simulate: mixed model, OLS, interaction LRT, simulated tables (GLMM: test_stats_glmm).

Reference values come from lme4 / lmerTest / emmeans (tests/data/lme4_reference.R on tests/data/stats_fixture.csv,
stored in tests/data/lme4_reference.json) and from independent computations written out in the tests.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from scipy import stats
from statsmodels.regression.mixed_linear_model import MixedLM

from freezestats.exceptions import ModelFitError
from freezestats.results.export import RESULT_COLUMNS
from freezestats.stats import (
    estimated_marginal_means,
    fit_mixed,
    fit_ols,
    interaction_test,
    simulate_results,
    true_cell_means,
)
from freezestats.stats import models as models_module

DATA = Path(__file__).resolve().parent / "data"
R_PACKAGES = ("lme4", "lmerTest", "emmeans", "jsonlite")


@pytest.fixture(scope="module")
def fixture_table() -> pd.DataFrame:
    return pd.read_csv(DATA / "stats_fixture.csv")


@pytest.fixture(scope="module")
def lme4() -> dict:
    return json.loads((DATA / "lme4_reference.json").read_text())


@pytest.fixture(scope="module")
def fixture_fit(fixture_table: pd.DataFrame) -> models_module.MixedFit:
    return fit_mixed(fixture_table, variance="pooled")


# ---------------------------------------------------------------------------------------------------------------
# simulate


def test_simulated_table_has_the_runner_columns_and_a_balanced_grid() -> None:
    table = simulate_results(rng=1)
    assert list(table.columns) == RESULT_COLUMNS
    assert len(table) == 7 * 5 * 5
    assert (table.groupby(["frozen_layers", "train_size"]).size() == 5).all()
    assert set(table["role"]) == {"grid"} and set(table["state"]) == {"complete"}
    assert set(table["metric"]) == {"accuracy"} and set(table["study"]) == {"simulated"}
    assert (table["n_correct"] == np.rint(table["final_dev"] * table["n_eval"])).all()
    np.testing.assert_allclose(table["final_dev"], table["n_correct"] / 872)
    pd.testing.assert_frame_equal(table, simulate_results(rng=1))
    assert not table.equals(simulate_results(rng=2))


def test_default_truth_is_the_blog_reference_means() -> None:
    blog = pd.read_csv(Path(__file__).resolve().parents[1] / "data/reference/blog2020_roberta_base.csv")
    truth = true_cell_means(tasks=("sst2", "cola"))
    merged = truth.merge(blog, on=["task", "frozen_layers", "train_size"])
    assert len(merged) == 70
    np.testing.assert_array_equal(merged["true_mean"], merged["mean"])


def test_failed_runs_score_the_majority_baseline() -> None:
    table = simulate_results(rng=3, fail_rate=0.2)
    failed = table[table["failed"]]
    assert 10 < len(failed) < 60
    for column in ("best_dev", "final_dev", "heldout", "majority_baseline"):
        np.testing.assert_allclose(failed[column], 444 / 872)
    assert (failed["fail_reason"] == "simulated collapse").all()


def test_truth_must_cover_the_grid() -> None:
    with pytest.raises(ValueError, match=r"needs a true mean, but 5 have none"):
        true_cell_means(frozen_levels=(0, 6))
    with pytest.raises(ValueError, match=r"must lie in \[0, 1\]"):
        true_cell_means({(0, 50): 1.5}, frozen_levels=(0,), train_sizes=(50,))


# ---------------------------------------------------------------------------------------------------------------
# fit_mixed against lme4


def test_mixed_fixed_effects_match_lme4(fixture_fit: models_module.MixedFit, lme4: dict) -> None:
    reference = pd.DataFrame(lme4["fixed_effects"]).set_index("term")
    ours = fixture_fit.fixed_effects.set_index("term")
    assert sorted(ours.index) == sorted(reference.index)
    ours = ours.loc[reference.index]
    np.testing.assert_allclose(ours["estimate"], reference["estimate"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(ours["se"], reference["se"], rtol=0, atol=1e-6)


def test_mixed_variance_components_match_lme4(fixture_fit: models_module.MixedFit, lme4: dict) -> None:
    reference = pd.DataFrame(lme4["variance_components"]).set_index("component")
    ours = fixture_fit.variance_components.set_index("component")
    assert list(ours.index) == ["seed", "residual"]
    ours = ours.loc[reference.index]
    np.testing.assert_allclose(ours["variance"], reference["variance"], rtol=1e-4)
    np.testing.assert_allclose(ours["sd"], reference["sd"], rtol=1e-4)
    assert fixture_fit.diagnostics.llf == pytest.approx(lme4["reml_loglik"], abs=1e-6)
    seed, residual = ours["variance"]
    assert fixture_fit.icc_seed == pytest.approx(seed / (seed + residual))


def test_mixed_fit_reports_its_diagnostics(fixture_fit: models_module.MixedFit) -> None:
    d = fixture_fit.diagnostics
    assert d.converged and not d.boundary and not d.singular
    assert (d.method, d.n_obs, d.n_seeds, d.n_subset_draws, d.optimizer) == ("REML", 175, 5, 1, "bfgs")
    assert np.isnan(d.aic) and np.isnan(d.bic)  # REML likelihoods are not comparable across fixed effects
    # statsmodels' absolute "boundary" heuristic (a variance < 0.01) fires on every accuracy-scale fit: kept
    # verbatim in library_warnings, but not reported as a problem.
    assert any("boundary" in w for w in d.library_warnings)
    assert d.warnings == ()
    assert fixture_fit.formula == "best_dev ~ C(frozen_layers) * C(train_size) + (1 | seed)"
    assert list(fixture_fit.fixed_effects.columns) == ["term", "estimate", "se", "ci_low", "ci_high", "z", "p_val"]
    assert fixture_fit.fixed_effects["term"].iloc[:2].tolist() == ["Intercept", "frozen_layers[T.-1]"]


def test_rerunning_the_r_script_reproduces_the_committed_reference(tmp_path: Path, lme4: dict) -> None:
    rscript = shutil.which("Rscript")
    if rscript is None:
        pytest.skip("R not installed: Rscript is not on PATH (apt-get install r-base-core r-cran-lme4 ...)")
    packages = ", ".join(f'"{p}"' for p in R_PACKAGES)
    check = f"quit(status = !all(sapply(c({packages}), requireNamespace, quietly = TRUE)))"
    if subprocess.run([rscript, "-e", check], capture_output=True).returncode != 0:
        pytest.skip(f"R packages missing: need {', '.join(R_PACKAGES)} (apt-get install r-cran-lme4 ...)")
    out = tmp_path / "fresh.json"
    subprocess.run(
        [rscript, str(DATA / "lme4_reference.R"), str(DATA / "stats_fixture.csv"), str(out)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    fresh = json.loads(out.read_text())
    fresh["meta"]["fixture"] = lme4["meta"]["fixture"]
    _assert_same_json(fresh, lme4, path="lme4_reference.json")


def _assert_same_json(a: object, b: object, path: str) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), path
        for key in a:
            _assert_same_json(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same_json(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-7, abs=1e-12), path
    else:
        assert a == b, path


# ---------------------------------------------------------------------------------------------------------------
# fit_mixed: recovery, crossed effects, diagnostics


def test_mixed_fit_recovers_the_variance_components() -> None:
    # 40 seeds so the seed variance is estimated with ~40 df (5 seeds would give a +-70% standard error).
    table = simulate_results(
        frozen_levels=(0, 12), train_sizes=(100, 1000), seeds=40, seed_sd=0.02, resid_sd=0.03, rng=11
    )
    vc = fit_mixed(table, variance="pooled").variance_components.set_index("component")["sd"]
    assert vc["seed"] == pytest.approx(0.02, rel=0.25)
    assert vc["residual"] == pytest.approx(0.03, rel=0.1)


@pytest.mark.filterwarnings("ignore:The MLE may be on the boundary")  # statsmodels' own fits, as reference
def test_crossed_subset_draw_matches_statsmodels_vc_formula() -> None:
    table = simulate_results(
        frozen_levels=(0, 12), train_sizes=(100, 1000), seeds=8, subset_draws=8, subset_sd=0.02, rng=12
    )
    fit = fit_mixed(table, variance="pooled")
    assert fit.formula.endswith("+ (1 | seed) + (1 | subset_draw)")
    vc = fit.variance_components.set_index("component")["sd"]
    assert list(vc.index) == ["seed", "subset_draw", "residual"]
    assert vc["residual"] == pytest.approx(0.03, rel=0.15)
    # Independent construction: statsmodels' own formula interface for crossed effects (one group, vc_formula).
    reference = smf.mixedlm(
        "best_dev ~ C(frozen_layers) * C(train_size)",
        table.assign(one=1),
        groups="one",
        re_formula="0",
        vc_formula={"seed": "0 + C(seed)", "subset_draw": "0 + C(subset_draw)"},
    ).fit(reml=True)
    np.testing.assert_allclose(vc[["seed", "subset_draw"]] ** 2, reference.vcomp, rtol=1e-3)
    assert vc["residual"] ** 2 == pytest.approx(reference.scale, rel=1e-3)
    emm = estimated_marginal_means(fit)  # Satterthwaite df with two variance components besides the residual
    assert np.isfinite(emm["df"]).all() and (emm["df"] > 1).all() and (emm["df"] < len(table)).all()
    # Different coding (reference level -1 there), same cell means.
    ours = fit.result.model.exog @ fit.params
    theirs = reference.model.exog @ reference.fe_params.to_numpy()
    np.testing.assert_allclose(ours, theirs, atol=1e-6)


def test_boundary_fit_is_flagged_with_an_explicit_warning() -> None:
    table = simulate_results(frozen_levels=(0, 12), train_sizes=(100, 1000), seed_sd=0.0, rng=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing may escape to the caller
        fit = fit_mixed(table, variance="pooled")
    assert fit.diagnostics.boundary
    (message,) = [w for w in fit.diagnostics.warnings if "boundary" in w]
    assert "seed variance is estimated at" in message and "lme4's tolerance" in message
    assert fit.icc_seed < 1e-8


def test_optimizer_failures_are_recorded_and_the_next_optimizer_is_tried(
    monkeypatch: pytest.MonkeyPatch, fixture_table: pd.DataFrame
) -> None:
    original = MixedLM.fit

    def flaky(self: MixedLM, *args: object, method: list[str], **kwargs: object) -> object:
        if method == ["lbfgs"]:
            raise np.linalg.LinAlgError("Singular matrix")
        result = original(self, *args, method=method, **kwargs)
        if method == ["bfgs"]:
            result.converged = False
        return result

    monkeypatch.setattr(MixedLM, "fit", flaky)
    fit = fit_mixed(fixture_table, variance="pooled")
    assert fit.diagnostics.optimizer == "cg" and fit.diagnostics.converged
    assert fit.diagnostics.warnings[:2] == (
        "optimizer 'bfgs' did not converge; tried the next one.",
        "optimizer 'lbfgs' stopped with LinAlgError: Singular matrix; tried the next one.",
    )


def test_satterthwaite_df_of_a_cell_mean_matches_the_anova_formula(
    fixture_table: pd.DataFrame, fixture_fit: models_module.MixedFit
) -> None:
    # Balanced two-way layout (C cells x S seeds, one run each): Var(cell mean) is estimated by
    # (MS_seed + (C - 1) MS_res) / (C S), whose Satterthwaite df is the classical two-mean-square formula, and the
    # REML seed variance is the ANOVA estimate (MS_seed - MS_res) / C.
    frame = fixture_table.assign(cell=fixture_table["frozen_layers"] * 10_000 + fixture_table["train_size"])
    frame = frame.rename(columns={"best_dev": "y"})
    n_cells, n_seeds = frame["cell"].nunique(), frame["seed"].nunique()
    grand = frame["y"].mean()
    resid = frame["y"] - frame.groupby("cell")["y"].transform("mean") - frame.groupby("seed")["y"].transform("mean")
    ms_res = ((resid + grand) ** 2).sum() / ((n_cells - 1) * (n_seeds - 1))
    ms_seed = n_cells * ((frame.groupby("seed")["y"].mean() - grand) ** 2).sum() / (n_seeds - 1)
    a, b = 1 / (n_cells * n_seeds), (n_cells - 1) / (n_cells * n_seeds)
    df_expected = (a * ms_seed + b * ms_res) ** 2 / (
        (a * ms_seed) ** 2 / (n_seeds - 1) + (b * ms_res) ** 2 / ((n_cells - 1) * (n_seeds - 1))
    )
    intercept_row = np.eye(35)[0]  # the reference cell's mean
    assert fixture_fit.contrast_df(intercept_row)[0] == pytest.approx(df_expected, rel=1e-5)
    assert fixture_fit.result.cov_re.iloc[0, 0] == pytest.approx((ms_seed - ms_res) / n_cells, rel=1e-5)


# ---------------------------------------------------------------------------------------------------------------
# fit_ols


def test_ols_equals_mixed_fixed_effects_in_a_balanced_design(
    fixture_table: pd.DataFrame, fixture_fit: models_module.MixedFit
) -> None:
    ols = fit_ols(fixture_table)
    # Balanced + saturated in the cells: GLS with a seed intercept and OLS both return the raw cell means.
    np.testing.assert_allclose(ols.params, fixture_fit.params, rtol=0, atol=1e-12)
    unbalanced = fixture_table.drop(index=[0, 7, 40, 41, 99])
    assert np.abs(fit_ols(unbalanced).params - fit_mixed(unbalanced).params).max() > 1e-4


def test_ols_cluster_robust_errors_are_cr1_with_g_minus_1_df(fixture_table: pd.DataFrame) -> None:
    ols = fit_ols(fixture_table)
    x = np.asarray(ols.result.model.exog)
    e = np.asarray(ols.result.resid)
    seeds = fixture_table["seed"].to_numpy()
    bread = np.linalg.inv(x.T @ x)
    meat = sum(np.outer(x[seeds == g].T @ e[seeds == g], x[seeds == g].T @ e[seeds == g]) for g in np.unique(seeds))
    n, p, g = x.shape[0], x.shape[1], 5
    cr1 = g / (g - 1) * (n - 1) / (n - p) * bread @ meat @ bread
    np.testing.assert_allclose(ols.cov_params, cr1, rtol=1e-10, atol=1e-16)
    assert (ols.fixed_effects["df"] == 4).all()
    np.testing.assert_allclose(ols.contrast_df(np.eye(35)), 4.0)
    assert ols.cov_type == "cluster" and ols.diagnostics.method == "OLS"
    assert any("only 5 clusters" in w for w in ols.diagnostics.warnings)


def test_ols_nonrobust_accepts_a_single_seed(fixture_table: pd.DataFrame) -> None:
    one_seed = fixture_table[fixture_table["seed"] == 1].copy()
    one_seed = pd.concat([one_seed, one_seed.assign(best_dev=one_seed["best_dev"] + 0.01, trial=-1)])
    ols = fit_ols(one_seed, cov_type="nonrobust")
    assert ols.result.df_resid == 35 and ols.diagnostics.n_seeds == 1


# ---------------------------------------------------------------------------------------------------------------
# interaction_test


@pytest.mark.filterwarnings("ignore:The MLE may be on the boundary")  # statsmodels' own fits, as reference
def test_interaction_lrt_equals_two_manual_ml_fits(fixture_table: pd.DataFrame, lme4: dict) -> None:
    lrt = interaction_test(fixture_table, method="lrt", variance="pooled")
    assert list(lrt.columns) == [
        "test",
        "f_stat",
        "num_df",
        "den_df",
        "p_val",
        "method",
        "lr_stat",
        "df",
        "llf_full",
        "llf_reduced",
    ]
    frame = fixture_table.assign(frozen=fixture_table["frozen_layers"].astype(str), size=fixture_table["train_size"])
    full = smf.mixedlm("best_dev ~ C(frozen) * C(size)", frame, groups="seed").fit(reml=False)
    reduced = smf.mixedlm("best_dev ~ C(frozen) + C(size)", frame, groups="seed").fit(reml=False)
    row = lrt.iloc[0]
    assert row["llf_full"] == pytest.approx(full.llf, abs=1e-6)
    assert row["llf_reduced"] == pytest.approx(reduced.llf, abs=1e-6)
    assert row["lr_stat"] == pytest.approx(2 * (full.llf - reduced.llf), abs=1e-5)
    assert row["df"] == 6 * 4
    assert row["p_val"] == pytest.approx(stats.chi2.sf(row["lr_stat"], 24), rel=1e-6)
    reference = lme4["interaction_lrt"]  # lme4 anova(reduced, full), both REML = FALSE
    for key in ("lr_stat", "llf_full", "llf_reduced"):
        assert row[key] == pytest.approx(reference[key], abs=1e-5)
    assert row["df"] == reference["df"]


def test_interaction_lrt_has_power_against_the_blog_interaction_and_not_under_the_null() -> None:
    assert interaction_test(simulate_results(rng=21))["p_val"].iloc[0] < 1e-6
    null = simulate_results(0.8, frozen_levels=(0, 4, 12), train_sizes=(100, 1000), rng=22)
    assert interaction_test(null)["p_val"].iloc[0] > 0.05


# ---------------------------------------------------------------------------------------------------------------
# bad input


def _table() -> pd.DataFrame:
    return simulate_results(frozen_levels=(0, 12), train_sizes=(100, 1000), seeds=3, rng=8)


BAD_INPUTS = [
    pytest.param(
        lambda t: t.iloc[0:0],
        {},
        r"needs at least one run, but the results table is empty",
        id="empty",
    ),
    pytest.param(
        lambda t: t.drop(columns=["seed"]),
        {},
        r"must have the columns .* \['seed'\] are missing",
        id="missing columns",
    ),
    pytest.param(
        lambda t: t,
        {"response": "accuracy"},
        r"`response` must be one of \['best_dev', 'final_dev', 'heldout'\], but got response='accuracy'",
        id="unknown response",
    ),
    pytest.param(
        lambda t: t,
        {"task": "cola"},
        r"`task` must be one of the tasks in the results table \['sst2'\], but got task='cola'",
        id="unknown task",
    ),
    pytest.param(
        lambda t: pd.concat([t, t.assign(task="cola")]),
        {},
        r"several tasks \['cola', 'sst2'\].*pass task=",
        id="several tasks",
    ),
    pytest.param(
        lambda t: pd.concat([t, t.assign(model="other")]),
        {},
        r"several models \['other', 'simulated'\]",
        id="several models",
    ),
    pytest.param(
        lambda t: t[t["seed"] == 1],
        {},
        r"needs at least 2 seeds, but task 'sst2' has 1 .* fit_ols\(\.\.\., cov_type='nonrobust'\)",
        id="single seed",
    ),
    pytest.param(
        lambda t: t[~((t["frozen_layers"] == 12) & (t["train_size"] == 100))],
        {},
        r"1 cells of task 'sst2' have none: \(frozen_layers=12, train_size=100\)",
        id="empty cell",
    ),
    pytest.param(
        lambda t: t.assign(failed=True),
        {"include_failed": False},
        r"include_failed=False leaves no runs: all 12 runs",
        id="all failed",
    ),
    pytest.param(
        lambda t: t.assign(best_dev=0.5),
        {},
        r"best_dev is constant \(0\.5\) across all 12 runs",
        id="constant",
    ),
    pytest.param(
        lambda t: t.assign(role="search"),
        {},
        r"role='grid' and state='complete', but none of the 12 runs",
        id="search only",
    ),
    pytest.param(
        lambda t: t.assign(heldout=np.nan),
        {"response": "heldout"},
        r"every run of task 'sst2' has a missing heldout",
        id="all missing",
    ),
]


@pytest.mark.parametrize(("edit", "kwargs", "message"), BAD_INPUTS)
def test_bad_input_raises_a_model_fit_error_that_says_what_to_do(edit: object, kwargs: dict, message: str) -> None:
    data = edit(_table())  # type: ignore[operator]
    with pytest.raises(ModelFitError, match=message):
        fit_mixed(data, **kwargs)


def test_failed_runs_that_empty_a_cell_leave_out_its_level_or_its_size() -> None:
    table = _table()
    table.loc[(table["frozen_layers"] == 12) & (table["train_size"] == 100), "failed"] = True
    fit = fit_mixed(table, include_failed=False)
    assert 12 not in fit.frozen_levels and set(fit.train_sizes) == set(table["train_size"])
    assert any("left out frozen level(s) [12]" in w for w in fit.diagnostics.warnings)
    reference = table.assign(failed=(table["frozen_layers"] == 0) & (table["train_size"] == 100))
    fit = fit_mixed(reference, include_failed=False)
    assert 100 not in fit.train_sizes and set(fit.frozen_levels) == set(table["frozen_layers"])
    assert any("left out train size(s) [100]" in w for w in fit.diagnostics.warnings)
    fit = fit_mixed(table.assign(failed=table.index == 0), include_failed=False)
    assert fit.diagnostics.n_excluded == 1 and fit.diagnostics.n_obs == 11
    assert any("excluded 1 failed runs" in w for w in fit.diagnostics.warnings)


def test_missing_responses_are_dropped_and_counted() -> None:
    table = _table()
    table.loc[[0, 5], "heldout"] = np.nan
    fit = fit_mixed(table, "heldout", variance="pooled")
    assert fit.diagnostics.n_obs == 10 and fit.diagnostics.n_excluded == 2
    assert "dropped 2 runs with a missing heldout (listwise deletion)." in fit.diagnostics.warnings
    assert any(w.startswith("only 3 seeds: the seed variance rests on 2 degree(s)") for w in fit.diagnostics.warnings)


def test_other_entry_points_validate_too() -> None:
    with pytest.raises(ModelFitError, match=r"`cov_type` must be 'cluster' or 'nonrobust'"):
        fit_ols(_table(), cov_type="hc3")  # type: ignore[arg-type]
    with pytest.raises(ModelFitError, match=r"needs at least 2 seeds"):
        fit_ols(_table().query("seed == 1"))
    with pytest.raises(ModelFitError, match=r"needs the results table as a pandas DataFrame"):
        interaction_test([1, 2, 3])  # type: ignore[arg-type]

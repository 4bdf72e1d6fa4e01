"""freezestats.stats.inference.emm: marginal means, contrasts against a reference depth, equivalence tests.

Reference values: emmeans / lmerTest in R (tests/data/lme4_reference.json, from tests/data/lme4_reference.R),
statsmodels' multipletests / ttost_ind / ttost_paired, scipy.stats.dunnett, and a direct GLS computation.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import ttost_ind, ttost_paired

from freezestats.exceptions import ModelFitError
from freezestats.stats import (
    contrasts_vs_reference,
    equivalence_tests,
    estimated_marginal_means,
    fit_mixed,
    fit_ols,
    simulate_results,
    true_cell_means,
)
from freezestats.stats.models import MixedFit

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module")
def fixture_table() -> pd.DataFrame:
    return pd.read_csv(DATA / "stats_fixture.csv")


@pytest.fixture(scope="module")
def lme4() -> dict:
    return json.loads((DATA / "lme4_reference.json").read_text())


@pytest.fixture(scope="module")
def fit(fixture_table: pd.DataFrame) -> MixedFit:
    return fit_mixed(fixture_table, variance="pooled")


def _by_cell(frame: pd.DataFrame, reference: list[dict], keys: list[str]) -> pd.DataFrame:
    return frame.merge(pd.DataFrame(reference), on=keys, suffixes=("", "_r"), validate="one_to_one")


# ---------------------------------------------------------------------------------------------------------------
# estimated_marginal_means


def test_emms_match_emmeans(fit: MixedFit, lme4: dict) -> None:
    emm = estimated_marginal_means(fit)
    assert list(emm.columns) == ["frozen_layers", "train_size", "emmean", "se", "df", "ci_low", "ci_high"]
    assert emm[["train_size", "frozen_layers"]].apply(tuple, axis=1).is_monotonic_increasing
    merged = _by_cell(emm, lme4["emmeans"], ["frozen_layers", "train_size"])
    assert len(merged) == 35
    np.testing.assert_allclose(merged["emmean"], merged["emmean_r"], rtol=0, atol=1e-8)
    np.testing.assert_allclose(merged["se"], merged["se_r"], rtol=0, atol=1e-8)
    np.testing.assert_allclose(merged["df"], merged["df_r"], rtol=1e-5)  # Satterthwaite (lmerTest)
    np.testing.assert_allclose(merged[["ci_low", "ci_high"]], merged[["ci_low_r", "ci_high_r"]], atol=1e-7)
    # Balanced design: Kenward-Roger leaves the covariance unchanged, and its df equal Satterthwaite's.
    np.testing.assert_allclose(merged["se"], merged["se_kr"], atol=1e-8)
    np.testing.assert_allclose(merged["df"], merged["df_kr"], rtol=1e-4)


def test_emms_are_gls_cell_means_not_raw_means(fixture_table: pd.DataFrame) -> None:
    # Drop runs so the design is unbalanced: the model-based means then differ from the raw cell means.
    table = fixture_table.drop(index=[0, 1, 2, 50, 51, 120]).reset_index(drop=True)
    fit = fit_mixed(table, variance="pooled")
    emm = estimated_marginal_means(fit)
    # Independent computation: GLS in the cell-means coding (one indicator per cell) with V from the fit.
    vc = fit.variance_components.set_index("component")["variance"]
    cells = pd.MultiIndex.from_frame(table[["frozen_layers", "train_size"]])
    x = pd.get_dummies(cells.to_flat_index().astype(str)).to_numpy(float)
    names = sorted(set(cells.to_flat_index().astype(str)))
    z = pd.get_dummies(table["seed"]).to_numpy(float)
    v = vc["seed"] * z @ z.T + vc["residual"] * np.eye(len(table))
    vinv_x = np.linalg.solve(v, x)
    cov = np.linalg.inv(x.T @ vinv_x)
    beta = cov @ vinv_x.T @ table["best_dev"].to_numpy()
    gls = pd.DataFrame({"cell": names, "gls": beta, "gls_se": np.sqrt(np.diag(cov))})
    emm["cell"] = [str((k, n)) for k, n in zip(emm["frozen_layers"], emm["train_size"], strict=True)]
    merged = emm.merge(gls, on="cell", validate="one_to_one")
    np.testing.assert_allclose(merged["emmean"], merged["gls"], atol=1e-10)
    np.testing.assert_allclose(merged["se"], merged["gls_se"], atol=1e-10)
    raw = table.groupby(["frozen_layers", "train_size"])["best_dev"].mean().rename("raw").reset_index()
    unbalanced_cells = emm.merge(raw).query("frozen_layers == -1 and train_size == 50")
    assert abs(unbalanced_cells["emmean"] - unbalanced_cells["raw"]).iloc[0] > 1e-4


def test_balanced_emms_equal_the_raw_cell_means(fit: MixedFit, fixture_table: pd.DataFrame) -> None:
    raw = fixture_table.groupby(["frozen_layers", "train_size"])["best_dev"].mean().rename("raw").reset_index()
    merged = estimated_marginal_means(fit).merge(raw)
    np.testing.assert_allclose(merged["emmean"], merged["raw"], atol=1e-12)


def test_emm_intervals_cover_the_true_cell_means() -> None:
    truth = true_cell_means().rename(columns={"true_mean": "truth"})
    # One fixed data set, as in the study: at least 90% of the 35 nominal-95% intervals cover the truth.
    emm = estimated_marginal_means(fit_mixed(simulate_results(rng=101))).merge(truth)
    covered = (emm["ci_low"] <= emm["truth"]) & (emm["truth"] <= emm["ci_high"])
    assert covered.mean() >= 0.9
    # Calibration over 16 data sets (560 intervals, correlated within a data set through the seed means):
    # Satterthwaite-t intervals should be close to 95%; normal (z) intervals with 5 seeds would under-cover.
    hits, hits_z = [], []
    for rng in range(200, 216):
        emm = estimated_marginal_means(fit_mixed(simulate_results(rng=rng))).merge(truth)
        hits.append(((emm["ci_low"] <= emm["truth"]) & (emm["truth"] <= emm["ci_high"])).mean())
        half = stats.norm.ppf(0.975) * emm["se"]
        hits_z.append(((emm["emmean"] - half <= emm["truth"]) & (emm["truth"] <= emm["emmean"] + half)).mean())
    assert 0.9 <= np.mean(hits) <= 0.99
    assert np.mean(hits_z) <= np.mean(hits)


def test_ols_fit_gives_the_same_emms_with_cluster_robust_errors(fixture_table: pd.DataFrame, fit: MixedFit) -> None:
    ols = estimated_marginal_means(fit_ols(fixture_table))
    np.testing.assert_allclose(ols["emmean"], estimated_marginal_means(fit)["emmean"], atol=1e-12)
    assert (ols["df"] == 4).all()


# ---------------------------------------------------------------------------------------------------------------
# contrasts_vs_reference


def test_contrasts_match_emmeans_trt_vs_ctrl(fit: MixedFit, lme4: dict) -> None:
    holm = contrasts_vs_reference(fit)
    assert list(holm.columns) == [
        "train_size",
        "frozen_layers",
        "reference",
        "estimate",
        "se",
        "df",
        "ci_low",
        "ci_high",
        "ci_low_adj",
        "ci_high_adj",
        "t",
        "p_val",
        "p_adj",
        "adjust",
    ]
    assert len(holm) == 30 and set(holm["reference"]) == {0} and set(holm["adjust"]) == {"holm"}
    merged = _by_cell(holm, lme4["contrasts"], ["train_size", "frozen_layers"])
    assert len(merged) == 30
    for column, tol in (("estimate", 1e-10), ("se", 1e-8), ("t", 1e-5), ("p_val", 1e-8), ("p_adj", 1e-8)):
        other = "p_holm" if column == "p_adj" else f"{column}_r"
        np.testing.assert_allclose(merged[column], merged[other], rtol=0, atol=tol, err_msg=column)
    np.testing.assert_allclose(merged["df"], merged["df_r"], rtol=1e-5)


def test_holm_is_multipletests_within_each_train_size(fit: MixedFit) -> None:
    table = contrasts_vs_reference(fit, adjust="holm")
    for _, group in table.groupby("train_size"):
        np.testing.assert_allclose(group["p_adj"], multipletests(group["p_val"], method="holm")[1], rtol=1e-14)
    none = contrasts_vs_reference(fit, adjust="none")
    np.testing.assert_array_equal(none["p_adj"], none["p_val"])
    np.testing.assert_array_equal(none[["ci_low", "ci_high"]], table[["ci_low", "ci_high"]])


def test_adjusted_intervals_are_the_duals_of_the_adjusted_p_values(fit: MixedFit) -> None:
    bonferroni = contrasts_vs_reference(fit, adjust="bonferroni")
    holm = contrasts_vs_reference(fit, adjust="holm")
    np.testing.assert_array_equal(holm[["ci_low_adj", "ci_high_adj"]], bonferroni[["ci_low_adj", "ci_high_adj"]])
    # A Bonferroni interval excludes 0 exactly when the Bonferroni-adjusted p value is below 0.05 ...
    excludes_zero = (bonferroni["ci_low_adj"] > 0) | (bonferroni["ci_high_adj"] < 0)
    assert (excludes_zero == (bonferroni["p_adj"] < 0.05)).all()
    assert excludes_zero.any() and not excludes_zero.all()  # the fixture has both kinds
    # ... and is wider than the per-comparison interval.
    assert (
        (bonferroni["ci_high_adj"] - bonferroni["ci_low_adj"]) > (bonferroni["ci_high"] - bonferroni["ci_low"])
    ).all()
    none = contrasts_vs_reference(fit, adjust="none")
    np.testing.assert_array_equal(
        none[["ci_low_adj", "ci_high_adj"]].to_numpy(), none[["ci_low", "ci_high"]].to_numpy()
    )


def test_dunnett_matches_emmeans_mvt(fit: MixedFit, lme4: dict) -> None:
    dunnett = contrasts_vs_reference(fit, adjust="dunnett")
    merged = _by_cell(dunnett, lme4["contrasts"], ["train_size", "frozen_layers"])
    # Both integrate the multivariate t by randomised quadrature; emmeans/mvtnorm's default tolerance is 1e-3.
    np.testing.assert_allclose(merged["p_adj"], merged["p_dunnett"], atol=1e-3)
    np.testing.assert_allclose(merged["ci_low"], merged["ci_low_dunnett"], atol=1e-4)
    np.testing.assert_allclose(merged["ci_high"], merged["ci_high_dunnett"], atol=1e-4)
    np.testing.assert_array_equal(
        dunnett[["ci_low_adj", "ci_high_adj"]].to_numpy(), dunnett[["ci_low", "ci_high"]].to_numpy()
    )
    assert (merged["p_adj"] >= merged["p_val"]).all()


def test_dunnett_matches_scipy_for_independent_groups() -> None:
    # With classical OLS on one train size, the contrasts are those of independent groups with a pooled variance,
    # which is what scipy.stats.dunnett computes from the raw samples.
    table = simulate_results(
        {(0, 200): 0.87, (2, 200): 0.88, (8, 200): 0.85, (12, 200): 0.80},
        frozen_levels=(0, 2, 8, 12),
        train_sizes=(200,),
        seeds=6,
        rng=31,
    )
    ours = contrasts_vs_reference(fit_ols(table, cov_type="nonrobust"), adjust="dunnett")
    samples = [table.loc[table["frozen_layers"] == k, "best_dev"].to_numpy() for k in (2, 8, 12)]
    control = table.loc[table["frozen_layers"] == 0, "best_dev"].to_numpy()
    scipy_result = stats.dunnett(*samples, control=control, random_state=1)
    np.testing.assert_allclose(ours["t"], scipy_result.statistic, rtol=1e-10)
    np.testing.assert_allclose(ours["p_adj"], scipy_result.pvalue, atol=1e-3)
    assert (ours["df"] == 24 - 4).all()


def test_dunnett_refuses_a_singular_cluster_robust_covariance(fixture_table: pd.DataFrame) -> None:
    with pytest.raises(ModelFitError, match=r"non-singular covariance of the 6 contrasts at train_size=50"):
        contrasts_vs_reference(fit_ols(fixture_table), adjust="dunnett")


# ---------------------------------------------------------------------------------------------------------------
# equivalence_tests


def _two_groups(rng: int) -> pd.DataFrame:
    return simulate_results(
        {(0, 500): 0.90, (4, 500): 0.895}, frozen_levels=(0, 4), train_sizes=(500,), seeds=8, rng=rng
    )


def test_tost_equals_ttost_ind_for_two_independent_groups() -> None:
    table = _two_groups(41)
    tost = equivalence_tests(fit_ols(table, cov_type="nonrobust"), margin=0.02)
    assert list(tost.columns) == [
        "train_size",
        "frozen_layers",
        "reference",
        "estimate",
        "se",
        "df",
        "lower_p",
        "upper_p",
        "p_val",
        "equivalent",
        "margin",
        "ci90_low",
        "ci90_high",
    ]
    row = tost.iloc[0]
    x4 = table.loc[table["frozen_layers"] == 4, "best_dev"].to_numpy()
    x0 = table.loc[table["frozen_layers"] == 0, "best_dev"].to_numpy()
    p, (_, p_lower, df_lower), (_, p_upper, _) = ttost_ind(x4, x0, -0.02, 0.02, usevar="pooled")
    assert (row["frozen_layers"], row["reference"], row["df"]) == (4, 0, df_lower)
    assert row["lower_p"] == pytest.approx(p_lower, rel=1e-10)
    assert row["upper_p"] == pytest.approx(p_upper, rel=1e-10)
    assert row["p_val"] == pytest.approx(p, rel=1e-10)
    assert row["equivalent"] == (p < 0.05)
    # The TOST decision is the 90% interval lying inside the margins.
    assert row["equivalent"] == (row["ci90_low"] > -0.02 and row["ci90_high"] < 0.02)


def test_tost_of_the_mixed_model_equals_ttost_paired_for_two_groups() -> None:
    # With a seed intercept, one size and two depths, the model-based difference is the paired (within-seed)
    # difference and its Satterthwaite df are n - 1, as long as the seed variance is not at the boundary.
    table = _two_groups(43)
    fit = fit_mixed(table)
    assert not fit.diagnostics.boundary
    row = equivalence_tests(fit, margin=0.02).iloc[0]
    x4 = table.loc[table["frozen_layers"] == 4].sort_values("seed")["best_dev"].to_numpy()
    x0 = table.loc[table["frozen_layers"] == 0].sort_values("seed")["best_dev"].to_numpy()
    p, (_, p_lower, df_lower), (_, p_upper, _) = ttost_paired(x4, x0, -0.02, 0.02)
    assert row["df"] == pytest.approx(df_lower, rel=1e-5)
    assert row["lower_p"] == pytest.approx(p_lower, rel=1e-4)
    assert row["upper_p"] == pytest.approx(p_upper, rel=1e-4)
    assert row["p_val"] == pytest.approx(p, rel=1e-4)


def test_tost_matches_emmeans_equivalence_test(fit: MixedFit, lme4: dict) -> None:
    margin = lme4["equivalence"]["margin"]
    tost = equivalence_tests(fit, margin=margin)
    merged = _by_cell(tost, lme4["equivalence"]["rows"], ["train_size", "frozen_layers"])
    assert len(merged) == 30
    np.testing.assert_allclose(merged["p_val"], merged["p_val_r"], rtol=1e-5, atol=1e-10)
    assert (tost["margin"] == margin).all()


# ---------------------------------------------------------------------------------------------------------------
# bad input


def test_bad_arguments_raise_model_fit_errors(fit: MixedFit) -> None:
    with pytest.raises(ModelFitError, match=r"`reference` must be one of the frozen levels .* got reference=5"):
        contrasts_vs_reference(fit, reference=5)
    with pytest.raises(ModelFitError, match=r"`adjust` must be one of \['holm', 'bonferroni', 'dunnett', 'none'\]"):
        contrasts_vs_reference(fit, adjust="tukey")  # type: ignore[arg-type]
    with pytest.raises(ModelFitError, match=r"`margin` must be > 0 .* got margin=0"):
        equivalence_tests(fit, margin=0)
    with pytest.raises(ModelFitError, match=r"`alpha` must be in \(0, 0.5\), but got alpha=0.5"):
        equivalence_tests(fit, margin=0.01, alpha=0.5)
    with pytest.raises(ModelFitError, match=r"`confidence` must be in \(0, 1\)"):
        estimated_marginal_means(fit, confidence=95)
    with pytest.raises(ModelFitError, match=r"needs a fit with fixed effects, their full covariance .* got DataFrame"):
        estimated_marginal_means(pd.DataFrame())  # type: ignore[arg-type]

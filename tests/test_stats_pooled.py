"""The pooled (all-task) model and the task x freezing test, on simulated tables with known truth.

The pooled model's agreement with nlme (variances, REML and ML likelihoods, the likelihood-ratio statistic) is
checked in ``test_stats_ftest.py::test_pooled_model_matches_nlme``, next to the R reference it shares.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import freezestats.stats.inference.ftest as ftest
from freezestats.exceptions import ModelFitError
from freezestats.stats import simulate_results
from freezestats.stats.comparisons.pooled_tasks import fit_pooled
from freezestats.stats.comparisons.task_interaction import task_interaction_test
from freezestats.stats.inference.ftest import TEST_COLUMNS

SMALL = {"frozen_levels": (0, 2, 8, 12), "train_sizes": (50, 200, 1000)}
SDS = {50: 0.06, 200: 0.02, 1000: 0.005}


def test_task_specific_freezing_effects_are_detected() -> None:
    table = simulate_results(tasks=("sst2", "cola"), resid_sd=SDS, rng=2, **SMALL)  # the blog's means differ
    result = task_interaction_test(table)
    assert list(result.columns) == [*TEST_COLUMNS, "standardized"]
    row = result.iloc[0]
    assert row["p_val"] < 1e-6 and row["method"] == "F (Satterthwaite)"
    assert row["num_df"] == row["df"] == 3 * 3  # 3 frozen contrasts x 3 sizes, once per extra task
    assert all(math.isnan(row[k]) for k in ("lr_stat", "llf_full", "llf_reduced")) and not row["standardized"]


def test_shared_effects_are_not_flagged() -> None:
    table = simulate_results(0.8, tasks=("sst2", "cola"), rng=2)  # the same truth for every cell and task
    row = task_interaction_test(table).iloc[0]
    assert row["num_df"] == 30  # 6 frozen contrasts x 5 sizes, once per extra task
    assert row["p_val"] > 0.05 and 2 < row["den_df"] < np.inf


def test_f_test_fits_once_and_lrt_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    table = simulate_results(
        tasks=("sst2", "cola"), frozen_levels=(0, 2, 4), train_sizes=(50, 200), seed_size_sd=0.03, rng=4
    )
    calls = []
    real = ftest.fit_components

    def counting(*args, **kwargs):
        calls.append(kwargs.get("reml"))
        return real(*args, **kwargs)

    monkeypatch.setattr(ftest, "fit_components", counting)
    fit = fit_pooled(table)
    assert calls == [True]  # one REML fit (fit_components itself starts twice)
    calls.clear()
    f = task_interaction_test(table, fit=fit).iloc[0]
    assert calls == [] and f["num_df"] == 4
    lrt = task_interaction_test(table, method="lrt").iloc[0]
    assert calls == [False] * 2  # full and reduced by ML (each from two starts inside fit_components)
    assert lrt["lr_stat"] == pytest.approx(2 * (lrt["llf_full"] - lrt["llf_reduced"]), abs=1e-9)
    assert lrt["df"] == lrt["num_df"] == 4 and lrt["p_val"] == pytest.approx(stats.chi2.sf(lrt["lr_stat"], 4))
    assert math.isnan(lrt["f_stat"]) and lrt["method"] == "LRT (chi-square, ML)"


def test_bootstrap_and_bad_method() -> None:
    table = simulate_results(0.8, tasks=("sst2", "cola"), frozen_levels=(0, 4), train_sizes=(50, 200), rng=6)
    seen: list[int] = []
    row = task_interaction_test(table, method="bootstrap", n_boot=4, rng=1, progress=lambda i, n: seen.append(i))
    assert seen == [1, 2, 3, 4] and row.iloc[0]["p_val"] in {k / 5 for k in range(1, 6)}
    assert row.iloc[0]["method"] == "parametric bootstrap LRT (ML, 4 draws)"
    with pytest.raises(ModelFitError, match="method"):
        task_interaction_test(table, method="chisq")


def test_pooled_cell_means_equal_each_tasks_cell_means() -> None:
    table = simulate_results(tasks=("sst2", "cola"), resid_sd=SDS, seed_size_sd=0.01, rng=5, **SMALL)
    fit = fit_pooled(table)
    assert fit.converged and fit.method == "REML" and not fit.standardized
    components = fit.variance_components
    assert list(components.columns) == ["component", "variance", "sd", "task", "train_size", "at_floor"]
    assert components["component"].tolist() == [
        "task:seed",
        "task:seed:train_size",
        *[f"residual:{t}@{n}" for t in ("cola", "sst2") for n in (50, 200, 1000)],
    ]
    residual = components.set_index("component")["sd"]
    assert residual["residual:sst2@50"] > 5 * residual["residual:sst2@1000"]  # a variance per task x size
    observed = table.groupby(["task", "frozen_layers", "train_size"])["best_dev"].mean()
    means = fit.cell_means().set_index(["task", "frozen_layers", "train_size"])
    np.testing.assert_allclose(means.loc[observed.index, "estimate"], observed.to_numpy(), atol=1e-9)
    assert {"term", "estimate", "se", "ci_low", "ci_high", "z", "p_val"} == set(fit.fixed_effects.columns)
    assert "(1 | task:seed)" in fit.formula and "varIdent(~1 | task:train_size)" in fit.formula


def test_tasks_with_different_metrics_are_only_pooled_standardized() -> None:
    table = simulate_results(tasks=("sst2", "cola"), resid_sd=SDS, rng=7, **SMALL)
    table["metric"] = np.where(table["task"] == "cola", "mcc", "accuracy")
    for call in (fit_pooled, task_interaction_test):
        with pytest.raises(ModelFitError, match=r"metrics differ \(cola: mcc, sst2: accuracy\)") as err:
            call(table)
        assert "\n" not in str(err.value) and "standardize=True" in str(err.value)
    fit = fit_pooled(table, standardize=True)
    assert fit.standardized and fit.formula.endswith("[response z-scored per task]")
    assert any("z-scored per task" in w for w in fit.warnings) and set(fit.response_sd) == {"cola", "sst2"}
    row = task_interaction_test(table, standardize=True).iloc[0]
    assert row["standardized"] and row["method"] == "F (Satterthwaite), responses z-scored per task"
    # z-scoring makes the test blind to each task's units: rescaling one task changes nothing.
    rescaled = table.assign(best_dev=np.where(table["task"] == "cola", 3 * table["best_dev"] - 1, table["best_dev"]))
    again = task_interaction_test(rescaled, standardize=True).iloc[0]
    assert again["f_stat"] == pytest.approx(row["f_stat"], rel=1e-6)
    assert again["den_df"] == pytest.approx(row["den_df"], rel=1e-5)


def test_bad_tables() -> None:
    with pytest.raises(ModelFitError, match="at least 2 tasks"):
        fit_pooled(simulate_results(tasks=("sst2",), rng=1))
    table = simulate_results(tasks=("sst2", "cola"), frozen_levels=(0, 2), train_sizes=(50, 100), rng=1)
    gap = table[~((table.task == "cola") & (table.frozen_layers == 2) & (table.train_size == 50))]
    with pytest.raises(ModelFitError, match="only 7 of 8 cells have runs"):
        fit_pooled(gap)
    with pytest.raises(ModelFitError, match="lacks column"):
        fit_pooled(table.drop(columns=["seed"]))
    with pytest.raises(ModelFitError, match="frozen_layers = 0"):
        fit_pooled(table[table.frozen_layers != 0])

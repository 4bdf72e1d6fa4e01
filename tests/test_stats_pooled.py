"""The pooled (all-task) model and the task x freezing test, on simulated tables with known truth."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.formula.api as smf
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats import simulate_results
from freezestats.stats.pooled import fit_pooled, task_interaction_test


def test_task_specific_freezing_effects_are_detected() -> None:
    table = simulate_results(tasks=("sst2", "cola"), rng=2)  # the blog's own means differ between the tasks
    assert task_interaction_test(table).loc[0, "p_val"] < 1e-6


def test_shared_effects_are_not_flagged() -> None:
    table = simulate_results(0.8, tasks=("sst2", "cola"), rng=2)  # the same truth for every cell and task
    result = task_interaction_test(table)
    assert result.loc[0, "df"] == 30  # 6 frozen contrasts x 5 sizes, once per extra task
    assert result.loc[0, "p_val"] > 0.05


def test_lrt_matches_two_ml_fits_done_by_hand() -> None:
    table = simulate_results(tasks=("sst2", "cola"), frozen_levels=(0, 2, 4), train_sizes=(50, 200), rng=4)
    frame = table.assign(seed_group=table.task + ":" + table.seed.astype(str))
    fit = lambda f: smf.mixedlm(f, frame, groups=frame.seed_group).fit(reml=False, method="bfgs")  # noqa: E731
    full = fit("best_dev ~ C(task) * C(frozen_layers) * C(train_size)")
    reduced = fit("best_dev ~ C(task) * C(train_size) + C(frozen_layers) * C(train_size)")
    lr = 2 * (full.llf - reduced.llf)
    result = task_interaction_test(table)
    assert result.loc[0, "lr_stat"] == pytest.approx(lr, rel=1e-6, abs=1e-6)
    assert result.loc[0, "p_val"] == pytest.approx(stats.chi2.sf(lr, 4), rel=1e-5)


def test_pooled_cell_means_equal_each_tasks_cell_means() -> None:
    table = simulate_results(tasks=("sst2", "cola"), frozen_levels=(0, 2, 4), train_sizes=(50, 200), rng=5)
    fit = fit_pooled(table)
    assert fit.converged and set(fit.variance_components.component) == {"seed", "residual"}
    predicted = fit.result.predict(table)  # fixed part only
    observed = table.groupby(["task", "frozen_layers", "train_size"])["best_dev"].transform("mean")
    np.testing.assert_allclose(predicted.to_numpy(), observed.to_numpy(), atol=1e-6)
    assert {"term", "estimate", "se", "ci_low", "ci_high", "z", "p_val"} == set(fit.fixed_effects.columns)


def test_bad_tables() -> None:
    with pytest.raises(ModelFitError, match="at least 2 tasks"):
        fit_pooled(simulate_results(tasks=("sst2",), rng=1))
    table = simulate_results(tasks=("sst2", "cola"), frozen_levels=(0, 2), train_sizes=(50, 100), rng=1)
    gap = table[~((table.task == "cola") & (table.frozen_layers == 2) & (table.train_size == 50))]
    with pytest.raises(ModelFitError, match="only 7 of 8 cells have runs"):
        fit_pooled(gap)
    with pytest.raises(ModelFitError, match="lacks column"):
        fit_pooled(table.drop(columns=["seed"]))

"""The realistic simulator: its tables, its truths, the seed structure and collapse rates it was asked for, and
the task-level coverage bench's code path on a few small studies."""

from __future__ import annotations

import argparse
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _scripts import load_script
from scipy import stats

from freezestats.stats import contrasts_vs_reference, fit_mixed
from freezestats.stats.inference.task_family import task_noninferiority
from freezestats.stats.items.task_level import task_level_contrasts
from freezestats.stats.simulation import items as old_items
from freezestats.stats.simulation.realistic import (
    RealisticTask,
    Scenario,
    blog_shaped,
    null_at_margin,
    realistic_task,
    seed_shared_collapse,
    simulate_realistic,
)

BENCH = Path(__file__).resolve().parents[1] / "bench" / "coverage_task_level.py"


def small(**changes: object) -> Scenario:
    """Two sizes and three depths of the blog-shaped scenario, for fast studies."""
    base = blog_shaped()
    depths = (0, 2, 6)
    keep = {
        "train_sizes": (200, 1000),
        "depths": depths,
        "rho": {k: base.rho[k] for k in depths},
        "depth_sd": {k: base.depth_sd[k] for k in depths},
        "depth_collapse": {k: base.depth_collapse[k] for k in depths},
        "item_sd": {k: base.item_sd[k] for k in depths},
    }
    return replace(base, **{**keep, **changes})  # type: ignore[arg-type]


@cache
def small_task() -> RealisticTask:
    return realistic_task(small())


def test_tables_have_the_old_simulators_columns_and_one_row_per_run_and_item() -> None:
    study = simulate_realistic(small_task(), rng=0)
    old = old_items.simulate_item_study({200: {0: 0.8, 2: 0.79}}, {200: 0.01}, seeds=2, n_items=20, rng=0)
    assert list(study.results.columns) == list(old.results.columns)
    assert list(study.items.columns) == list(old.items.columns)
    assert len(study.results) == 2 * 3 * 5 and len(study.items) == len(study.results) * 872
    assert (study.items.groupby("trial")["half"].apply(lambda h: (h == "score").sum()) == 436).all()
    assert (study.results["n_eval_heldout"] == 436).all()
    scored = study.items[study.items["half"] == "score"]
    right = (scored["prediction_heldout"] == scored["label"]).groupby(scored["trial"]).mean()
    assert np.allclose(right.sort_index().to_numpy(), study.results.sort_values("trial")["heldout"].to_numpy())
    assert set(study.truth_task) == set(study.truth_items) == {(n, k) for n in (200, 1000) for k in (2, 6)}


def test_a_collapsed_run_predicts_the_majority_class_on_every_item() -> None:
    study = simulate_realistic(small_task(), rng=1)
    failed = study.results.loc[study.results["failed"], "trial"]
    assert len(failed) > 0
    predictions = study.items[study.items["trial"].isin(failed)]
    assert (predictions["prediction_heldout"] == small_task().majority_class).all()


def test_the_analysis_runs_on_a_simulated_study() -> None:
    study = simulate_realistic(small_task(), rng=2)
    task = task_level_contrasts(study.results, study.items, response="heldout", metric="accuracy")
    seed = task_level_contrasts(study.results, None, response="heldout", metric="accuracy", population="evaluation_set")
    assert len(task) == len(seed) == 4 and (task["se_item"] > 0).any() and (seed["se_item"] == 0).all()
    assert np.allclose(task["estimate"], seed["estimate"])
    shown = task_noninferiority(task, margin=0.01)
    assert shown["noninferior"].dtype == bool
    model = contrasts_vs_reference(fit_mixed(study.results, "heldout"), 0, adjust="none")
    assert {"ci_low", "ci_high"} <= set(model.columns)


def test_a_study_is_reproducible_from_its_seed() -> None:
    a, b = (simulate_realistic(small_task(), rng=7) for _ in range(2))
    pd.testing.assert_frame_equal(a.results, b.results)
    assert a.truth_items == b.truth_items


def test_the_mean_difference_over_many_seeds_is_the_truth() -> None:
    """Every item of a 2,000-item population drawn: ``best_dev`` (all items) then estimates the task's truth and
    ``heldout`` (the score half) the drawn items' truth; 3,000 seeds leave a Monte Carlo SE of ~0.002, and the
    tolerance is 4 SE."""
    scenario = small(train_sizes=(200,), population=2000, n_items=2000, seeds=3000)
    study = simulate_realistic(scenario, rng=3, items=False)
    runs = study.results.pivot_table(index="seed", columns="frozen_layers", values=["best_dev", "heldout"])
    for depth in (2, 6):
        for response, truth in (("best_dev", study.truth_task), ("heldout", study.truth_items)):
            diff = runs[(response, depth)] - runs[(response, 0)]
            se = diff.std() / np.sqrt(len(diff))
            assert abs(diff.mean() - truth[(200, depth)]) < 4 * se, (response, depth, diff.mean(), se)


def test_the_cell_means_are_the_scenarios_with_collapse_in_them() -> None:
    """A cell's mean is the scenario's accuracy with its collapsed runs counted in: the healthy runs' skill is
    solved higher where runs collapse, and the truth is the difference of the cell means."""
    task = realistic_task(small())
    without = realistic_task(small(collapse={200: 0.0, 1000: 0.0}))
    for key in task.accuracy:
        accuracy = task.scenario.accuracy[key]
        assert task.accuracy[key] == pytest.approx(accuracy, abs=1e-9)
        assert without.accuracy[key] == pytest.approx(accuracy, abs=1e-9)
        assert task.mu[key] > without.mu[key]  # every cell mean is above the majority share
    for (size, depth), truth in task.truth_task.items():
        assert truth == pytest.approx(task.accuracy[(size, depth)] - task.accuracy[(size, 0)])


def test_seed_correlation_and_run_sds_are_the_scenarios() -> None:
    """No collapse, little run-by-item noise and every item of the population scored (``best_dev``), so a run's
    accuracy is its skill's: its correlation with the reference's over 1,500 seeds is rho (SE <= 0.03), and its
    SD is the scenario's run SD (to first order, SE ~2%)."""
    scenario = replace(
        small(train_sizes=(100,), population=3000, n_items=3000, seeds=1500, noise_sd=0.05, class_bias_sd=0.0),
        rho={0: 1.0, 2: 0.6, 6: -0.3},
        depth_sd={0: 1.0, 2: 0.75, 6: 0.5},
        run_sd={100: 0.04},
        collapse={100: 0.0},
    )
    study = simulate_realistic(scenario, rng=4, items=False)
    runs = study.results.pivot(index="seed", columns="frozen_layers", values="best_dev")
    for depth in (2, 6):
        assert np.corrcoef(runs[depth], runs[0])[0, 1] == pytest.approx(scenario.rho[depth], abs=0.08)
    for depth in (0, 2, 6):
        assert runs[depth].std() == pytest.approx(0.04 * scenario.depth_sd[depth], rel=0.1)


def _healthy_spread(scenario: Scenario) -> pd.DataFrame:
    """Per depth: the SD over healthy runs of their share of class-1 predictions and of their accuracy."""
    study = simulate_realistic(scenario, rng=6)
    healthy = study.results.loc[~study.results["failed"], "trial"]
    scored = study.items[study.items["trial"].isin(healthy) & (study.items["half"] == "score")]
    by_run = [scored["frozen_layers"], scored["trial"]]
    runs = pd.DataFrame(
        {
            "share": scored["prediction_heldout"].groupby(by_run).mean(),
            "accuracy": (scored["prediction_heldout"] == scored["label"]).groupby(by_run).mean(),
        }
    )
    return runs.groupby(level=0).std()


def test_runs_lean_towards_a_class_more_than_their_accuracy_moves() -> None:
    """The class lean: a healthy run's share of class-1 predictions varies several times more than its accuracy
    (the example's cells at 1000 examples: 0.011-0.064 against 0.005-0.010), and more than without the lean."""
    spread = _healthy_spread(small(train_sizes=(1000,), seeds=200))
    assert (spread["share"] > 3 * spread["accuracy"]).all(), spread
    flat = _healthy_spread(small(train_sizes=(1000,), seeds=200, class_bias_sd=0.0))
    assert (flat["share"] < spread["share"] / 2).all(), (flat, spread)


def test_collapse_rates_are_the_scenarios() -> None:
    scenario = small(seeds=2000, n_items=20)
    study = simulate_realistic(scenario, rng=5, items=False)
    rates = study.results.groupby(["train_size", "frozen_layers"])["failed"].mean()
    for (size, depth), rate in rates.items():
        expected = scenario.collapse_rate(size, depth)
        assert abs(rate - expected) < 4 * np.sqrt(expected * (1 - expected) / 2000), (size, depth, rate)
    healthy = study.results[~study.results["failed"]]
    assert healthy["heldout"].std() > 0


def test_seed_shared_collapses_keep_their_rates_and_follow_the_seed() -> None:
    scenario = small(seeds=2000, n_items=20, collapse_rho={0: 1.0, 2: 1.0, 6: 0.0})
    runs = simulate_realistic(scenario, rng=5, items=False).results
    flags = runs.pivot_table(index=["train_size", "seed"], columns="frozen_layers", values="failed", aggfunc="first")
    for (size, depth), rate in runs.groupby(["train_size", "frozen_layers"])["failed"].mean().items():
        expected = scenario.collapse_rate(size, depth)
        assert abs(rate - expected) < 4 * np.sqrt(expected * (1 - expected) / 2000), (size, depth, rate)
    # depth 2 collapses at 1.1 times the reference's rate on the same uniform draw: wherever the reference
    # collapsed, it did too; depth 6's draw is its own, so its flags are about as often shared as chance has it
    ref, two, six = (flags[k].astype(bool) for k in (0, 2, 6))
    assert two[ref].all() and ref.sum() > 50
    assert abs(np.corrcoef(ref, six)[0, 1]) < 0.1
    independent = simulate_realistic(small(seeds=2000, n_items=20), rng=5, items=False).results
    alone = independent.pivot_table(index=["train_size", "seed"], columns="frozen_layers", values="failed",
                                    aggfunc="first").astype(bool)  # fmt: skip
    assert not alone[2][alone[0]].all()  # drawn apart, depth 2 misses some of the reference's collapses


def test_seed_shared_collapse_takes_the_skill_correlation_without_its_sign() -> None:
    scenario = seed_shared_collapse(blog_shaped())
    assert scenario.collapse_rho == {k: max(r, 0.0) for k, r in blog_shaped().rho.items()}
    assert scenario.collapse_rho[6] == 0.0 and scenario.collapse_rho[-1] == 0.99
    with pytest.raises(ValueError, match="collapse_rho"):
        realistic_task(small(collapse_rho={0: 1.0, 2: 0.5}))  # depth 6 has none
    with pytest.raises(ValueError, match="collapse_rho"):
        realistic_task(small(collapse_rho={0: 0.5, 2: 0.5, 6: 0.5}))  # the reference's own must be 1


def test_null_at_margin_costs_exactly_the_margin_everywhere() -> None:
    task = realistic_task(null_at_margin(0.01, small()))
    assert all(v == pytest.approx(-0.01, abs=1e-9) for v in task.truth_task.values())


def test_the_blog_preset_is_shaped_as_asked() -> None:
    scenario = blog_shaped()
    assert scenario.depths == (-1, 0, 1, 2, 4, 5, 6) and scenario.train_sizes == (50, 100, 200, 500, 1000)
    assert scenario.run_sd[50] / scenario.run_sd[1000] == pytest.approx(15)
    assert scenario.rho[-1] == 0.99 and scenario.rho[6] == -0.3
    assert [scenario.collapse[n] for n in scenario.train_sizes] == sorted(scenario.collapse.values(), reverse=True)


def test_a_scenario_that_misses_a_cell_is_refused() -> None:
    scenario = small()
    accuracy = {key: value for key, value in scenario.accuracy.items() if key != (200, 2)}
    with pytest.raises(ValueError, match=r"\(200, 2\)"):
        realistic_task(replace(scenario, accuracy=accuracy))
    with pytest.raises(ValueError, match="rho"):
        realistic_task(replace(scenario, rho={0: 1.0, 2: 1.5, 6: 0.0}))


def test_the_bench_runs_its_code_path_on_small_studies_and_merges_chunks_exactly() -> None:
    bench = load_script(BENCH)
    fast = {"seeds": 5, "base": small(), "failure_rates": "pooled"}  # the bench's path; the joint draws cost ~3x
    first, first_rows = bench.run(4, **fast)  # the code path and the merge, not the coverage: four studies each
    second, second_rows = bench.run(4, first=4, **fast)
    assert set(first_rows["study"]) == set(range(4)) and set(second_rows["study"]) == set(range(4, 8))
    result = bench.combine([first, second], [first_rows, second_rows])
    rows = pd.DataFrame(result["rows"]).set_index(["train_size", "frozen_layers"])
    assert len(rows) == 4 and (rows["n"] == 8).all() and result["n_studies"] == 8
    for name in bench.COVERAGES:
        assert rows[name].between(0, 1).all()
    np.testing.assert_allclose(rows["miss_lower"] + rows["miss_upper"], 1 - rows["task"])  # a miss has a side
    halves = [pd.DataFrame(r["rows"]).set_index(["train_size", "frozen_layers"]) for r in (first, second)]
    for name in ("task", "power", "null"):  # counts add: the merged share is the chunks' mean
        pd.testing.assert_series_equal(rows[name], (halves[0][name] + halves[1][name]) / 2, check_names=False)
    assert result["fwer"]["any"] == pytest.approx((first["fwer"]["any"] + second["fwer"]["any"]) / 2)
    assert 0 <= result["fwer"]["any"] <= 1 and {"200", "1000"} <= set(result["fwer"])
    text = bench.report(result)
    assert "familywise error" in text and "model>task" in text
    with pytest.raises(SystemExit, match="share studies"):
        bench.combine([first, first], [first_rows, first_rows])
    with pytest.raises(SystemExit, match="failure_rates"):
        bench.combine([first, {**second, "failure_rates": "slope"}], [first_rows, second_rows])
    with pytest.raises(SystemExit, match="sd_grid"):  # an experiment's grid is not the analysis's
        bench.combine([first, {**second, "sd_grid": [0.1, 0.25]}], [first_rows, second_rows])
    with pytest.raises(SystemExit, match="depth_collapse"):  # a scenario with other collapse factors is another
        bench.combine([first, {**second, "depth_collapse": {"-1": 2.2}}], [first_rows, second_rows])
    for option, other in (("cell_prior_scale", 0.5), ("level_sd", 1.0)):
        with pytest.raises(SystemExit, match=option):
            bench.combine([first, {**second, option: other}], [first_rows, second_rows])
    # a record from before an option merges as that option's default
    older = {k: v for k, v in first.items() if k not in ("cell_prior_scale", "level_sd")}
    if first["cell_prior_scale"] == 1.0 and first["level_sd"] == 2.5:
        assert bench.combine([older, second], [first_rows, second_rows])["n_studies"] == 8


def test_the_bench_says_which_side_of_the_interval_missed() -> None:
    """A miss with the estimate above the truth is the lower side's (the side a non-inferiority test reads)."""
    summarise = load_script(BENCH.with_name("coverage_task_level_record.py")).summarise
    alt = pd.DataFrame({"train_size": 100, "frozen_layers": [1] * 8 + [2] * 4, "study": range(12),
                        "truth_task": 0.0, "collapse": False, "two_part": True, "noninferior": False,
                        "task": [True] * 5 + [False] * 3 + [True, True, False, True],
                        "error": [0.01] * 5 + [0.05, 0.04, -0.06] + [0.0, 0.0, -0.03, 0.0],
                        "se": 0.01, "width": 0.04})  # fmt: skip
    null = alt.assign(study=range(100, 112))
    rows = pd.DataFrame(summarise(alt, null)).set_index("frozen_layers")
    assert rows.loc[1, "miss_lower"] == 2 / 8 and rows.loc[1, "miss_upper"] == 1 / 8
    assert rows.loc[2, "miss_lower"] == 0 and rows.loc[2, "miss_upper"] == 1 / 4


def test_the_bench_reads_a_depths_coverage_over_its_sizes_with_the_study_as_unit() -> None:
    """Per depth: each study's share of the depth's contrasts covered, then the t interval over studies."""
    saved = load_script(BENCH.with_name("coverage_task_level_record.py"))
    covered = {1: [[1, 1], [1, 0], [1, 1], [0, 1]], 2: [[1, 1], [1, 1], [1, 1], [1, 1]]}  # depth: study x size
    alt = pd.DataFrame([{"frozen_layers": depth, "study": study, "train_size": size, "task": bool(hit)}
                        for depth, table in covered.items() for study, row in enumerate(table)
                        for size, hit in zip((100, 200), row, strict=True)])  # fmt: skip
    rows = {d["frozen_layers"]: d for d in saved.depth_coverage(alt)}
    shares = np.array([1.0, 0.5, 1.0, 0.5])
    half = stats.t.ppf(0.975, 3) * shares.std(ddof=1) / 2
    assert rows[1]["task"] == 0.75 and rows[1]["cells"] == 2
    assert (rows[1]["low"], rows[1]["high"]) == pytest.approx((0.75 - half, 0.75 + half), rel=1e-12)
    assert (rows[2]["task"], rows[2]["low"], rows[2]["high"]) == (1.0, 1.0, 1.0)
    assert saved._versus_band(rows[2]).strip() == "above the band (too wide)" and saved._versus_band(rows[1]) == ""


def test_the_bench_sets_an_experimental_sd_grid_in_its_processes_and_refuses_a_bad_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from freezestats.stats.failures import sd_integration

    bench = load_script(BENCH)
    analysis_grid = sd_integration.SD_GRID
    monkeypatch.setattr(sd_integration, "SD_GRID", analysis_grid)  # undone after the test
    task = small_task()
    bench.configure(task, task, "pooled_joint", bench.Experiment())
    assert analysis_grid == sd_integration.SD_GRID  # None keeps the analysis's grid
    bench.configure(task, task, "pooled_joint", bench.Experiment.of(sd_grid=bench.parse_sd_grid("0.1,0.25,0.5")))
    assert sd_integration.SD_GRID == (0.1, 0.25, 0.5)  # what integrate_over_sd reads at each call
    for bad in ("0.5,0.1", "0,0.5", "a,b", "0.1,0.1"):
        with pytest.raises(SystemExit, match="--sd-grid"):
            bench.parse_sd_grid(bad)
    from freezestats.stats.items import task_two_part

    monkeypatch.setattr(sd_integration, "PRIOR_SCALE", sd_integration.PRIOR_SCALE)
    experiment = bench.Experiment.of(cell_prior_scale=0.5)
    bench.configure(task, task, "pooled_joint", experiment)
    assert sd_integration.PRIOR_SCALE == 0.5
    assert bench.Experiment().settings()["sd_grid"] is None  # a record names the grid only where a run changed it
    monkeypatch.setattr(task_two_part, "PAIR_LEVEL_SD", task_two_part.PAIR_LEVEL_SD)
    bench.configure(task, task, "pooled_joint", bench.Experiment.of(level_sd=0.5))
    assert task_two_part.PAIR_LEVEL_SD == 0.5
    assert bench.saved.switch_labels({"level_sd": 0.5}) == ", pair level SD 0.5"
    assert bench.saved.switch_labels({"level_sd": 2.5}) == ""  # the analysis's, and what older records ran with
    assert experiment.settings()["sd_grid"] is None and experiment.settings()["cell_prior_scale"] == 0.5
    header = bench.saved.switch_labels({"sd_grid": [0.1, 0.5], "level_sd": 1.0, "cell_prior_scale": 1.0})
    assert header == ", SD grid [0.1, 0.5], pair level SD 1.0"  # cell prior scale 1.0: the default
    with pytest.raises(ValueError, match="no such switch: pair_by_item"):
        bench.Experiment.of(pair_by_item=True)
    for bad in ("0", "-1", "x"):
        with pytest.raises(argparse.ArgumentTypeError, match="must be a positive number"):
            bench.parse_scale(bad)


def test_the_bench_sets_a_depths_collapse_factor_and_refuses_a_bad_one() -> None:
    bench = load_script(BENCH)
    assert bench.parse_depth_collapse("-1=2.2,1=1.5") == {-1: 2.2, 1: 1.5}
    for bad in ("-1", "x=2", "1=0", "1=2,,"):
        with pytest.raises(SystemExit, match="--depth-collapse"):
            bench.parse_depth_collapse(bad)
    scenario = bench.scenario_of(small(), 5, 0.5, {2: 3.0})
    assert scenario.collapse_rate(200, 2) == pytest.approx(3.0 * scenario.collapse_rate(200, 0))
    assert scenario.collapse_rate(200, 0) == pytest.approx(0.5 * small().collapse_rate(200, 0))
    assert scenario.collapse_rate(200, 6) == pytest.approx(0.5 * small().collapse_rate(200, 6))  # others as they were
    with pytest.raises(SystemExit, match="does not have: \\[3\\]"):
        bench.scenario_of(small(), 5, 1.0, {3: 2.0})
    header = bench.report({**bench.run(1, base=small(), failure_rates="pooled")[0], "depth_collapse": {"-1": 2.2}})
    assert "frozen -1 collapsing x2.2 the reference's" in header.splitlines()[0]


def test_two_runs_are_compared_study_by_study() -> None:
    """bench/paired_coverage.py: lost and gained count the studies whose interval changed side, on the studies
    both runs hold, and the ratios are the second run's means over the first's."""
    paired = load_script(BENCH.with_name("paired_coverage.py")).paired

    def rows(covered: list[bool], se: float, studies: range, kind: str = "alternative") -> pd.DataFrame:
        return pd.DataFrame({"kind": kind, "study": list(studies), "train_size": 100, "frozen_layers": 1,
                             "task": covered, "se": se, "width": 4 * se})  # fmt: skip

    first = pd.concat([rows([True, True, False, True], 0.02, range(4)), rows([True] * 4, 9.0, range(4), "null")])
    second = rows([True, False, True, False, True], 0.01, range(5))  # study 4: not in the first run
    table = paired(first, second)
    (row,) = table.to_dict("records")
    assert row["studies"] == 4 and row["lost"] == 2 and row["gained"] == 1  # studies 1 and 3; study 2
    assert row["cover_a"] == 0.75 and row["cover_b"] == 0.5
    assert row["se_ratio"] == pytest.approx(0.5) and row["width_ratio"] == pytest.approx(0.5)

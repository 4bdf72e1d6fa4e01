"""The default answer speaks of the task: paired by seed and by item, each depth on its own, one family per task."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from freezestats.analysis.pipeline import analyze
from freezestats.exceptions import ModelFitError
from freezestats.stats.inference.task_family import FAMILY_PROCEDURE, task_noninferiority
from freezestats.stats.items.task_level import task_level_contrasts

N_ITEMS = 872  # half scored (436), as GLUE's SST-2 validation set split by the study


def _stable_study(disagree: dict[int, float], seeds: int = 5, size: int = 1000, flips: int = 2) -> tuple:
    """Runs whose seeds barely move them, scored on 436 items; depth k disagrees with the reference on a share
    ``disagree[k]`` of the items, half of them in each direction, so that on the drawn set it costs nothing.

    Each seed flips ``flips`` random items of each run, so the seeds are stable but not identical.
    """
    rng = np.random.default_rng(7)
    labels = rng.integers(0, 2, N_ITEMS)
    half = np.where(np.arange(N_ITEMS) % 2 == 0, "score", "select")
    scored = np.flatnonzero(half == "score")
    reference = np.where(rng.random(N_ITEMS) < 0.85, labels, 1 - labels)  # 85% right
    right, wrong = scored[reference[scored] == labels[scored]], scored[reference[scored] != labels[scored]]
    base = {0: reference}
    for depth, share in disagree.items():
        k = round(share * len(scored) / 2)
        pred = reference.copy()
        pred[rng.choice(right, k, replace=False)] ^= 1  # k items the reference gets right, this depth wrong
        pred[rng.choice(wrong, k, replace=False)] ^= 1  # and k the other way round: no cost on these items
        base[depth] = pred
    runs, items, trial = [], [], 0
    for depth, pred in base.items():
        for seed in range(1, seeds + 1):
            run = pred.copy()
            run[rng.choice(scored, flips, replace=False)] ^= 1
            heldout = float(np.mean(run[scored] == labels[scored]))
            runs.append({"trial": trial, "state": "complete", "role": "grid", "task": "sst2", "model": "m",
                         "metric": "accuracy", "frozen_layers": depth, "train_size": size, "subset_draw": 0,
                         "seed": seed, "order_seed": seed, "heldout": heldout, "best_dev": heldout,
                         "final_dev": heldout, "failed": False, "majority_baseline": 0.5})  # fmt: skip
            items.append(pd.DataFrame({"trial": trial, "task": "sst2", "frozen_layers": depth, "train_size": size,
                                       "subset_draw": 0, "seed": seed, "order_seed": seed, "idx": np.arange(N_ITEMS),
                                       "label": labels, "half": half, "prediction_best": run,
                                       "prediction_heldout": run, "prediction_final": run}))  # fmt: skip
            trial += 1
    return pd.DataFrame(runs), pd.concat(items, ignore_index=True)


@pytest.fixture(scope="module")
def held_out_case() -> tuple:
    """Issue 28's case: depth 1 agrees with the reference but for 0.5% of items, depth 3 disagrees on 12%."""
    return _stable_study({1: 0.005, 3: 0.12})


def test_default_answer_sees_the_items_depth_3_disagrees_on(held_out_case: tuple) -> None:
    runs, items = held_out_case
    result = analyze(runs, items=items, margin=0.01, n_boot=50)
    table = result.tables["noninferiority"].set_index("frozen_layers")
    assert bool(table.loc[1, "noninferior"]) and not bool(table.loc[3, "noninferior"])
    assert abs(table.loc[3, "estimate"]) < 0.005  # no cost on the drawn items ...
    assert table.loc[3, "lower"] < -0.02  # ... but 12% disagreement on 436 items leaves the task's cost open
    assert (table["population"] == "task").all() and result.settings["answer_population"]["sst2"] == "task"
    answer = result.tables["answer"]
    assert answer["deepest_noninferior"].iloc[0] == 1 and answer["population"].iloc[0] == "task"


def test_seed_only_answer_speaks_of_the_evaluation_set_and_misses_it(held_out_case: tuple) -> None:
    runs, items = held_out_case
    result = analyze(runs, items=items, margin=0.01, n_boot=50, uncertainty="seeds")
    table = result.tables["noninferiority"].set_index("frozen_layers")
    assert bool(table.loc[3, "noninferior"])  # what issue 28 found: right about these items, not the task
    assert result.settings["answer_population"]["sst2"] == "evaluation_set"
    assert "fixed sequence" in result.settings["answer_procedure"]["sst2"]


def test_without_predictions_the_answer_speaks_of_the_evaluation_set(held_out_case: tuple) -> None:
    runs, _ = held_out_case
    result = analyze(runs, margin=0.01, n_boot=50)
    assert result.settings["answer_population"]["sst2"] == "evaluation_set"
    assert (result.tables["noninferiority"]["population"] == "evaluation_set").all()
    assert result.settings["answer_procedure"]["sst2"] == FAMILY_PROCEDURE


def test_a_depths_contrast_does_not_depend_on_the_other_depths_run(held_out_case: tuple) -> None:
    runs, items = held_out_case
    both = task_level_contrasts(runs, items, response="heldout", metric="accuracy").set_index("frozen_layers")
    alone = task_level_contrasts(runs[runs["frozen_layers"] != 3], items, response="heldout", metric="accuracy")
    alone = alone.set_index("frozen_layers")
    columns = ["estimate", "se", "df", "ci_low", "ci_high"]
    pd.testing.assert_frame_equal(both.loc[[1], columns], alone.loc[[1], columns])


def test_a_noisy_shallow_depth_does_not_silence_a_deeper_one() -> None:
    columns = {"train_size": 1000, "frozen_layers": [-1, 1, 2], "reference": 0, "estimate": [0.0, 0.0, 0.0],
               "se": [0.05, 0.001, 0.001], "df": 50.0, "se_seed": 0.0, "se_item": 0.0, "ci_low": 0.0, "ci_high": 0.0,
               "population": "task"}  # fmt: skip
    contrasts = pd.DataFrame(columns)
    table = task_noninferiority(contrasts, margin=0.01).set_index("frozen_layers")
    assert not table.loc[-1, "noninferior"] and table.loc[1, "noninferior"] and table.loc[2, "noninferior"]
    assert ((table["lower"] > -0.01) == table["noninferior"]).all()  # the printed bounds agree with the decisions
    assert ((table["p_adj"] <= 0.05) == table["noninferior"]).all()


def test_the_population_option_is_checked(held_out_case: tuple) -> None:
    runs, items = held_out_case
    with pytest.raises(ModelFitError, match="--uncertainty"):
        analyze(runs, items=items, uncertainty="items")
    with pytest.raises(ModelFitError, match="needs the runs' per-item predictions"):
        task_level_contrasts(runs, None, response="heldout", metric="accuracy", population="task")


@pytest.mark.parametrize("uncertainty", ["task", "seeds"])
def test_the_reports_answer_names_the_population_and_procedure_that_ran(held_out_case: tuple, uncertainty: str) -> None:
    from freezestats.report.inputs import ReportInputs
    from freezestats.report.text import answer
    from freezestats.stats.items.task_level import POPULATIONS

    runs, items = held_out_case
    result = analyze(runs, items=items, margin=0.01, n_boot=50, uncertainty=uncertainty)
    text = answer(ReportInputs(analysis=result, runs=runs, study=None, notes=[], ran_analysis=True))
    population = result.settings["answer_population"]["sst2"]
    assert POPULATIONS[population] in text
    assert result.settings["answer_procedure"]["sst2"] in text
    other = "evaluation_set" if population == "task" else "task"
    assert f"speak of {POPULATIONS[other]}" not in text
    no_items = analyze(runs, margin=0.01, n_boot=50)
    text = answer(ReportInputs(analysis=no_items, runs=runs, study=None, notes=[], ran_analysis=True))
    assert "No per-item predictions are stored" in text.split("**sst2**", 1)[1].split(".", 2)[1]


def test_the_summary_heading_names_the_population_first_and_the_procedure(held_out_case: tuple) -> None:
    from freezestats.analysis.summary import summary_lines

    runs, items = held_out_case
    for kwargs, first in (({"items": items}, "for the task"), ({}, "NO per-item predictions stored")):
        result = analyze(runs, margin=0.01, n_boot=50, **kwargs)
        heading = next(line for line in summary_lines(result) if line.strip().startswith("answer"))
        assert heading.strip().startswith(f"answer {first}")
        assert result.settings["answer_procedure"]["sst2"] in heading


def test_the_failure_part_is_the_one_asked_for_and_every_label_names_it() -> None:
    from freezestats.report.methods import FAILURE_TEXT, _answer_paragraph
    from freezestats.stats.simulation.realistic import blog_shaped, realistic_task, simulate_realistic

    study = simulate_realistic(realistic_task(blog_shaped()), rng=7)
    runs = study.results[study.results["train_size"] >= 500].reset_index(drop=True)
    items = study.items[study.items["trial"].isin(runs["trial"])]
    tables = {}
    for rates, sides in (("pooled", "Wilson-MOVER"), ("pooled_joint", "joint draws")):
        result = analyze(runs, items=items, margin=0.01, n_boot=0, failure_rates=rates)
        table = result.tables["noninferiority"].set_index(["train_size", "frozen_layers"])
        two_part = table["method"].str.startswith("two-part")
        assert two_part.sum() >= 4 and set(table.loc[two_part, "failure_sides"]) == {sides}
        assert set(table.loc[~two_part, "failure_sides"]) == {"none"}
        assert result.settings["failure_rates"] == rates and FAILURE_TEXT[rates] in _answer_paragraph(result.settings)
        tables[rates] = table
    paired = tables["pooled"]["method"] == "paired"
    pd.testing.assert_series_equal(tables["pooled"].loc[paired, "lower"], tables["pooled_joint"].loc[paired, "lower"])
    assert (tables["pooled"].loc[~paired, "lower"] != tables["pooled_joint"].loc[~paired, "lower"]).any()
    with pytest.raises(ModelFitError, match="`--failure-rates` must be one of"):
        analyze(runs, items=items, failure_rates="joint")

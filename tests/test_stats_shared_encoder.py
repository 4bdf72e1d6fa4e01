"""Shared-encoder contrasts: one task's runs alone and in a group, in one mixed model with per-cell variances."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _r_reference import r_reference
from _scripts import load_script

from freezestats.exceptions import ModelFitError
from freezestats.stats.comparisons.shared_encoder import SHARED_ENCODER_COLUMNS, shared_encoder_contrasts
from freezestats.stats.simulation.results import simulate_results

# code -> (trained_with, frozen_layers); the group helps stsb only when 3 layers are frozen (the source's claim)
SETTINGS = {0: ("stsb", 0), 1: ("stsb", 3), 2: ("g", 0), 3: ("g", 3)}
SIZES = (200, 1000)
TRUE = {(0, 200): 0.60, (1, 200): 0.58, (2, 200): 0.55, (3, 200): 0.66,
        (0, 1000): 0.80, (1, 1000): 0.79, (2, 1000): 0.78, (3, 1000): 0.85}  # fmt: skip


def _study(rng: int) -> pd.DataFrame:
    table = simulate_results(TRUE, tasks=("stsb",), frozen_levels=list(SETTINGS), train_sizes=SIZES, seeds=5,
                             seed_sd=0.01, resid_sd={200: 0.02, 1000: 0.01}, rng=rng)  # fmt: skip
    setting = table["frozen_layers"].map(SETTINGS)
    return table.assign(trained_with=[s[0] for s in setting], frozen_layers=[s[1] for s in setting])


def test_the_three_families_are_the_cell_mean_combinations() -> None:
    table = _study(0)
    out = shared_encoder_contrasts(table, "best_dev", task="stsb")
    assert list(out.columns) == SHARED_ENCODER_COLUMNS
    assert out.groupby("comparison").size().to_dict() == {
        "together_vs_alone": 4, "frozen_vs_0": 2, "freezing_gain_difference": 2,
    }  # fmt: skip
    mean = table.groupby(["trained_with", "frozen_layers", "train_size"])["best_dev"].mean()
    for row in out.itertuples():
        n, k = row.train_size, row.frozen_layers
        expected = {
            "together_vs_alone": mean[("g", k, n)] - mean[("stsb", k, n)],
            "frozen_vs_0": mean[("g", k, n)] - mean[("g", 0, n)],
            "freezing_gain_difference": (mean[("g", k, n)] - mean[("g", 0, n)])
            - (mean[("stsb", k, n)] - mean[("stsb", 0, n)]),
        }[row.comparison]
        assert row.estimate == pytest.approx(expected, abs=1e-9)
    assert (out["ci_high_adj"] - out["ci_low_adj"] >= out["ci_high"] - out["ci_low"] - 1e-12).all()


def test_intervals_cover_the_true_contrasts() -> None:
    truth = {
        "together_vs_alone": lambda k, n: TRUE[(2 + (k == 3), n)] - TRUE[(int(k == 3), n)],
        "frozen_vs_0": lambda k, n: TRUE[(3, n)] - TRUE[(2, n)],
        "freezing_gain_difference": lambda k, n: (TRUE[(3, n)] - TRUE[(2, n)]) - (TRUE[(1, n)] - TRUE[(0, n)]),
    }
    hits = []
    for rng in range(30):
        out = shared_encoder_contrasts(_study(50 + rng), "best_dev", task="stsb", adjust="none")
        for row in out.itertuples():
            value = truth[row.comparison](row.frozen_layers, row.train_size)
            hits.append(row.ci_low <= value <= row.ci_high)
    assert 0.89 <= np.mean(hits) <= 0.995


def test_a_task_never_trained_in_a_group_is_refused() -> None:
    table = _study(1)
    with pytest.raises(ModelFitError, match="no runs trained in a group"):
        shared_encoder_contrasts(table[table["trained_with"] == "stsb"], "best_dev", task="stsb")


def test_an_unfinished_group_cell_is_named_by_its_group_and_depth() -> None:
    """A study still running: the group has no runs at n = 1000 yet; the error names those cells as the study does."""
    table = _study(1)
    unfinished = table[~((table["trained_with"] == "g") & (table["train_size"] == 1000))]
    with pytest.raises(
        ModelFitError,
        match=r"2 have fewer \(runs in brackets\): g, frozen 0 at n = 1000 \(0\), g, frozen 3 at n = 1000 \(0\);",
    ) as err:
        shared_encoder_contrasts(unfinished, "best_dev", task="stsb")
    assert "frozen_layers=" not in str(err.value)


def test_a_cell_with_one_run_is_refused_not_given_a_near_zero_variance() -> None:
    table = _study(2)
    lone = (table["trained_with"] == "g") & (table["frozen_layers"] == 3) & (table["train_size"] == 200)
    one_left = table[~lone | (table["seed"] == table.loc[lone, "seed"].min())]
    with pytest.raises(ModelFitError, match=r"1 have fewer \(runs in brackets\): g, frozen 3 at n = 200 \(1\);"):
        shared_encoder_contrasts(one_left, "best_dev", task="stsb")
    # a variance per size lends the lone run its size's: one run is enough there, an empty cell still is not
    per_size = shared_encoder_contrasts(one_left, "best_dev", task="stsb", variance="per_size")
    assert per_size["se"].notna().all() and (per_size["se"] > 0).all()
    with pytest.raises(
        ModelFitError, match=r"needs a run at every train size, but 1 have fewer .*g, frozen 3 at n = 200 \(0\)"
    ):
        shared_encoder_contrasts(table[~lone], "best_dev", task="stsb", variance="per_size")


def test_analyze_fits_the_freeze_model_on_runs_alone_and_adds_the_shared_encoder_table() -> None:
    from freezestats.analysis.pipeline import analyze

    table = _study(2)
    result = analyze(table, response="best_dev")
    shared = result.tables["shared_encoder"]
    assert set(shared["task"]) == {"stsb"} and len(shared) == 8
    assert result.settings["n_runs"] == int((table["trained_with"] == "stsb").sum())
    assert any("shared_encoder table" in w for w in result.warnings)
    # the blog's appendix has no STS-B: nothing to compare with is not a warning
    assert "reference_comparison" not in result.tables and not any("reference" in w for w in result.warnings)


def test_analyze_of_a_study_still_running_answers_at_the_finished_sizes() -> None:
    """The group has not run at n = 1000 yet: the shared-encoder table holds n = 200, and a warning names the
    cells still short at n = 1000; with no size finished, the refusal names them instead."""
    from freezestats.analysis.pipeline import analyze

    table = _study(2)
    running = table[~((table["trained_with"] == "g") & (table["train_size"] == 1000) & (table["seed"] > 1))]
    result = analyze(running, response="best_dev")
    shared = result.tables["shared_encoder"]
    assert set(shared["train_size"]) == {200} and len(shared) == 4
    expected = "stsb: shared_encoder at n = 200 only; n = 1000 has cells with fewer than two runs (runs in brackets): "
    assert any(
        w.startswith(expected + "g, frozen 0 at n = 1000 (1), g, frozen 3 at n = 1000 (1).") for w in result.warnings
    )
    nowhere = running[~((running["trained_with"] == "g") & (running["train_size"] == 200) & (running["seed"] > 1))]
    result = analyze(nowhere, response="best_dev")
    assert "shared_encoder" not in result.tables
    assert any("shared_encoder not computed" in w and "g, frozen 3 at n = 200 (1)" in w for w in result.warnings)


def test_the_report_gets_a_shared_encoder_section(tmp_path) -> None:
    from freezestats.report import build_report

    table = _study(3).assign(metric="pearson", role="grid")
    table.to_csv(tmp_path / "runs.csv", index=False)
    result = build_report(
        tmp_path / "report",
        results=tmp_path / "runs.csv",
        formats="html",
        metric="best_dev",
        n_boot=50,
        show_progress=False,
    )
    qmd = (tmp_path / "report" / "report.qmd").read_text()
    section = qmd.split("## Shared encoder", 1)[1].split("## Seed variance", 1)[0]
    assert "### stsb" in section and "freezing 3 layers" in section and "stsb-shared-encoder" in section
    # the group helps stsb at frozen 3 by 0.13 more than alone (TRUE): stated as the gain difference, with its sign
    assert (
        "n = 200, with g: freezing 3 layers helps more in the group than alone; gain together − gain alone = +0.1"
        in section
    )
    assert result is not None


def test_the_figure_shows_every_run_beside_its_settings_mean() -> None:
    from freezestats.report.sections.shared_encoder import shared_encoder_figure

    table = _study(4)
    fig = shared_encoder_figure(table, "stsb", "best_dev", "pearson")
    for ax, size in zip(fig.axes, SIZES, strict=True):
        dots = np.vstack([c.get_offsets() for c in ax.collections])
        at = table[table["train_size"] == size]
        assert len(dots) == len(at)
        np.testing.assert_allclose(np.sort(dots[:, 1]), np.sort(at["best_dev"].to_numpy()))
        means = {line.get_label(): line.get_ydata() for line in ax.lines}
        alone = at[at["trained_with"] == "stsb"].groupby("frozen_layers")["best_dev"].mean()
        np.testing.assert_allclose(means["alone"], alone.loc[[0, 3]].to_numpy())


COVERAGE_BENCH = Path(__file__).resolve().parents[1] / "bench" / "coverage_shared_encoder.py"


@pytest.mark.parametrize(("task", "scenario"), [("stsb", "normal"), ("mrpc", "pile")])
def test_the_coverage_bench_states_each_truth_under_the_label_the_contrast_has(task: str, scenario: str) -> None:
    """bench/coverage_shared_encoder.py computes the true contrasts itself; fed its cells' true means (three
    near-noiseless seeds), the contrasts must return those truths row for row, or its coverage means nothing."""
    bench = load_script(COVERAGE_BENCH)
    cells = bench.cell_parameters(bench.observed_runs(), task, scenario)
    rng = np.random.default_rng(0)
    study = pd.DataFrame(
        [
            {**cell, "task": task, "seed": s, "heldout": cell["truth"] + rng.normal(0, 1e-5), "failed": False}
            for cell in cells[["trained_with", "frozen_layers", "train_size", "truth"]].to_dict("records")
            for s in (1, 2, 3)
        ]
    )
    out = shared_encoder_contrasts(study, "heldout", task=task, adjust="none")
    keys = ["comparison", "trained_with", "frozen_layers", "train_size"]
    merged = out.merge(bench.true_contrasts(cells, task), on=keys)
    assert len(merged) == len(out) == 14
    np.testing.assert_allclose(merged["estimate"], merged["truth"], atol=1e-4)
    if scenario == "pile":  # every cell is a mixture, its truth between the pile and its healthy mean
        assert (cells["p_pile"] > 0).all() and (cells["p_pile"] < 1).all()
        bounds = cells[["pile", "mean"]]
        assert cells["truth"].between(bounds.min(axis=1), bounds.max(axis=1)).all()


def test_a_small_run_of_the_coverage_bench_covers() -> None:
    """40 STS-B-shaped studies (the bench runs 1000): the mean coverage of 14 contrasts stays near 95%."""
    result = load_script(COVERAGE_BENCH).run(["stsb"], ["normal"], 40)
    coverage = pd.DataFrame(result["rows"])["coverage"]
    assert len(coverage) == 14 and 0.88 <= coverage.mean() <= 0.995 and not result["errors"]


@pytest.fixture(scope="module")
def nlme_shared(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """nlme's fit of the shared-encoder fixture: fresh from R when R is here, else the committed JSON."""
    return r_reference(
        "shared_encoder_reference.R",
        "shared_encoder_fixture.csv",
        "shared_encoder_reference.json",
        ("nlme", "emmeans", "jsonlite"),
        tmp_path_factory.mktemp("nlme_shared"),
    )


def test_the_contrasts_match_nlme_with_a_variance_per_cell(nlme_shared: dict) -> None:
    """The model with 12 residual variances (one per setting and size), nlme's varIdent, on STS-B-shaped runs
    (tests/data/make_shared_encoder_fixture.py): every contrast's estimate and SE as emmeans gives them."""
    table = pd.read_csv(Path(__file__).parent / "data" / "shared_encoder_fixture.csv")
    ours = shared_encoder_contrasts(table, "heldout", task="stsb", adjust="none")
    ref = pd.DataFrame(nlme_shared["contrasts"])
    merged = ours.merge(ref, on=["comparison", "trained_with", "frozen_layers", "train_size"], suffixes=("", "_r"))
    assert len(merged) == len(ours) == len(ref) == 14
    np.testing.assert_allclose(merged["estimate"], merged["estimate_r"], atol=1e-6)
    np.testing.assert_allclose(merged["se"], merged["se_r"], rtol=1e-4)
    assert nlme_shared["random_sd"]["seed:train_size"] > 0.002  # the fixture is inside every variance's range


def test_the_fixture_is_what_its_generator_writes() -> None:
    fixture = pd.read_csv(Path(__file__).parent / "data" / "shared_encoder_fixture.csv")
    made = load_script(Path(__file__).parent / "data" / "make_shared_encoder_fixture.py").make_fixture()
    pd.testing.assert_frame_equal(made, fixture, check_dtype=False)

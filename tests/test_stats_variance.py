"""Tests of freezestats.stats.descriptive.variance against independent computations (statistics module, f_oneway)."""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import f_oneway

from freezestats.exceptions import ModelFitError
from freezestats.stats.descriptive.variance import cell_summary, seed_spread, spread_test

REFERENCE_CSV = pd.read_csv(Path(__file__).resolve().parents[1] / "data" / "reference" / "blog2020_roberta_base.csv")


def _runs(values: dict[tuple[int, int], list[float]], task: str = "sst2", **extra: object) -> pd.DataFrame:
    """One grid row per run: ``values[(train_size, frozen_layers)]`` lists the runs' best_dev by seed."""
    rows = []
    for (size, frozen), scores in values.items():
        for seed, score in enumerate(scores, start=1):
            rows.append(
                {
                    "role": "grid",
                    "state": "complete",
                    "task": task,
                    "model": "roberta-base",
                    "n_layers": 12,
                    "train_size": size,
                    "frozen_layers": frozen,
                    "subset_draw": 0,
                    "seed": seed,
                    "metric": "accuracy",
                    "best_dev": score,
                    "final_dev": score - 0.01,
                    "heldout": score - 0.02,
                    **extra,
                }
            )
    return pd.DataFrame(rows)


def _reference_shaped_table(seed: int = 0) -> pd.DataFrame:
    """Five random runs for every (task, train_size, frozen_layers) of the blog's appendix."""
    rng = np.random.default_rng(seed)
    parts = []
    for task, part in REFERENCE_CSV.groupby("task"):
        values = {
            (int(r.train_size), int(r.frozen_layers)): list(rng.normal(r.mean, r.std + 0.01, 5))
            for r in part.itertuples()
        }
        parts.append(_runs(values, task=str(task)))
    return pd.concat(parts, ignore_index=True)


# --------------------------------------------------------------------------------------------------
# cell_summary
# --------------------------------------------------------------------------------------------------


def test_cell_summary_matches_the_statistics_module_on_the_reference_shape() -> None:
    table = _reference_shaped_table()
    out = cell_summary(table, "best_dev")
    assert list(out.columns) == ["task", "train_size", "frozen_layers", "n", "mean", "median", "std", "min", "max"]
    assert len(out) == len(REFERENCE_CSV) == 70
    # Same cells as the blog's appendix, same order as a sorted groupby.
    expected_cells = REFERENCE_CSV.sort_values(["task", "train_size", "frozen_layers"])[
        ["task", "train_size", "frozen_layers"]
    ].to_numpy()
    assert (out[["task", "train_size", "frozen_layers"]].to_numpy() == expected_cells).all()
    for row in out.itertuples():
        runs = table.loc[
            (table.task == row.task)
            & (table.train_size == row.train_size)
            & (table.frozen_layers == row.frozen_layers),
            "best_dev",
        ].tolist()
        assert row.n == 5
        assert row.mean == pytest.approx(statistics.mean(runs), abs=1e-12)
        assert row.median == pytest.approx(statistics.median(runs), abs=1e-12)
        assert row.std == pytest.approx(statistics.stdev(runs), abs=1e-12)  # ddof = 1
        assert (row.min, row.max) == (min(runs), max(runs))


def test_cell_summary_uses_grid_complete_rows_and_drops_missing_responses() -> None:
    table = _runs({(100, 0): [0.8, 0.9, np.nan], (100, 2): [0.7, 0.75, 0.8]})
    search = _runs({(100, 0): [0.1]}).assign(role="search")
    failed_trial = _runs({(100, 2): [0.0]}).assign(state="fail")
    out = cell_summary(pd.concat([table, search, failed_trial], ignore_index=True), "best_dev")
    assert out["n"].tolist() == [2, 3]
    assert out["mean"].tolist() == pytest.approx([0.85, 0.75])
    assert out["n"].dtype == np.int64


def test_cell_summary_single_run_has_nan_std_and_other_responses_work() -> None:
    out = cell_summary(_runs({(50, 0): [0.6]}), response="heldout")
    assert out["n"].iloc[0] == 1 and np.isnan(out["std"].iloc[0])
    assert out["mean"].iloc[0] == pytest.approx(0.58)


def test_cell_summary_keeps_tasks_apart_and_selects_one() -> None:
    table = pd.concat([_runs({(50, 0): [0.6, 0.7]}, task="sst2"), _runs({(50, 0): [0.2, 0.3]}, task="cola")])
    assert cell_summary(table)["task"].tolist() == ["cola", "sst2"]
    only = cell_summary(table, task="sst2")
    assert only["task"].tolist() == ["sst2"] and only["mean"].iloc[0] == pytest.approx(0.65)


# --------------------------------------------------------------------------------------------------
# seed_spread
# --------------------------------------------------------------------------------------------------


def test_seed_spread_chi_square_interval_matches_textbook_values() -> None:
    # Five runs with sample SD 1: chi2_{0.975,4} = 11.1433, chi2_{0.025,4} = 0.484419 (tables), so the 95%
    # interval for sigma is [sqrt(4/11.1433), sqrt(4/0.484419)] = [0.59913, 2.87356].
    runs = np.array([-2.0, -1.0, 0.0, 1.0, 2.0]) / np.sqrt(2.5)
    out = seed_spread(_runs({(100, 0): list(runs)}), "best_dev")
    row = out.iloc[0]
    assert list(out.columns) == ["task", "train_size", "frozen_layers", "n", "std", "ci_low", "ci_high"]
    assert row["std"] == pytest.approx(1.0, abs=1e-12)
    assert row["ci_low"] == pytest.approx(0.59913, abs=1e-5)
    assert row["ci_high"] == pytest.approx(2.87356, abs=1e-5)


def test_seed_spread_scales_with_sd_and_confidence_widens_it() -> None:
    table = _runs({(100, 0): [0.1, 0.2, 0.4], (100, 2): [0.1, 0.5, 0.9]})
    out95, out99 = seed_spread(table, "best_dev"), seed_spread(table, "best_dev", confidence=0.99)
    ratio = out95["ci_high"] / out95["std"]
    assert ratio.iloc[0] == pytest.approx(ratio.iloc[1])  # same n, same multiplier
    assert (out99["ci_low"] < out95["ci_low"]).all() and (out99["ci_high"] > out95["ci_high"]).all()


def test_seed_spread_cell_with_one_run_is_nan_and_all_single_is_an_error() -> None:
    out = seed_spread(_runs({(100, 0): [0.5, 0.6], (100, 2): [0.4]}), "best_dev")
    assert out[["std", "ci_low", "ci_high"]].iloc[1].isna().all()
    assert out[["std", "ci_low", "ci_high"]].iloc[0].notna().all()
    with pytest.raises(ModelFitError, match=r"at least 2 runs per cell, but every cell has n=1"):
        seed_spread(_runs({(100, 0): [0.5], (100, 2): [0.4]}), "best_dev")


def test_seed_spread_zero_spread_gives_a_degenerate_interval() -> None:
    row = seed_spread(_runs({(100, 12): [0.509] * 5}), "best_dev").iloc[0]
    assert (row["std"], row["ci_low"], row["ci_high"]) == (0.0, 0.0, 0.0)


# --------------------------------------------------------------------------------------------------
# spread_test
# --------------------------------------------------------------------------------------------------


def _brown_forsythe_by_hand(groups: list[list[float]]) -> tuple[float, float]:
    """Brown–Forsythe: one-way ANOVA of |y - group median| (Brown & Forsythe 1974)."""
    deviations = [np.abs(np.asarray(g) - np.median(g)) for g in groups]
    result = f_oneway(*deviations)
    return float(result.statistic), float(result.pvalue)


def test_spread_test_matches_anova_of_absolute_deviations_from_the_median() -> None:
    rng = np.random.default_rng(3)
    values = {}
    for size in (50, 100):
        for frozen, sd in ((0, 0.08), (4, 0.02), (12, 0.005)):
            values[(size, frozen)] = list(0.7 + rng.normal(0, sd, 5) + 0.1 * (size == 100))
    out = spread_test(_runs(values), "best_dev")
    assert list(out.columns) == [
        "train_size",
        "statistic",
        "df_between",
        "df_within",
        "p_val",
        "p_holm",
        "n_groups",
        "n",
    ]
    assert out["train_size"].tolist() == [50, 100]
    for row in out.itertuples():
        groups = [values[(row.train_size, k)] for k in (0, 4, 12)]
        statistic, p_val = _brown_forsythe_by_hand(groups)
        assert row.statistic == pytest.approx(statistic, rel=1e-10)
        assert row.p_val == pytest.approx(p_val, rel=1e-10)
        assert (row.df_between, row.df_within, row.n_groups, row.n) == (2.0, 12.0, 3, 15)
    # Holm with two tests: min p doubled, the other max(2 * min, p).
    p = out["p_val"].to_numpy()
    lo, hi = np.argmin(p), np.argmax(p)
    assert out["p_holm"].iloc[lo] == pytest.approx(min(1.0, 2 * p[lo]))
    assert out["p_holm"].iloc[hi] == pytest.approx(min(1.0, max(2 * p[lo], p[hi])))


def test_spread_test_ignores_location_differences() -> None:
    # Same spread, very different means: deviations are taken within cells, so no difference is found.
    base = [0.0, 0.01, 0.03, 0.04, 0.07]
    values = {(100, 0): [0.9 + v for v in base], (100, 12): [0.5 + v for v in base]}
    row = spread_test(_runs(values), "best_dev").iloc[0]
    assert row["statistic"] == pytest.approx(0.0, abs=1e-9)
    assert row["p_val"] == pytest.approx(1.0)


def test_spread_test_by_train_size_and_small_groups() -> None:
    rng = np.random.default_rng(5)
    values = {(size, k): list(rng.normal(0.8, 0.02, 4)) for size in (50, 100, 200) for k in (0, 4)}
    values[(200, 4)] = values[(200, 4)][:2]  # 2 runs: left out of the frozen-depth comparison
    out = spread_test(_runs(values), "best_dev", by="train_size")
    assert out.columns[0] == "frozen_layers" and out["frozen_layers"].tolist() == [0, 4]
    assert out["n_groups"].tolist() == [3, 2]
    statistic, _ = _brown_forsythe_by_hand([values[(50, 4)], values[(100, 4)]])
    assert out["statistic"].iloc[1] == pytest.approx(statistic)
    by_depth = spread_test(_runs(values), "best_dev")
    assert by_depth["n_groups"].tolist() == [2, 2, 1]
    assert by_depth.iloc[2][["statistic", "p_val", "p_holm"]].isna().all()


def test_spread_test_errors() -> None:
    two = pd.concat([_runs({(50, 0): [0.1, 0.2, 0.3]}, task="sst2"), _runs({(50, 0): [0.1, 0.2, 0.3]}, task="cola")])
    with pytest.raises(ModelFitError, match=r"one task at a time, but the table has 2 tasks \['cola', 'sst2'\]"):
        spread_test(two, "best_dev")
    with pytest.raises(ModelFitError, match=r"at least 2 frozen_layers levels with at least 3 runs"):
        spread_test(_runs({(50, 0): [0.1, 0.2], (50, 4): [0.3, 0.4]}), "best_dev")
    with pytest.raises(ModelFitError, match=r"`by` must be 'frozen_layers' or 'train_size', but got by='seed'"):
        spread_test(_runs({(50, 0): [0.1, 0.2, 0.3]}), "best_dev", by="seed")


# --------------------------------------------------------------------------------------------------
# Shared input validation (freezestats.stats.design.checks)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("function", [cell_summary, seed_spread, spread_test])
def test_bad_tables_fail_with_a_message(function) -> None:
    good = _runs({(50, 0): [0.5, 0.6, 0.7], (50, 4): [0.5, 0.55, 0.7]})
    with pytest.raises(ModelFitError, match=r"at least one row, but it is empty"):
        function(good.iloc[:0], "best_dev")
    with pytest.raises(ModelFitError, match=r"must be a pandas DataFrame"):
        function(good.to_dict(), "best_dev")
    with pytest.raises(ModelFitError, match=r"must have the columns \['frozen_layers'\], but they are missing"):
        function(good.drop(columns="frozen_layers"), "best_dev")
    with pytest.raises(ModelFitError, match=r"response='accuracy'; choose one of \['best_dev', 'final_dev', 'heldout'"):
        function(good, "accuracy")
    with pytest.raises(ModelFitError, match=r"must be a numeric score column, but column 'metric'"):
        function(good, "metric")
    with pytest.raises(ModelFitError, match=r"only role == 'grid' rows are analysed, but the table has none"):
        function(good.assign(role="search"), "best_dev")
    with pytest.raises(ModelFitError, match=r"state == 'complete'"):
        function(good.assign(state="running"), "best_dev")
    with pytest.raises(ModelFitError, match=r"task='mrpc' is not in the table's grid rows; tasks present: \['sst2'\]"):
        function(good, "best_dev", task="mrpc")
    with pytest.raises(ModelFitError, match=r"single model, but it has \['a', 'b'\]"):
        function(good.assign(model=["a", "b"] * 3), "best_dev")
    with pytest.raises(ModelFitError, match=r"'frozen_layers' must hold integers, but got frozen_layers=0.5"):
        function(good.assign(frozen_layers=[0.5] * 6), "best_dev")
    with pytest.raises(ModelFitError, match=r"at least one finite value"):
        function(good.assign(best_dev=np.nan), "best_dev")

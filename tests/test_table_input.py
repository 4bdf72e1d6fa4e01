"""Tables from elsewhere: Optuna's spelling of states is read, and every bad table gets one short line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from freezestats.analysis.pipeline import analyze
from freezestats.cli.main import main
from freezestats.stats.design.input_table import MAX_MESSAGE, normalize_results, shorten
from freezestats.stats.simulation.results import simulate_results


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    """A small exported-shaped table (states in freezestats' spelling, one row per trial)."""
    runs = simulate_results(frozen_levels=(0, 2), train_sizes=(50, 200), seeds=4, rng=11)
    return runs.assign(state="complete", trial=range(len(runs)), study="s", metric="accuracy")


def _analyze_file(frame: pd.DataFrame, tmp_path: Path, *args: str) -> tuple[int, str]:
    path = tmp_path / "table.csv"
    frame.to_csv(path, index=False)
    code = main(["analyze", "--results", str(path), "-o", str(tmp_path / "out"), "--n-boot", "50", *args])
    return code, path.name


@pytest.mark.parametrize("state", ["COMPLETE", "complete", "Complete"])
@pytest.mark.parametrize("with_role", [True, False])
def test_states_are_read_in_any_case_with_or_without_role(
    table: pd.DataFrame, state: str, with_role: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    foreign = table.assign(state=state)
    if not with_role:
        foreign = foreign.drop(columns=["role"])
    code, _ = _analyze_file(foreign, tmp_path)
    assert code == 0, capsys.readouterr().err
    reread = pd.read_csv(tmp_path / "out" / "contrasts.csv")
    ours = analyze(table, n_boot=50).tables["contrasts"]
    assert reread["estimate"].to_numpy() == pytest.approx(ours["estimate"].to_numpy())


def test_normalize_reads_pandas_string_columns() -> None:
    """pandas 3 stores text as its ``str`` dtype: the spelling is fixed whatever the dtype."""
    frame = pd.DataFrame({"role": pd.Series(["GRID", "Search"], dtype="string"), "state": ["COMPLETE", "Fail"]})
    out = normalize_results(frame)
    assert out["role"].tolist() == ["grid", "search"] and out["state"].tolist() == ["complete", "fail"]
    assert frame["state"].tolist() == ["COMPLETE", "Fail"]  # the caller's table is left alone


def _bad_tables(table: pd.DataFrame) -> dict[str, tuple[pd.DataFrame, list[str], str]]:
    text = table.assign(heldout=table["heldout"].astype(object))
    text.loc[text.index[5], "heldout"] = "high"
    points = table.assign(heldout=table["heldout"] * 100)
    cola = table.assign(metric="mcc")
    cola.loc[cola.index[2], "heldout"] = -1.5
    return {
        "no complete runs": (table.assign(state="FAIL"), [], "no complete runs: the 16 grid rows have state fail"),
        "a required column": (table.drop(columns=["failed"]), [], "lacks column(s) ['failed']"),
        "text in the metric": (text, [], "Column 'heldout' must hold numbers, but row 5 has 'high'"),
        "points, not a fraction": (points, [], "must be in [0, 1] for metric 'accuracy'"),
        "MCC below -1": (cola, [], "must be in [-1, 1] for metric 'mcc', but row 2 has -1.5"),
        "duplicated trials": (pd.concat([table, table.iloc[:2]]), [], "repeats trials: 2 trial(s)"),
        "one seed per cell": (table[table["seed"] == 1], [], "one run per cell (seed 1), but the mixed model"),
        "a task it lacks": (table, ["--task", "cola"], "Task(s) ['cola'] are not in the results table"),
        "a reference it lacks": (table, ["--reference", "4"], "--reference 4 is not a frozen level of task"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "no complete runs",
        "a required column",
        "text in the metric",
        "points, not a fraction",
        "MCC below -1",
        "duplicated trials",
        "one seed per cell",
        "a task it lacks",
        "a reference it lacks",
    ],
)
def test_a_bad_table_gets_one_short_line(
    table: pd.DataFrame, case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frame, args, expected = _bad_tables(table)[case]
    code, _ = _analyze_file(frame, tmp_path, *args)
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert expected in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert len(err) <= MAX_MESSAGE + len("freezestats analyze: error: ")
    assert not (tmp_path / "out").exists()  # nothing written


def test_one_seed_is_refused_by_every_model(table: pd.DataFrame, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """OLS too: with every depth × size term and one run per cell it has no residual degrees of freedom."""
    code, _ = _analyze_file(table[table["seed"] == 1], tmp_path, "--model", "ols")
    assert code == 2 and "one run per cell (seed 1), but the ols model" in capsys.readouterr().err


def test_steps_that_fail_for_one_reason_say_it_once(table: pd.DataFrame) -> None:
    """Every step failing alike reads as the reason once, not once per step."""
    from freezestats.analysis.pipeline import _no_model_reason

    reason = "a seed random effect needs at least 2 seeds"
    warnings = [
        f"sst2: mixed model (all_runs) not fitted: {reason}",
        f"sst2: mixed model (without_failed) not fitted: {reason}",
        f"sst2: interaction_test not computed: {reason}",
    ]
    assert _no_model_reason(warnings) == f"No model could be fitted: {reason}"
    assert len(shorten("word " * 200)) <= MAX_MESSAGE

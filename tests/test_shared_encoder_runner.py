"""A study with a task group: its cells run beside the single-task ones, one exported row per (trial, task)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from _factories import simple_spec, write_spec

from freezestats.analysis.pipeline import _trained_alone
from freezestats.cli.main import main
from freezestats.results.export import RESULT_COLUMNS
from freezestats.spec import parse_spec
from freezestats.study.cells import grid_cells

GROUP = {"name": "sst2+stsb", "tasks": ["sst2", "stsb"], "freeze_for": ["stsb"]}


def _spec(model: str = "minilm-l6") -> dict:
    spec = simple_spec(
        model=model,
        grid={"frozen_layers": [0, 1], "train_sizes": [32], "seeds": [1]},
        training={"epochs": 1, "eval_every_epochs": 0.5, "max_length": 64},
    )
    return {**spec, "groups": [GROUP]}


def test_group_cells_sit_beside_the_single_task_cells() -> None:
    spec = parse_spec(_spec())
    cells = grid_cells(spec, {"sst2": 1000, "stsb": 1000})
    assert [(c.task, c.frozen_layers) for c in cells] == [("sst2", 0), ("sst2", 1), ("sst2+stsb", 0), ("sst2+stsb", 1)]
    assert cells[0].key == "sst2|frozen=0|n=32|draw=0|seed=1"  # single-task keys as before
    assert cells[2].key == "sst2+stsb|frozen=0|n=32|draw=0|seed=1"


def test_a_group_study_runs_and_exports_a_row_per_trial_and_task(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec_path = write_spec(tmp_path, _spec(str(tiny_model)))
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    assert (
        main(["run", "--study", str(spec_path), "--storage", storage, "--data-dir", str(glue_dir), "--no-progress"])
        == 0
    )
    assert "4/4 cells complete, 0 failed" in capsys.readouterr().out
    out = tmp_path / "results.parquet"
    assert main(["export", "--storage", storage, "-o", str(out)]) == 0
    table = pd.read_parquet(out)
    assert list(table.columns[: len(RESULT_COLUMNS)]) == RESULT_COLUMNS
    assert len(table) == 6 and table["trial"].nunique() == 4
    grouped = table[table["trained_with"] == "sst2+stsb"]
    assert sorted(grouped["task"]) == ["sst2", "sst2", "stsb", "stsb"]
    assert set(grouped.loc[grouped.task == "stsb", "metric"]) == {"pearson"}
    assert set(grouped.loc[grouped.task == "sst2", "metric"]) == {"accuracy"}
    assert grouped.groupby("trial")["predictions_artifact"].nunique().eq(2).all()  # each task its own predictions
    assert table.loc[table.trained_with == "sst2", "task"].eq("sst2").all()
    alone, n_grouped = _trained_alone(table)
    assert n_grouped == 4 and alone["trained_with"].eq(alone["task"]).all()

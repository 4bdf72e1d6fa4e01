"""The trial record: one definition of the export's columns, what the runner stores, and the README's table."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from freezestats.results.export import RESULT_COLUMNS
from freezestats.results.record import EXPORT_COLUMNS, TrialRecord
from freezestats.study.cells import Cell

README = Path(__file__).resolve().parents[1] / "docs" / "reference.md"


def _readme_columns() -> list[str]:
    """The first column of the table under "## What every trial records", in order."""
    section = README.read_text(encoding="utf-8").split("## What every trial records", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    if len(rows) < 3:
        pytest.fail("README.md has no column table under '## What every trial records'.")
    return [re.sub(r"`", "", row.split("|")[1]).strip() for row in rows[2:]]  # skip the header and the rule


def test_the_export_columns_are_the_records_exported_fields() -> None:
    assert RESULT_COLUMNS == EXPORT_COLUMNS
    assert RESULT_COLUMNS[:5] == ["study", "trial", "state", "role", "task"]
    assert RESULT_COLUMNS[-11:-6] == ["order_seed", "trained_with", "pair_encoding", "arm", "arm_level"]
    assert RESULT_COLUMNS[-6:-3] == ["fuse", "fuse_k", "fusion"]
    assert RESULT_COLUMNS[-3:] == ["pool_score", "n_pool", "pool_artifact"]  # added last: the order is a contract
    assert len(set(RESULT_COLUMNS)) == len(RESULT_COLUMNS)


def test_every_export_column_is_documented_in_the_readme_and_nothing_else() -> None:
    documented = _readme_columns()
    assert sorted(set(RESULT_COLUMNS) - set(documented)) == [], "export columns missing from README's table"
    assert sorted(set(documented) - set(RESULT_COLUMNS)) == [], "README documents columns the export lacks"
    assert documented == RESULT_COLUMNS  # and in the export's order


def test_the_runner_stores_the_run_fields_and_leaves_the_trials_own_to_it() -> None:
    run_fields = [f.name for f in fields(TrialRecord) if f.metadata["source"] == "run"]
    values = {name: i for i, name in enumerate(run_fields)}
    record = TrialRecord(**values)
    assert record.attrs() == values  # every run field, and only those
    trial_fields = {f.name for f in fields(TrialRecord) if f.metadata["source"] == "trial"}
    cell = Cell(task="sst2", frozen_layers=0, train_size=32, subset_draw=0, seed=1, learning_rate=5e-5)
    # What results.results_table reads from the trial itself, and what the storage layer writes on it.
    armed = Cell(task="sst2", frozen_layers=0, train_size=32, subset_draw=0, seed=1, learning_rate=5e-5, arm="freeze")
    cell_params = {*cell.params(), *armed.params(), "arm"}  # a cell of a spec with [[arms]]: arm (attr), arm_level
    stored_by_the_worker = {"fuse", "fuse_k", "fusion"}  # the fused worker's claim, on the trial itself
    expected = {"study", "trial", "state", "role", *cell_params, "fail_reason", "reused_from_trial"}
    assert trial_fields == expected | stored_by_the_worker
    assert all(getattr(record, name) is None for name in trial_fields)
    with pytest.raises(TypeError):
        TrialRecord(**{k: v for k, v in values.items() if k != "best_dev"})  # a run field cannot be forgotten


def test_a_table_exported_before_freezing_was_renamed_reads_strategy_as_freezing(tmp_path: Path) -> None:
    """`strategy` (the freezing rule, before it was renamed) is read as `freezing`, with one note naming it."""
    import pandas as pd

    from freezestats.analysis.pipeline import load_results
    from freezestats.exceptions import RenamedWarning

    path = tmp_path / "old.csv"
    pd.DataFrame({"task": ["sst2", "sst2"], "strategy": ["freeze", None], "arm": ["freeze", "lora"]}).to_csv(path)
    with pytest.warns(RenamedWarning, match=rf"deprecated results column `strategy`: now `freezing` \({path}\)"):
        table = load_results(results=path)
    assert "strategy" not in table and table["freezing"].iloc[0] == "freeze"

"""``grid.pair_encoding`` in the spec, the cells and a run: an axis of pair tasks only, recorded per row."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from _factories import simple_spec, write_spec

from freezestats.analysis.pipeline import _cross_encoded
from freezestats.cli.main import main
from freezestats.exceptions import SpecError
from freezestats.spec import StudySpec, parse_spec
from freezestats.study.cells import grid_cells
from freezestats.study.trials import _not_an_extension

POOLS = {"sst2": 1000, "mrpc": 1000, "stsb": 1000}


def _spec(tasks: list[str] | None = None, groups: list[dict] | None = None, **grid: object) -> dict:
    spec = simple_spec(tasks=tasks or ["sst2", "mrpc"], grid={"frozen_layers": [0, 2], "train_sizes": [32], **grid})
    return {**spec, "groups": groups} if groups else spec


def test_the_default_keeps_the_spec_hash_and_the_cell_keys() -> None:
    plain = parse_spec(_spec())
    explicit = parse_spec(_spec(pair_encoding=["cross"]))
    assert explicit.spec_hash == plain.spec_hash and "pair_encoding" not in plain.to_dict()["grid"]
    assert [c.key for c in grid_cells(explicit, POOLS)] == [c.key for c in grid_cells(plain, POOLS)]
    assert grid_cells(plain, POOLS)[0].key == "sst2|frozen=0|n=32|draw=0|seed=1"


def test_bi_multiplies_the_pair_tasks_cells_only() -> None:
    spec = parse_spec(_spec(pair_encoding=["cross", "bi"]))
    cells = grid_cells(spec, POOLS)
    assert [(c.task, c.frozen_layers, c.pair_encoding) for c in cells] == [
        ("sst2", 0, "cross"),
        ("sst2", 2, "cross"),
        ("mrpc", 0, "cross"),
        ("mrpc", 0, "bi"),
        ("mrpc", 2, "cross"),
        ("mrpc", 2, "bi"),
    ]
    assert cells[3].key == "mrpc|frozen=0|n=32|draw=0|seed=1|pair=bi"
    assert cells[3].params()["pair_encoding"] == "bi" and "pair_encoding" not in cells[2].params()
    assert spec.spec_hash != parse_spec(_spec()).spec_hash
    assert StudySpec.from_stored(spec.to_dict()).spec_hash == spec.spec_hash


def test_bi_at_one_frozen_level_and_in_groups() -> None:
    groups = [{"name": "sst2+mrpc", "tasks": ["sst2", "mrpc"]}, {"name": "sst2-only", "tasks": ["sst2"]}]
    spec = parse_spec(_spec(groups=groups, pair_encoding=["cross", "bi"], bi_frozen_layers=[2]))
    bi = [(c.task, c.frozen_layers) for c in grid_cells(spec, POOLS) if c.pair_encoding == "bi"]
    assert bi == [("mrpc", 2), ("sst2+mrpc", 2)]  # a group without a pair task has no bi cells
    assert StudySpec.from_stored(spec.to_dict()) == spec


@pytest.mark.parametrize(
    ("grid", "tasks", "message"),
    [
        ({"pair_encoding": ["late"]}, None, r"`grid.pair_encoding\[0\]` must be one of \['cross', 'bi'\], but got"),
        ({"pair_encoding": ["bi"]}, ["sst2"], "asks for 'bi', but no task of the study .* is a sentence-pair task"),
        ({"pair_encoding": ["cross", "bi"], "bi_frozen_layers": [1]}, None, "must be one of `grid.frozen_layers`"),
        ({"bi_frozen_layers": [2]}, None, "`grid.bi_frozen_layers` is set but `grid.pair_encoding` is not"),
        ({"pair_encoding": ["bi"], "bi_frozen_layers": [2]}, None, "must be \\['cross', 'bi'\\]"),
        ({"pair_encoding": ["bi", "bi"]}, None, "must not repeat values"),
    ],
)
def test_bad_pair_encodings_fail_in_one_line(grid: dict, tasks: list[str] | None, message: str) -> None:
    with pytest.raises(SpecError, match=message) as err:
        parse_spec(_spec(tasks=tasks, **grid))
    assert "\n" not in str(err.value)


def test_bi_with_a_learning_rate_search_is_refused() -> None:
    raw = {**_spec(pair_encoding=["cross", "bi"]), "lr_search": {"mode": "per-cell", "rates": [1e-4]}}
    with pytest.raises(SpecError, match=r"'bi' cells run at `training\.learning_rate`"):
        parse_spec(raw)


def test_extending_may_add_bi_but_not_drop_it() -> None:
    plain = parse_spec(_spec()).to_dict()
    both = parse_spec(_spec(pair_encoding=["cross", "bi"])).to_dict()
    one_level = parse_spec(_spec(pair_encoding=["cross", "bi"], bi_frozen_layers=[2])).to_dict()
    assert _not_an_extension(plain, both) == [] and _not_an_extension(one_level, both) == []
    assert _not_an_extension(both, plain) == ["grid.pair_encoding drops ['bi']", "grid.bi_frozen_layers drops [0, 2]"]
    assert _not_an_extension(both, one_level) == ["grid.bi_frozen_layers drops [0]"]


def test_a_bi_study_runs_and_every_row_records_its_encoding(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = simple_spec(
        model=str(tiny_model),
        tasks=["mrpc"],
        grid={"frozen_layers": [0, 1], "train_sizes": [32], "seeds": [1], "pair_encoding": ["cross", "bi"]},
        training={"epochs": 1, "eval_every_epochs": 0.5, "max_length": 64},
    )
    raw["grid"]["bi_frozen_layers"] = [1]
    raw["groups"] = [{"name": "sst2+mrpc", "tasks": ["sst2", "mrpc"]}]
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    args = ["run", "--study", str(write_spec(tmp_path, raw)), "--storage", storage, "--data-dir", str(glue_dir)]
    assert main([*args, "--no-progress"]) == 0
    assert "6/6 cells complete, 0 failed" in capsys.readouterr().out
    out = tmp_path / "results.parquet"
    assert main(["export", "--storage", storage, "-o", str(out)]) == 0
    table = pd.read_parquet(out)
    bi = table[table["pair_encoding"] == "bi"]
    assert sorted(zip(bi["task"], bi["trained_with"], bi["frozen_layers"], strict=True)) == [
        ("mrpc", "mrpc", 1),
        ("mrpc", "sst2+mrpc", 1),
        ("sst2", "sst2+mrpc", 1),  # the group's single-sentence task carries the group's setting
    ]
    assert set(table["pair_encoding"]) == {"cross", "bi"} and len(table) == 9
    cross, n_bi = _cross_encoded(table)
    assert n_bi == 3 and cross["pair_encoding"].eq("cross").all()

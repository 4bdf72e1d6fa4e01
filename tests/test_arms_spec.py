"""``[[arms]]`` in the spec: parsing and errors, stored form, cells and their keys, and a run that records arms."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from _factories import simple_spec

from freezestats.exceptions import SpecError
from freezestats.spec import StudySpec, parse_spec
from freezestats.study.cells import Cell, grid_cells

ARMS = [
    {"kind": "freeze", "frozen_layers": [-1, 0, 2]},
    {"kind": "reinit", "top_layers": [1, 2]},
]


def _arms_spec(arms: list[dict] | None = None, **sections: Any) -> dict:
    spec = simple_spec(**sections)
    del spec["grid"]["frozen_layers"]
    spec["arms"] = ARMS if arms is None else arms
    return spec


def test_a_single_arm_spec_keeps_its_stored_form_hash_and_cell_keys() -> None:
    spec = parse_spec(simple_spec())
    assert not spec.has_arms and "arms" not in spec.to_dict()
    (variant,) = spec.arm_variants()
    assert (variant.name, variant.kind, variant.levels) == ("freeze", "freeze", (0, 2))
    cells = grid_cells(spec, {"sst2": 1000})
    assert all(cell.arm is None for cell in cells)
    assert cells[0].key == "sst2|frozen=0|n=32|draw=0|seed=1"
    assert set(cells[0].params()) == {"task", "frozen_layers", "train_size", "subset_draw", "seed", "learning_rate"}


def test_arms_are_parsed_with_their_rates_and_stored_back_to_themselves() -> None:
    spec = parse_spec(_arms_spec())
    assert spec.has_arms and spec.grid.frozen_layers == ()
    freeze, reinit = spec.arm_variants()
    assert (freeze.name, freeze.levels, freeze.options) == ("freeze", (-1, 0, 2), {"freezing": "freeze"})
    assert (reinit.name, reinit.levels, reinit.learning_rate) == ("reinit", (1, 2), spec.training.learning_rate)
    again = StudySpec.from_stored(spec.to_dict())
    assert again.arms == spec.arms and again.spec_hash == spec.spec_hash
    assert "frozen_layers" not in spec.to_dict()["grid"]
    rated = parse_spec(_arms_spec([{"kind": "reinit", "top_layers": [1], "learning_rate": 2e-5}]))
    assert rated.arm_variants()[0].learning_rate == 2e-5 and rated.spec_hash != spec.spec_hash


def test_arm_cells_cross_every_arm_level_with_the_same_sizes_draws_and_seeds() -> None:
    spec = parse_spec(_arms_spec(grid={"seeds": [1, 2], "subset_draws": 2}))
    cells = grid_cells(spec, {"sst2": 1000})
    per_arm = {(c.arm, c.level) for c in cells}
    assert per_arm == {("freeze", -1), ("freeze", 0), ("freeze", 2), ("reinit", 1), ("reinit", 2)}
    shared = {
        arm: {(c.train_size, c.subset_draw, c.seed) for c in cells if c.arm == arm} for arm in ("freeze", "reinit")
    }
    assert shared["freeze"] == shared["reinit"] and len(shared["freeze"]) == 2 * 2 * 2
    assert len({c.key for c in cells}) == len(cells) == 5 * 8
    cell = next(c for c in cells if c.arm == "reinit")
    assert cell.key == "sst2|arm=reinit|level=1|n=32|draw=0|seed=1"
    assert cell.attrs() == {"cell_key": cell.key, "role": "grid", "arm": "reinit"}  # not a param: --extend adds arms
    assert cell.params() == {
        "task": "sst2",
        "arm_level": 1,
        "train_size": 32,
        "subset_draw": 0,
        "seed": 1,
        "learning_rate": spec.training.learning_rate,
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"arms": []}, r"`arms` must be a non-empty array of tables"),
        ({"arms": [{"frozen_layers": [0]}]}, r"`arms\[0\]\.kind` is required"),
        ({"arms": [{"kind": "frezee", "frozen_layers": [0]}]}, r"Unknown arm 'frezee'.*\(arms\[0\]\.kind"),
        ({"arms": [{"kind": "reinit", "top_layers": [1], "rank": 4}]}, r"Unknown key 'arms\[0\]\.rank'"),
        ({"arms": [{"kind": "reinit", "top_layers": [-1]}]}, r"`arms\[0\]\.top_layers\[0\]` must be an integer >= 0"),
        ({"arms": [{"kind": "reinit", "top_layers": []}]}, r"`arms\[0\]\.top_layers` must be a non-empty list"),
        ({"arms": [{"kind": "reinit", "top_layers": [1, 1]}]}, r"`arms\[0\]\.top_layers` must not repeat"),
        (
            {"arms": [{"kind": "reinit", "top_layers": [1], "learning_rate": 0}]},
            r"`arms\[0\]\.learning_rate` must be > 0",
        ),
        ({"arms": [{"kind": "freeze", "frozen_layers": [0], "freezing": 3}]}, r"`arms\[0\]\.freezing` must be a str"),
        ({"arms": [ARMS[1], ARMS[1]]}, r"`arms\[1\]` repeats the arm name 'reinit'"),
        ({"grid": {"frozen_layers": [0]}}, r"`grid\.frozen_layers` must be left out when the spec has \[\[arms\]\]"),
        ({"lr_search": {"mode": "full-model", "rates": [1e-5]}}, r"`lr_search\.mode` must be 'none' with \[\[arms\]\]"),
        ({"model": {"freezing": "other"}}, r"`model\.freezing` must be left out with \[\[arms\]\]"),
    ],
)
def test_bad_arms_are_one_line_spec_errors_naming_the_field(change: dict, message: str) -> None:
    spec = _arms_spec()
    for key, value in change.items():
        if isinstance(value, dict):
            spec[key] = {**spec.get(key, {}), **value}
        else:
            spec[key] = value
    with pytest.raises(SpecError, match=message) as info:
        parse_spec(spec)
    assert "\n" not in str(info.value)


def test_two_tables_of_one_kind_are_told_apart_by_name() -> None:
    spec = parse_spec(_arms_spec([ARMS[1], {**ARMS[1], "name": "reinit_slow", "learning_rate": 1e-5}]))
    assert [v.name for v in spec.arm_variants()] == ["reinit", "reinit_slow"]


def test_a_study_with_arms_runs_and_exports_arm_and_level(tmp_path: Path, tiny_model: Path, glue_dir: Path) -> None:
    from freezestats.results.export import results_table
    from freezestats.runner import run_study
    from freezestats.study.trials import load_study, open_storage

    spec = parse_spec(
        _arms_spec(
            [{"kind": "freeze", "frozen_layers": [1]}, {"kind": "reinit", "top_layers": [1], "learning_rate": 1e-4}],
            model=str(tiny_model),
            grid={"train_sizes": [32], "seeds": [1]},
        )
    )
    storage = f"sqlite:///{tmp_path / 'arms.db'}"
    run_study(spec, storage, data_dir=glue_dir, show_progress=False)
    table = results_table(load_study(open_storage(storage), spec.name))
    assert sorted(zip(table["arm"], table["arm_level"], strict=True)) == [("freeze", 1), ("reinit", 1)]
    freeze = table[table["arm"] == "freeze"].iloc[0]
    reinit = table[table["arm"] == "reinit"].iloc[0]
    assert freeze["frozen_layers"] == 1 and freeze["freezing"] == "freeze" and freeze["learning_rate"] == 5e-5
    assert reinit["frozen_layers"] is None or reinit["frozen_layers"] != reinit["frozen_layers"]  # empty
    assert reinit["learning_rate"] == 1e-4 and reinit["trainable_params"] == reinit["total_params"]
    run_study(spec, storage, data_dir=glue_dir, show_progress=False)  # resumes: nothing runs twice
    assert len(results_table(load_study(open_storage(storage), spec.name))) == 2
    from freezestats.results.export import export_results

    exported = export_results(storage, tmp_path / "results.parquet")
    back = pd.read_parquet(tmp_path / "results.parquet")
    assert list(back["arm"]) == list(exported["arm"]) and back["arm_level"].tolist() == [1, 1]


def test_a_cell_with_an_arm_is_not_a_single_arm_cell() -> None:
    plain = Cell("sst2", 1, 32, 0, 1, 5e-5)
    armed = Cell("sst2", 1, 32, 0, 1, 5e-5, arm="freeze")
    assert plain.key != armed.key and plain.level == armed.level == 1
    assert "learning_rate" not in Cell("sst2", 6, 32, 0, 1, None, arm="probe-mean").params()


def test_analyze_compares_arms_instead_of_pooling_them() -> None:
    """A table of several arms gets the across-arm model (arm_contrasts) and the freeze-depth model sees
    the freeze arm's rows only; a table with no full fine-tuning to compare with is refused in one line."""
    from freezestats.analysis.pipeline import analyze
    from freezestats.exceptions import ModelFitError
    from freezestats.stats.simulation.results import simulate_results

    table = simulate_results(seeds=3, frozen_levels=(0, 2, 4), train_sizes=(50, 100), rng=1)
    assert set(table["arm"]) == {"freeze"}  # a single-arm table is the freeze model's, as before
    mixed = table.copy()
    mixed.loc[mixed["frozen_layers"] == 4, ["arm", "frozen_layers"]] = ["lora", None]  # arm_level 4: the rank
    result = analyze(mixed, n_boot=10)
    assert set(result.tables["contrasts"]["frozen_layers"]) == {2}
    levels = result.tables["arm_contrasts"]
    assert set(zip(levels["arm"], levels["arm_level"], strict=True)) == {("freeze", 2), ("lora", 4)}
    only_lora = table.assign(arm="lora", frozen_layers=None)
    with pytest.raises(ModelFitError) as info:
        analyze(only_lora, n_boot=10)
    assert "\n" not in str(info.value) and "lora" in str(info.value)


def test_validate_lists_the_arms_and_their_cells(glue_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from freezestats.cli.main import main

    assert main(["validate", "arms-minilm", "--data-dir", str(glue_dir), "--list-cells"]) == 0
    out = capsys.readouterr().out
    assert "arms freeze (-1, 0, 2, 4, 6), reinit (1, 2, 3), lora (4, 16), probe-mean (2, 4, 'last')" in out
    assert "960 trials" in out and "cola|arm=probe-cls|level=6|n=1000|draw=0|seed=6  no lr" in out
    assert "sst2|arm=lora|level=16|n=50|draw=0|seed=1  lr=0.0005" in out


def test_levels_beyond_the_model_are_refused_naming_the_table() -> None:
    from freezestats.arms import arms_for_spec
    from freezestats.runner._prepare import _check_levels

    spec = parse_spec(_arms_spec([ARMS[0], {"kind": "reinit", "top_layers": [1, 7]}]))
    arms = arms_for_spec(spec)
    assert set(arms) == {"freeze", "reinit"}
    with pytest.raises(
        SpecError, match=r"`arms\[1\]\.top_layers` must hold levels of arm 'reinit' .*\(L=6: 0\.\.6\), but got 7"
    ):
        _check_levels(arms, spec, 6)
    _check_levels(arms, spec, 7)


def test_extend_may_add_arm_tables_and_levels_but_not_change_an_arm(
    tmp_path: Path, tiny_model: Path, glue_dir: Path
) -> None:
    from freezestats.exceptions import StorageError
    from freezestats.results.export import results_table
    from freezestats.runner import run_study
    from freezestats.study.trials import load_study, open_storage

    def spec(arms: list[dict]) -> StudySpec:
        return parse_spec(_arms_spec(arms, model=str(tiny_model), grid={"train_sizes": [32], "seeds": [1]}))

    storage = f"sqlite:///{tmp_path / 'extend.db'}"
    run_study(spec([{"kind": "freeze", "frozen_layers": [2]}]), storage, data_dir=glue_dir, show_progress=False)
    first = {t.user_attrs["cell_key"]: t.number for t in load_study(open_storage(storage), None).get_trials()}
    bigger = spec([{"kind": "freeze", "frozen_layers": [2, 1]}, {"kind": "reinit", "top_layers": [1]}])
    run_study(bigger, storage, data_dir=glue_dir, show_progress=False, extend=True)
    study = load_study(open_storage(storage), None)
    after = {t.user_attrs["cell_key"]: t.number for t in study.get_trials()}
    assert len(after) == 3 and all(after[key] == number for key, number in first.items())  # nothing re-run
    assert sorted(results_table(study)["arm"]) == ["freeze", "freeze", "reinit"]
    for changed, message in (
        ([{"kind": "freeze", "frozen_layers": [2, 1], "learning_rate": 1e-4}], r"arms\[0\] \(freeze\) changes"),
        ([{"kind": "freeze", "frozen_layers": [1]}, {"kind": "reinit", "top_layers": [1]}], r"arms\[0\] drops"),
    ):
        with pytest.raises(StorageError, match=message):
            run_study(spec(changed), storage, data_dir=glue_dir, show_progress=False, extend=True)

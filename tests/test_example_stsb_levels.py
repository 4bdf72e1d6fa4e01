"""The user-task worked example (examples/stsb-levels): the committed study is the committed spec's, on the data
that ``make_data.py`` writes, and its README's table is what the runs give.

``make_data.py`` is re-run here into a temporary folder: its files must hash to what the study stored, so a fresh
clone regenerates exactly the data the study ran on (and may resume it).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from _scripts import load_script

from freezestats.results.export import results_table
from freezestats.results.item_predictions import study_item_predictions
from freezestats.spec import load_spec
from freezestats.study.trials import load_study, open_storage

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "stsb-levels"
STORAGE = f"sqlite:///{EXAMPLE / 'study.db'}"


def _study():
    return load_study(open_storage(STORAGE, must_exist=True), None)


def test_the_committed_study_ran_the_committed_spec_to_the_end() -> None:
    study = _study()
    assert study.user_attrs["spec_hash"] == load_spec(EXAMPLE / "spec.toml").spec_hash
    runs = results_table(study)
    assert len(runs) == 18 and set(runs["task"]) == {"stsb-levels"} and set(runs["precision"]) == {"bf16"}
    assert runs.groupby(["frozen_layers", "train_size"])["seed"].nunique().eq(3).all()
    assert set(runs["metric"]) == {"accuracy"} and "final_macro_f1" in runs.columns
    assert study.user_attrs["data_identity"]["stsb-levels"]["labels"] == ["low", "mid", "high"]


def test_make_data_writes_the_files_the_study_ran_on(glue_dir: Path, tmp_path: Path) -> None:
    load_script(EXAMPLE / "make_data.py").main(glue_dir, tmp_path)
    stored = _study().user_attrs["data_identity"]["stsb-levels"]["files"]
    for split in ("train", "validation"):
        digest = hashlib.sha256((tmp_path / f"{split}.csv").read_bytes()).hexdigest()
        assert stored[split] == {"path": f"data/{split}.csv", "sha256": digest}


def test_the_items_keep_the_pairs_ids_and_class_names() -> None:
    items = study_item_predictions(STORAGE)
    assert len(items) == 18 * 600 and set(items["label_name"]) == {"low", "mid", "high"}
    assert items["row_id"].between(0, 1499).all()  # STS-B dev's idx
    assert (items["label_name"].map({"low": 0, "mid": 1, "high": 2}) == items["label"]).all()


def test_the_readme_table_is_what_the_runs_give() -> None:
    runs = results_table(_study())
    means = runs.groupby(["train_size", "frozen_layers"])[["heldout", "final_macro_f1"]].mean()
    readme = (EXAMPLE / "README.md").read_text()
    for n in (100, 300):
        for column, name in (("heldout", "accuracy"), ("final_macro_f1", "macro-F1")):
            row = " | ".join(f"{100 * means.loc[(n, k), column]:.1f}" for k in (0, 3, 6))
            assert f"| {n} ({name}) | {row} |" in readme

"""Task registry contract and data loading: local parquet, GLUE TSVs, bundled demo, hub fallback, bad data."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from freezestats.exceptions import DataError, SpecError
from freezestats.tasks import available_tasks, get_task
from freezestats.tasks.data import load_task_data

GLUE_SIZES = {  # rows per split, from ../shared/data/glue/README.md
    "sst2": (67349, 872),
    "cola": (8551, 1043),
    "mrpc": (3668, 408),
    "stsb": (5749, 1500),
    "rte": (2490, 277),
}


def test_registry_has_the_glue_tasks_and_the_demo() -> None:
    assert set(available_tasks()) == {*GLUE_SIZES, "agreement"}
    with pytest.raises(SpecError, match=r"Unknown task 'colaa'\. Did you mean: cola\?"):
        get_task("colaa")


@pytest.mark.parametrize("name", sorted(GLUE_SIZES))
def test_every_glue_task_loads_from_the_local_folder(name: str, glue_dir: Path) -> None:
    task = get_task(name)
    data = load_task_data(task, glue_dir)
    assert (len(data.train), len(data.validation)) == GLUE_SIZES[name]
    assert list(data.train.columns) == [*task.text_columns, "label"]
    assert data.source == f"local:{glue_dir / name}"
    if task.is_regression:
        assert data.train["label"].between(0, 5).all()
    else:
        assert set(np.unique(data.train_labels)) == set(range(task.num_labels))
    assert task.metrics and task.version >= 1


def test_environment_variable_is_the_default_data_dir(glue_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FREEZESTATS_DATA", str(glue_dir))
    assert load_task_data(get_task("rte")).source == f"local:{glue_dir / 'rte'}"


def test_demo_task_ships_with_the_package() -> None:
    data = load_task_data(get_task("agreement"), None)
    assert data.source == "bundled:agreement"
    assert len(data.train) >= 2000 and len(data.validation) >= 500
    assert set(data.train_labels) == {0, 1}
    assert not set(data.train["sentence"]) & set(data.validation["sentence"])


def _write_tsv(path: Path, rows: list[list[str]], header: list[str] | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar=None, quotechar=None)
        if header:
            writer.writerow(header)
        writer.writerows(rows)


def test_glue_tsv_layout(tmp_path: Path, glue_dir: Path) -> None:
    """GLUE's original files: SST-2 with a header, CoLA without one, RTE with string labels."""
    sst = pd.read_parquet(glue_dir / "sst2" / "validation.parquet").head(20)
    rows = [[s, str(lab)] for s, lab in zip(sst["sentence"], sst["label"], strict=True)]
    _write_tsv(tmp_path / "SST-2" / "train.tsv", rows, ["sentence", "label"])
    _write_tsv(tmp_path / "SST-2" / "dev.tsv", rows[:5], ["sentence", "label"])
    data = load_task_data(get_task("sst2"), tmp_path)
    assert data.source.startswith("glue-tsv:")
    assert data.train["sentence"].tolist() == sst["sentence"].tolist()  # trailing spaces and quotes kept
    assert data.train_labels.tolist() == sst["label"].tolist()

    cola = [["gj04", "1", "", "The sailors rode the breeze clear of the rocks."], ["gj04", "0", "*", "Sailors rocks."]]
    _write_tsv(tmp_path / "CoLA" / "train.tsv", cola, None)
    _write_tsv(tmp_path / "CoLA" / "dev.tsv", cola, None)
    data = load_task_data(get_task("cola"), tmp_path)
    assert data.train["sentence"].tolist()[1] == "Sailors rocks." and data.train_labels.tolist() == [1, 0]

    rte = [["0", "A man sleeps.", "A person sleeps.", "entailment"], ["1", "A cat.", "A dog.", "not_entailment"]]
    _write_tsv(tmp_path / "RTE" / "train.tsv", rte, ["index", "sentence1", "sentence2", "label"])
    _write_tsv(tmp_path / "RTE" / "dev.tsv", rte, ["index", "sentence1", "sentence2", "label"])
    assert load_task_data(get_task("rte"), tmp_path).train_labels.tolist() == [0, 1]


def _write_split(folder: Path, train: pd.DataFrame, validation: pd.DataFrame) -> None:
    folder.mkdir(parents=True)
    train.to_parquet(folder / "train.parquet")
    validation.to_parquet(folder / "validation.parquet")


GOOD = pd.DataFrame({"sentence": ["a", "b", "c", "d"], "label": [0, 1, 0, 1]})
BAD_DATA = [
    ("missing column", GOOD.rename(columns={"sentence": "text"}), GOOD, "lacks column(s) ['sentence']"),
    ("non-integer labels", GOOD.assign(label=[0, 1, 0.5, 1]), GOOD, "non-integer labels"),
    ("label out of range", GOOD.assign(label=[0, 1, 2, 1]), GOOD, "Labels must lie in 0..1"),
    ("one class only", GOOD.assign(label=[1, 1, 1, 1]), GOOD, "has a single class"),
    ("empty split", GOOD, GOOD.iloc[:0], "validation split (local:"),
    ("missing labels", GOOD.assign(label=[0, None, 1, 1]), GOOD, "missing or non-numeric labels"),
]


@pytest.mark.parametrize(("what", "train", "validation", "message"), BAD_DATA, ids=[b[0] for b in BAD_DATA])
def test_bad_data_is_refused(
    tmp_path: Path, what: str, train: pd.DataFrame, validation: pd.DataFrame, message: str
) -> None:
    _write_split(tmp_path / "sst2", train, validation)
    with pytest.raises(DataError) as err:
        load_task_data(get_task("sst2"), tmp_path)
    assert message in str(err.value)


def test_half_a_task_folder_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "sst2").mkdir()
    GOOD.to_parquet(tmp_path / "sst2" / "train.parquet")
    with pytest.raises(DataError, match=r"needs train.parquet and validation.parquet, but only \['train.parquet'\]"):
        load_task_data(get_task("sst2"), tmp_path)


def test_no_local_data_and_no_hub_says_both_ways(tmp_path: Path) -> None:
    with pytest.raises(DataError) as err:
        load_task_data(get_task("mrpc"), tmp_path)
    message = str(err.value)
    assert "has neither mrpc/{train,validation}.parquet nor MRPC/" in message
    assert "Hugging Face hub (nyu-mll/glue/mrpc) is not reachable" in message
    assert "--data-dir / FREEZESTATS_DATA" in message


def test_data_dir_must_exist(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"--data-dir=.* is not a directory"):
        load_task_data(get_task("sst2"), tmp_path / "nope")


def test_hub_path_builds_the_same_table_from_a_real_datasets_object(
    tmp_path: Path, glue_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hub branch runs for real, with `datasets` reading the local parquet instead of the network."""
    import datasets

    real_load = datasets.load_dataset
    calls = []

    def local_hub(path: str, name: str | None = None, **kwargs):
        calls.append((path, name))
        files = {split: str(glue_dir / name / f"{split}.parquet") for split in ("train", "validation")}
        return real_load("parquet", data_files=files, cache_dir=str(tmp_path / "cache"))

    monkeypatch.setattr(datasets, "load_dataset", local_hub)
    data = load_task_data(get_task("rte"), tmp_path)  # an empty data dir: falls through to the hub
    assert calls == [("nyu-mll/glue", "rte")]
    assert data.source == "hub:nyu-mll/glue/rte"
    local = load_task_data(get_task("rte"), glue_dir)
    pd.testing.assert_frame_equal(data.train, local.train)
    pd.testing.assert_frame_equal(data.validation, local.validation)

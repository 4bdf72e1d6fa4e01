"""A user task's data through the ``datasets`` library: a ``save_to_disk`` folder, and a dataset id (offline).

The hub path is ``datasets.load_dataset(path, config)``; offline it is tested on a local copy (a folder of
Parquet files, which needs no loading script), through the same code as an id on the hub.
"""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest
from _factories import simple_spec
from _user_data import rows, task_table, write

from freezestats.exceptions import DataError
from freezestats.spec import parse_spec
from freezestats.tasks.data import load_task_data


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``load_dataset`` caches what it prepares; keep that in the test's folder."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")


def _task(folder: Path, **source: object):
    table = task_table(**{"train": None, **source})
    spec = parse_spec(simple_spec(tasks=[table]), source=str(folder / "spec.toml"))
    return load_task_data(spec.task("tickets"))


def test_a_save_to_disk_folder(tmp_path: Path) -> None:
    splits = {"train": rows(45), "validation": rows(9, prefix="dev")}
    datasets.DatasetDict({k: datasets.Dataset.from_pandas(v) for k, v in splits.items()}).save_to_disk(tmp_path / "ds")
    data = _task(tmp_path, disk="ds", id_column="id")
    assert len(data.train) == 45 and len(data.validation) == 9 and data.origin.carved is None
    assert data.task.label_names == ("high", "low", "mid")
    assert data.origin.validation_ids[0] == "dev-0"
    identity = data.origin.files["train"]
    assert identity["path"] == "ds [train]" and len(identity["sha256"]) == 64 and int(identity["files"]) >= 3


def test_one_saved_split_is_train_and_validation_is_carved(tmp_path: Path) -> None:
    datasets.Dataset.from_pandas(rows(45)).save_to_disk(tmp_path / "one")
    data = _task(tmp_path, disk="one")
    assert len(data.train) == 36 and len(data.validation) == 9 and data.origin.carved is not None


def test_a_dataset_id_loads_through_load_dataset(tmp_path: Path) -> None:
    write(rows(45), tmp_path / "copy" / "train.parquet")
    write(rows(9, prefix="dev"), tmp_path / "copy" / "dev.parquet")  # not a split name load_dataset infers
    write(rows(6, prefix="test"), tmp_path / "copy" / "test.parquet")
    data = _task(tmp_path, hub="copy", splits={"validation": "test"})
    assert len(data.train) == 45 and len(data.validation) == 6 and data.origin.n_test == 6
    assert data.origin.files["validation"]["path"] == "hub copy [test]"
    assert len(data.origin.files["validation"]["content_sha256"]) == 64
    local = _task(tmp_path, train="copy/train.parquet", validation="copy/test.parquet")
    assert local.train.equals(data.train) and local.validation.equals(data.validation)  # the same data either way


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"disk": "nowhere"}, "The dataset folder 'nowhere' does not exist"),
        ({"disk": "."}, "Cannot read '.' as a folder written by datasets.save_to_disk"),
        ({"hub": "copy", "splits": {"validation": "dev"}}, "has no split 'dev' for validation; it has ['train']"),
        ({"hub": "no-such-user/no-such-set"}, "Cannot load the dataset 'no-such-user/no-such-set'"),
    ],
)
def test_dataset_sources_fail_in_one_line(tmp_path: Path, source: dict, message: str) -> None:
    write(rows(45), tmp_path / "copy" / "train.parquet")
    with pytest.raises(DataError) as err:
        _task(tmp_path, **source)
    assert message in str(err.value) and "\n" not in str(err.value)

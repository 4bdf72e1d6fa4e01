"""A user task's data is part of its study: the carve is stored and reused, changed files refuse a resume.

Runs a tiny study (the tiny model, two cells) on a three-class CSV with string labels and no validation file,
then resumes it: with the same files (the stored carve is used even when a fresh carve would differ), with a
changed file (refused with the change, the database untouched), and from a moved folder (same study).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _user_data import rows, task_table, user_spec, write

from freezestats.cli.main import main
from freezestats.exceptions import StorageError
from freezestats.results.export import results_table
from freezestats.results.item_predictions import study_item_predictions
from freezestats.runner import work_study
from freezestats.study.trials import load_study, open_storage
from freezestats.tasks.carve import carve_validation


def _run(spec: Path, storage: str, *extra: str) -> int:
    return main(["run", "--study", str(spec), "--storage", storage, "--no-progress", *extra])


@pytest.fixture
def study(tmp_path: Path, tiny_model: Path) -> dict:
    folder = tmp_path / "project"
    write(rows(60), folder / "train.csv")
    spec = user_spec(folder, tiny_model)
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    assert _run(spec, storage, "--max-trials", "1") == 0
    return {"folder": folder, "spec": spec, "storage": storage, "db": tmp_path / "study.db"}


def _stored(storage: str) -> dict:
    return load_study(open_storage(storage), None).user_attrs


def test_the_carve_is_stratified_deterministic_and_stored(study: dict) -> None:
    attrs = _stored(study["storage"])
    carved = attrs["validation_carve:tickets"]
    labels = pd.read_csv(study["folder"] / "train.csv")["label"]
    assert len(carved) == 12  # 20% of 60, stratified: 4 of each class
    assert labels.iloc[carved].value_counts().tolist() == [4, 4, 4]
    codes = labels.map({"high": 0, "low": 1, "mid": 2}).to_numpy()
    assert carve_validation(codes, False, 0.2, 0).tolist() == carved  # a fixed seed: the same carve again
    assert attrs["provenance"]["tasks"]["tickets"]["carved_validation"] == 12
    identity = attrs["data_identity"]["tickets"]
    assert identity["labels"] == ["high", "low", "mid"]
    assert identity["files"]["train"] == {
        "path": "train.csv",
        "sha256": hashlib.sha256((study["folder"] / "train.csv").read_bytes()).hexdigest(),
    }


def test_a_resume_uses_the_stored_carve(study: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _stored(study["storage"])["validation_carve:tickets"]

    def another_carve(labels: np.ndarray, *args: object, **kwargs: object) -> np.ndarray:
        return np.arange(len(labels) - 12, len(labels))  # what another library version might draw

    monkeypatch.setattr("freezestats.tasks.user_data.carve_validation", another_carve)
    assert _run(study["spec"], study["storage"]) == 0
    assert _stored(study["storage"])["validation_carve:tickets"] == before
    items = study_item_predictions(study["storage"])
    ids = items.groupby("trial")["row_id"].apply(list)
    assert len(ids) == 2 and ids.iloc[0] == ids.iloc[1] == [i + 1 for i in before]  # both runs: the same items
    table = results_table(load_study(open_storage(study["storage"]), None))
    assert table["n_eval"].eq(12).all() and table["metric"].eq("accuracy").all()


def test_a_resume_on_changed_data_is_refused_and_writes_nothing(
    study: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    train = study["folder"] / "train.csv"
    old = hashlib.sha256(train.read_bytes()).hexdigest()
    frame = pd.read_csv(train)
    frame.loc[3, "text"] = "an edited ticket"
    frame.to_csv(train, index=False)
    new = hashlib.sha256(train.read_bytes()).hexdigest()
    before = hashlib.sha256(study["db"].read_bytes()).hexdigest()
    capsys.readouterr()
    assert _run(study["spec"], study["storage"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "freezestats run: error: Study 'test-study' ran on other data for task(s) tickets; refusing to mix results. "
        f"Changed: tickets.files.train.sha256: '{old[:12]}…' -> '{new[:12]}…'. Restore the data the study ran on, "
        "or give the study a new `name` (or another storage)."
    )
    assert hashlib.sha256(study["db"].read_bytes()).hexdigest() == before
    with pytest.raises(StorageError, match="ran on other data"):  # a worker, which reads the spec from the study
        work_study(study["storage"], show_progress=False)


def test_changed_labels_are_named_too(study: dict, capsys: pytest.CaptureFixture[str]) -> None:
    write(rows(60).assign(label=lambda d: d.label.str.upper()), study["folder"] / "train.csv")
    assert _run(study["spec"], study["storage"]) == 2
    assert "tickets.labels: ['high', 'low', 'mid'] -> ['HIGH', 'LOW', 'MID']" in capsys.readouterr().err


def test_a_moved_project_resumes_its_study(study: dict, tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    shutil.copytree(study["folder"], moved)
    shutil.rmtree(study["folder"])
    assert _run(moved / "spec.toml", study["storage"]) == 0  # the paths as written are the same: same study
    stored = _stored(study["storage"])["freezestats_spec"]["task_definitions"][0]
    assert stored["root"] == str(moved)  # workers read the data from its new place
    assert len(results_table(load_study(open_storage(study["storage"]), None))) == 2


def test_a_changed_task_definition_is_refused(
    study: dict, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    changed = user_spec(study["folder"], tiny_model, task_table(metrics=["macro_f1", "accuracy"]))
    assert _run(changed, study["storage"]) == 2
    err = capsys.readouterr().err
    assert "Changed: task tickets.metrics: ['accuracy', 'macro_f1'] -> ['macro_f1', 'accuracy']" in err
    assert _run(changed, study["storage"], "--extend") == 2  # not an extension either
    assert "task tickets.metrics" in capsys.readouterr().err

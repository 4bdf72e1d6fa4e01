"""A finished run's record is stored in one transaction (``set_user_attrs`` on a trial): one commit instead of one
per attribute (on SQLite each commit takes the write lock that every worker queues for), and all of it or none."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import optuna
import pytest
from sqlalchemy import event

from freezestats.study.trials import open_storage, set_user_attrs

RECORD = {"best_dev": np.float32(0.75), "curve": (1, 2, 3), "fail_reason": "", "n_eval": np.int64(436)}
STORED = {"best_dev": 0.75, "curve": [1, 2, 3], "fail_reason": "", "n_eval": 436}


def _running_trial(url: str, name: str) -> tuple[optuna.storages.RDBStorage, optuna.Study, optuna.Trial]:
    storage = open_storage(url)
    study = optuna.create_study(study_name=name, storage=storage)
    study.enqueue_trial({})
    return storage, study, study.ask()


def _commits(storage: optuna.storages.RDBStorage) -> list[int]:
    commits: list[int] = []
    event.listen(storage.engine, "commit", lambda _connection: commits.append(1))
    return commits


def test_a_record_is_one_commit_and_reads_back_whole(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/study.db"
    storage, study, trial = _running_trial(url, "record")
    commits = _commits(storage)
    set_user_attrs(trial, RECORD)
    assert len(commits) == 1  # Optuna's set_user_attr would commit 4 times
    assert trial.user_attrs == STORED  # the trial object sees what was stored, as after set_user_attr
    study.tell(trial, 0.75)
    assert optuna.load_study(study_name="record", storage=url).trials[0].user_attrs == STORED


def test_a_record_that_cannot_be_stored_leaves_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/study.db"
    _, study, trial = _running_trial(url, "atomic")
    with pytest.raises(TypeError, match="not JSON serialisable"):
        set_user_attrs(trial, {**RECORD, "model": object()})
    study.tell(trial, 0.5)
    assert optuna.load_study(study_name="atomic", storage=url).trials[0].user_attrs == {}
    with pytest.raises(RuntimeError, match="finished"):  # a finished trial takes no record, not even a part
        set_user_attrs(trial, RECORD)
    assert optuna.load_study(study_name="atomic", storage=url).trials[0].user_attrs == {}


def test_a_study_keeps_its_attributes_one_by_one(tmp_path: Path) -> None:
    _, study, _ = _running_trial(f"sqlite:///{tmp_path}/study.db", "study-level")
    set_user_attrs(study, {"provenance": {"torch": "2.13"}, "spec_hash": "abc"})
    assert study.user_attrs == {"provenance": {"torch": "2.13"}, "spec_hash": "abc"}


def test_a_record_on_postgresql(postgres_url: str) -> None:
    # the server is the session's: the study is deleted again, since other tests expect to find theirs alone
    storage, study, trial = _running_trial(postgres_url, "record-writes-postgres")
    try:
        commits = _commits(storage)
        set_user_attrs(trial, RECORD)
        assert len(commits) == 1
        study.tell(trial, 0.75)
        stored = optuna.load_study(study_name="record-writes-postgres", storage=postgres_url).trials[0].user_attrs
        assert stored == STORED
    finally:
        optuna.delete_study(study_name="record-writes-postgres", storage=postgres_url)

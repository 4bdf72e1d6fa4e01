"""``--fuse``: a worker claims the seeds of one cell together, trains them fused, and tells each trial its own result.

On the tiny local model and real GLUE data (as ``tests/test_runner.py``), fp32 on CPU, where a fused run equals
the lone run: the same best_dev, each trial claimed once; a failed run fails only its trial; Ctrl-C hands every
claimed trial back to the queue.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _factories import simple_spec, write_spec
from optuna.trial import TrialState

import freezestats.training.fused as fused
from freezestats.cli.main import main
from freezestats.exceptions import TrialFailed
from freezestats.results.export import results_table
from freezestats.spec.study import load_spec
from freezestats.study.queue import cell_from_trial
from freezestats.study.trials import load_study, open_storage


def _spec(tmp_path: Path, model: Path, **sections: Any) -> Path:
    grid = {"frozen_layers": [1], "train_sizes": [32], "seeds": [1, 2, 3]}
    training = {"epochs": 1, "eval_every_epochs": 0.5, "max_length": 32, "precision": "fp32"}
    return write_spec(tmp_path, simple_spec(model=str(model), grid=grid, training=training, **sections))


def _run(tmp_path: Path, spec: Path, glue_dir: Path, name: str, *extra: str, storage: str | None = None) -> tuple:
    storage = storage or f"sqlite:///{tmp_path / name}"
    rc = main(["run", "--study", str(spec), "--storage", storage, "--data-dir", str(glue_dir), "--no-progress", *extra])
    study = load_study(open_storage(storage), load_spec(spec).name)
    return rc, study.get_trials()


@pytest.fixture(params=["sqlite", "postgresql"])
def storage_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The kill and interrupt tests' storage: a SQLite file, or the session's PostgreSQL server (skipped, visibly,
    where PostgreSQL is not installed; .ci/run installs it)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fused.db'}"
    return request.getfixturevalue("postgres_url")


def _named_spec(tmp_path: Path, model: Path, **sections: Any) -> Path:
    """The fused tests' spec under a study name of its own: the PostgreSQL server is shared by the session's tests,
    and a study name with another spec is refused."""
    return _spec(tmp_path, model, name=f"fused-{tmp_path.name}", **sections)


def test_fused_trials_equal_unfused_ones(tmp_path: Path, tiny_model: Path, glue_dir: Path) -> None:
    spec = _spec(tmp_path, tiny_model)
    rc_off, off = _run(tmp_path, spec, glue_dir, "off.db", "--workers", "1")
    rc_on, on = _run(tmp_path, spec, glue_dir, "on.db", "--workers", "1", "--fuse", "3")
    assert rc_off == 0 and rc_on == 0
    assert len(on) == 3 and all(t.state == TrialState.COMPLETE for t in on)  # each cell claimed once
    assert {t.user_attrs["fusion"] for t in on} == {"fused"}
    assert {t.user_attrs["fuse_k"] for t in on} == {3} and {t.user_attrs["fuse"] for t in on} == {"3"}
    assert all("fusion" not in t.user_attrs for t in off)
    best_off = {t.user_attrs["cell_key"]: t.user_attrs["best_dev"] for t in off}
    best_on = {t.user_attrs["cell_key"]: t.user_attrs["best_dev"] for t in on}
    assert best_on == best_off
    assert {t.user_attrs["cell_key"]: t.value for t in on} == {t.user_attrs["cell_key"]: t.value for t in off}
    fused_table = results_table(load_study(open_storage(f"sqlite:///{tmp_path / 'on.db'}"), None))
    alone_table = results_table(load_study(open_storage(f"sqlite:///{tmp_path / 'off.db'}"), None))
    assert fused_table[["fuse", "fuse_k", "fusion"]].drop_duplicates().values.tolist() == [["3", 3, "fused"]]
    assert alone_table[["fuse", "fuse_k", "fusion"]].drop_duplicates().values.tolist() == [["off", 1, "unfused"]]


def test_a_failed_run_fails_only_its_trial(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = fused.fine_tune_many
    calls = []

    def poisoned(runs):
        outcomes = real(runs)
        calls.append(len(runs))
        if len(calls) == 1:  # the first batch: seed 2's run fails
            outcomes = [TrialFailed("poisoned") if r["seed"] == 2 else o for r, o in zip(runs, outcomes, strict=True)]
        return outcomes

    monkeypatch.setattr(fused, "fine_tune_many", poisoned)
    rc, trials = _run(tmp_path, _spec(tmp_path, tiny_model), glue_dir, "poison.db", "--workers", "1", "--fuse", "3")
    assert rc == 0  # the failed cell was retried (alone: a group of one runs unfused) and completed
    failed = [t for t in trials if t.state == TrialState.FAIL]
    assert len(failed) == 1 and "poisoned" in failed[0].user_attrs["fail_reason"]
    assert failed[0].params["seed"] == 2
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert sorted(t.params["seed"] for t in complete) == [1, 2, 3]
    retried = next(t for t in complete if t.params["seed"] == 2)  # its group of one, trained the ordinary way
    assert (retried.user_attrs["fuse_k"], retried.user_attrs["fusion"]) == (1, "alone: nothing to fuse it with")
    assert calls == [3]


def test_ctrl_c_requeues_every_claimed_trial(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, monkeypatch: pytest.MonkeyPatch, storage_url: str
) -> None:
    def interrupted(runs):
        raise KeyboardInterrupt

    monkeypatch.setattr(fused, "fine_tune_many", interrupted)
    spec = _named_spec(tmp_path, tiny_model)
    rc, trials = _run(tmp_path, spec, glue_dir, "", "--workers", "1", "--fuse", "auto", storage=storage_url)
    assert rc == 130
    failed = [t for t in trials if t.state == TrialState.FAIL]
    assert len(failed) == 3 and {t.user_attrs["fail_reason"] for t in failed} == {"interrupted"}
    waiting = [t for t in trials if t.state == TrialState.WAITING]
    assert sorted(t.user_attrs["cell_key"] for t in waiting) == sorted(t.user_attrs["cell_key"] for t in failed)
    assert not [t for t in trials if t.state == TrialState.RUNNING]


def test_a_killed_workers_claimed_trials_go_stale_and_are_requeued(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, storage_url: str
) -> None:
    """SIGKILL after the claim: nothing hands the trials back; their heartbeats stop and each is failed and requeued."""
    import time

    from freezestats.runner import _fail_stale
    from freezestats.runner._fused import _claim

    spec = _named_spec(tmp_path, tiny_model, execution={"heartbeat_interval": 1, "grace_period": 2})
    storage = storage_url
    assert main(["run", "--study", str(spec), "--storage", storage, "--data-dir", str(glue_dir), "--enqueue-only"]) == 0
    study = load_study(open_storage(storage, heartbeat_interval=1, grace_period=2, max_retries=1), load_spec(spec).name)
    claimed = _claim(study, study.get_trials(states=(TrialState.WAITING,)))
    assert len(claimed) == 3
    for trial in claimed:  # the worker's heartbeat threads beat once, then the worker is killed
        study._storage.record_heartbeat(trial._trial_id)
    time.sleep(3)
    _fail_stale(study)
    trials = study.get_trials()
    assert sum(t.state == TrialState.FAIL for t in trials) == 3
    waiting = sorted(t.user_attrs["cell_key"] for t in trials if t.state == TrialState.WAITING)
    assert waiting == sorted(t.user_attrs["cell_key"] for t in trials if t.state == TrialState.FAIL)


def test_a_fused_worker_claims_the_longest_waiting_group_first(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The largest train size first (enqueued last): a grid claimed in enqueue order ends with its longest runs."""
    sizes = []

    def interrupted(runs):
        sizes.append({len(run["train"]) for run in runs})
        raise KeyboardInterrupt

    monkeypatch.setattr(fused, "fine_tune_many", interrupted)
    grid = {"frozen_layers": [1], "train_sizes": [32, 64], "seeds": [1, 2]}
    training = {"epochs": 1, "eval_every_epochs": 0.5, "max_length": 32, "precision": "fp32"}
    spec = write_spec(tmp_path, simple_spec(model=str(tiny_model), grid=grid, training=training))
    rc, trials = _run(tmp_path, spec, glue_dir, "order.db", "--workers", "1", "--fuse", "auto")
    assert rc == 130 and sizes == [{64}]
    first_64 = min(t.number for t in trials if cell_from_trial(t).train_size == 64)
    assert first_64 > min(t.number for t in trials if cell_from_trial(t).train_size == 32)  # enqueued after 32


def test_fuse_auto_claims_no_more_runs_than_fit_in_memory(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import freezestats.training.fused.memory as memory

    claimed = []

    def interrupted(runs):
        claimed.append(len(runs))
        raise KeyboardInterrupt

    monkeypatch.setattr(fused, "fine_tune_many", interrupted)
    spec = _spec(tmp_path, tiny_model)
    one_run = memory.run_bytes(str(tiny_model), 2, load_spec(spec).training)
    monkeypatch.setattr(memory, "free_bytes", lambda device: 5 * one_run)
    rc, _ = _run(tmp_path, spec, glue_dir, "mem.db", "--workers", "1", "--fuse", "auto")
    assert rc == 130 and claimed == [2]  # half of 5 runs' memory: 2 of the 3 seeds
    claimed.clear()
    rc, _ = _run(tmp_path, spec, glue_dir, "k.db", "--workers", "1", "--fuse", "3")
    assert rc == 130 and claimed == [3]  # an explicit K is the user's: not capped

"""Several workers on one study, and failing trials: every cell ends with exactly one COMPLETE trial."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import optuna
import pytest
from _factories import simple_spec, write_spec
from _polling import wait_until_a_trial_runs
from optuna.trial import TrialState

from freezestats.cli.main import main
from freezestats.results.export import cell_status
from freezestats.study.trials import load_study, open_storage

SMALL_GLUE = True  # runs score 256 dev rows per task (conftest.glue_dir): these tests check the study, not scores


def _spec(tmp_path: Path, model: Path, **override) -> Path:
    base = {
        "grid": {"frozen_layers": [0, 1, 2], "train_sizes": [32, 64], "seeds": [1, 2]},
        "training": {"epochs": 1, "eval_every_epochs": 1, "max_length": 64},
    }
    for key, value in override.items():
        base[key] = {**base.get(key, {}), **value}
    return write_spec(tmp_path, simple_spec(model=str(model), **base))


def _complete_per_cell(storage: str) -> Counter:
    study = load_study(open_storage(storage), None)
    return Counter(t.user_attrs["cell_key"] for t in study.get_trials(states=(TrialState.COMPLETE,)))


def test_two_local_workers_on_sqlite_run_every_cell_exactly_once(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(tmp_path, tiny_model)
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    args = ["run", "--study", str(spec), "--storage", storage, "--data-dir", str(glue_dir), "--no-progress"]
    assert main([*args, "--workers", "2"]) == 0
    assert "12/12 cells complete, 0 failed, 12 trials run now" in capsys.readouterr().out
    counts = _complete_per_cell(storage)
    assert len(counts) == 12 and set(counts.values()) == {1}
    study = load_study(open_storage(storage), None)
    cells = [t for t in study.get_trials() if "cell_key" in t.user_attrs]
    assert len({t.user_attrs["cell_key"] for t in cells}) == 12 and all(t.state == TrialState.COMPLETE for t in cells)
    # A worker that saw a WAITING cell and lost it to the other gets a fresh trial from Optuna: it is
    # marked and pruned, never run.
    strays = [t for t in study.get_trials() if "cell_key" not in t.user_attrs]
    assert all(t.state == TrialState.PRUNED and t.user_attrs.get("stray") for t in strays)


def test_enqueue_only_then_independent_workers(tmp_path: Path, tiny_model: Path, glue_dir: Path) -> None:
    spec = _spec(tmp_path, tiny_model, grid={"frozen_layers": [0, 2], "train_sizes": [32], "seeds": [1, 2, 3]})
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    assert main(["run", "--study", str(spec), "--storage", storage, "--data-dir", str(glue_dir), "--enqueue-only"]) == 0
    study = load_study(open_storage(storage), None)
    assert [t.state for t in study.get_trials()] == [TrialState.WAITING] * 6
    env = {**os.environ, "FREEZESTATS_DATA": str(glue_dir)}
    worker = [sys.executable, "-m", "freezestats", "worker", "--storage", storage, "--no-progress"]
    procs = [subprocess.Popen(worker, cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    ran = [int(o.split(" trials run now")[0].rsplit(" ", 1)[-1]) for o in outputs]
    assert sum(ran) == 6
    counts = _complete_per_cell(storage)
    assert len(counts) == 6 and set(counts.values()) == {1}


def test_a_failing_cell_is_retried_then_reported_and_the_rest_completes(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A diverging regression run (NaN loss) fails; it is retried max_retries times, then reported."""
    raw = simple_spec(
        model=str(tiny_model),
        tasks=["stsb"],
        grid={"frozen_layers": [0, 2], "train_sizes": [64], "seeds": [1]},
        training={"epochs": 2, "eval_every_epochs": 1, "learning_rate": 1e12, "max_grad_norm": 0.0, "max_length": 64},
        execution={"max_retries": 2},
    )
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    code = main(
        [
            "run",
            "--study",
            str(write_spec(tmp_path, raw)),
            "--storage",
            storage,
            "--data-dir",
            str(glue_dir),
            "--no-progress",
        ]
    )
    out = capsys.readouterr().out
    study = load_study(open_storage(storage), None)
    status = cell_status(study).set_index("cell")
    full = status.loc["stsb|frozen=0|n=64|draw=0|seed=1"]
    assert full.status == "failed" and full.attempts == 3  # first try + max_retries=2
    assert "training loss became" in full.fail_reason
    assert code == 1 and "1 failed" in out
    head_only = status.loc["stsb|frozen=2|n=64|draw=0|seed=1"]  # only the head trains: it stays finite
    assert head_only.status == "done" and head_only.attempts == 1
    assert main(["status", "--storage", storage]) == 0
    assert "training loss became" in capsys.readouterr().out


def test_a_worker_killed_mid_trial_is_detected_and_its_cell_rerun(
    tmp_path: Path, tiny_model: Path, glue_dir: Path
) -> None:
    """SIGKILL leaves a RUNNING trial; without heartbeats it is failed after the grace period and re-run."""
    import signal
    import time

    spec = _spec(
        tmp_path,
        tiny_model,
        grid={"frozen_layers": [0, 2], "train_sizes": [200, 400], "seeds": [1]},
        training={"epochs": 3},
        execution={"heartbeat_interval": 1, "grace_period": 3},
    )
    db = tmp_path / "study.db"
    storage = f"sqlite:///{db}"
    env = {**os.environ, "FREEZESTATS_DATA": str(glue_dir)}
    command = [sys.executable, "-m", "freezestats", "run", "--study", str(spec), "--storage", storage, "--no-progress"]
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until_a_trial_runs(proc, db)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    study = load_study(open_storage(storage), None)
    (killed,) = [t for t in study.get_trials() if t.state == TrialState.RUNNING]
    done_before = {t.number for t in study.get_trials(states=(TrialState.COMPLETE,))}

    time.sleep(4)  # longer than the grace period: the killed trial's heartbeat is stale now
    rerun = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    counts = _complete_per_cell(storage)
    assert len(counts) == 4 and set(counts.values()) == {1}
    study = load_study(open_storage(storage), None)
    after = {t.number: t for t in study.get_trials()}
    assert after[killed.number].state == TrialState.FAIL  # the stale trial was failed, never completed late
    assert done_before <= {n for n, t in after.items() if t.state == TrialState.COMPLETE}  # nothing overwritten
    status = cell_status(study).set_index("cell").loc[killed.user_attrs["cell_key"]]
    assert status.status == "done" and status.attempts == 2


def test_four_workers_on_postgresql_run_every_cell_exactly_once(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, postgres_url: str
) -> None:
    spec = _spec(tmp_path, tiny_model, grid={"frozen_layers": [0, 1, 2], "train_sizes": [32, 64], "seeds": [1, 2, 3]})
    args = ["run", "--study", str(spec), "--storage", postgres_url, "--data-dir", str(glue_dir), "--no-progress"]
    assert main([*args, "--enqueue-only"]) == 0
    env = {**os.environ, "FREEZESTATS_DATA": str(glue_dir)}
    worker = [
        sys.executable,
        "-m",
        "freezestats",
        "worker",
        "--storage",
        postgres_url,
        "--no-progress",
        "--artifacts",
        str(tmp_path / "artifacts"),
    ]
    procs = [
        subprocess.Popen(worker, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outputs
    ran = [int(o.split(" trials run now")[0].rsplit(" ", 1)[-1]) for o in outputs]
    assert sum(ran) == 18 and sum(r > 0 for r in ran) >= 2  # the work was shared
    counts = _complete_per_cell(postgres_url)
    assert len(counts) == 18 and set(counts.values()) == {1}


def test_unreachable_database_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = "postgresql+psycopg2://nobody@127.0.0.1:9/none"  # port 9 (discard): nothing listens there
    assert main(["status", "--storage", url]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("freezestats status: error: Cannot open the study storage") and "\n" not in err


def test_wrong_postgres_password_is_one_clear_line(postgres_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    wrong = postgres_url.replace(":freeze-secret@", ":not-the-password@")
    assert wrong != postgres_url
    assert main(["status", "--storage", wrong]) == 2
    err = capsys.readouterr().err.strip()
    assert "Cannot open the study storage" in err and "password authentication failed" in err
    assert "\n" not in err


def test_two_studies_in_one_database_never_mix(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from freezestats.results.export import results_table

    base = {"frozen_layers": [0], "train_sizes": [32], "seeds": [1]}
    for name, seeds in (("study-a", [1]), ("study-b", [1, 2])):
        raw = simple_spec(
            model=str(tiny_model),
            grid={**base, "seeds": seeds},
            training={"epochs": 1, "eval_every_epochs": 1, "max_length": 64},
        )
        raw["name"] = name
        spec = write_spec(tmp_path, raw, f"{name}.toml")
        assert (
            main(
                [
                    "run",
                    "--study",
                    str(spec),
                    "--storage",
                    postgres_url,
                    "--data-dir",
                    str(glue_dir),
                    "--no-progress",
                    "--artifacts",
                    str(tmp_path / "artifacts"),
                ]
            )
            == 0
        )
    assert main(["status", "--storage", postgres_url]) == 2
    assert "choose one with --study-name" in capsys.readouterr().err
    storage = open_storage(postgres_url)
    a, b = (results_table(load_study(storage, n)) for n in ("study-a", "study-b"))
    assert (len(a), len(b)) == (1, 2) and set(a.study) == {"study-a"} and set(b.study) == {"study-b"}


def test_a_worker_killed_between_two_suggests_requeues_the_whole_cell() -> None:
    """A trial failed while only part of its cell was read back must be requeued with every coordinate."""
    import optuna

    from freezestats.study.cells import Cell
    from freezestats.study.queue import cell_from_trial, enqueue_cells, requeue

    study = optuna.create_study()
    cell = Cell(task="sst2", frozen_layers=2, train_size=64, subset_draw=0, seed=1, learning_rate=5e-5)
    enqueue_cells(study, [cell])
    trial = study.ask()
    trial.suggest_categorical("task", ["sst2"])  # the worker died here, before the other suggests
    study.tell(trial, state=TrialState.FAIL)
    dead = study.trials[0]
    assert set(dead.params) == {"task"}
    assert requeue(study, dead, max_retries=1)
    waiting = study.get_trials(states=(TrialState.WAITING,))
    assert [cell_from_trial(t) for t in waiting] == [cell]
    assert cell_from_trial(dead) == cell


def test_a_sqlite_claim_reads_and_writes_in_one_transaction(tmp_path: Path) -> None:
    """Optuna claims a WAITING trial by reading its state, then writing RUNNING; on SQLite both must be one
    transaction, or two workers can claim (and run) the same cell. Python's sqlite3 driver by itself sends
    BEGIN only before a write, so the read would hold no lock and the other worker's write would go through.
    """
    import sqlite3

    from sqlalchemy import text

    db = tmp_path / "study.db"
    storage = open_storage(f"sqlite:///{db}")
    with storage.engine.connect() as connection, connection.begin():
        connection.execute(text("SELECT count(*) FROM trials")).all()  # the read half of a claim
        other = sqlite3.connect(db, timeout=0.2, isolation_level=None)
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN IMMEDIATE")  # another worker's claim waits for this one to commit
        other.close()
    # Commands that only read (status, export) take no write lock, so they never hold up a worker.
    read_only = open_storage(f"sqlite:///{db}", must_exist=True)
    with read_only.engine.connect() as connection, connection.begin():
        connection.execute(text("SELECT count(*) FROM trials")).all()
        other = sqlite3.connect(db, timeout=0.2, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        other.close()


@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used with Study.optimize")
def test_a_worker_killed_between_its_claim_and_first_heartbeat_is_still_detected(tmp_path: Path) -> None:
    """Optuna's ``ask`` marks the trial RUNNING before the heartbeat thread starts; a worker that dies in
    between must not leave a RUNNING trial that no heartbeat check can ever fail (its cell would never run).
    """
    import time

    from freezestats.runner import _fail_stale

    storage = f"sqlite:///{tmp_path / 'study.db'}"
    beats = {"heartbeat_interval": 1, "grace_period": 2, "max_retries": 1}
    study = optuna.create_study(storage=open_storage(storage, **beats), study_name="s")
    study.enqueue_trial({"x": 1}, user_attrs={"cell_key": "c", "role": "grid"})
    claimed = study.ask()  # the claim, as optimize makes it; this "worker" then dies before any heartbeat
    assert claimed.number == 0
    time.sleep(3.5)  # past the grace period (SQLite's clock has 1 s steps)
    later = optuna.load_study(storage=open_storage(storage, **beats), study_name="s")
    _fail_stale(later)
    states = [t.state for t in later.get_trials()]
    assert states == [TrialState.FAIL, TrialState.WAITING]  # failed, and the cell is back in the queue


def test_a_pool_stopped_with_ctrl_c_reports_the_trials_its_workers_ran(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    from freezestats.runner._pool import WorkerPool

    spec = _spec(tmp_path, tiny_model, grid={"frozen_layers": [0], "train_sizes": [32], "seeds": [1, 2]})
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    ran_then_stopped = WorkerPool.run

    def run_then_ctrl_c(self, study, poll, n=None) -> None:  # the workers finish, then Ctrl-C reaches the pool
        ran_then_stopped(self, study, poll, n)
        raise KeyboardInterrupt

    monkeypatch.setattr(WorkerPool, "run", run_then_ctrl_c)
    args = ["run", "--study", str(spec), "--storage", storage, "--data-dir", str(glue_dir), "--no-progress"]
    main([*args, "--workers", "2"])
    assert "2/2 cells complete, 0 failed, 2 trials run now" in capsys.readouterr().out

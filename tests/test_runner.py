"""``freezestats run`` / ``status`` / ``export`` end to end, on the tiny local model and real GLUE data.

Covers: every cell lands once, resume after --max-trials and after a real Ctrl-C (SIGINT), the
learning-rate search, the stored subsets, the predictions artifacts and the export columns, and a grid
that crosses the seeds with data-order seeds (``grid.order_seeds``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import optuna
import pandas as pd
import pytest
from _factories import simple_spec, write_spec
from _polling import wait_until_a_trial_runs
from optuna.trial import TrialState

from freezestats.cli.main import main
from freezestats.results.export import RESULT_COLUMNS, results_table
from freezestats.spec import load_spec
from freezestats.study.trials import load_study, open_storage
from freezestats.tasks.subsets import nested_subsets

SMALL_GLUE = True  # runs score 256 dev rows per task (conftest.glue_dir): these tests check the study, not scores


def _spec(tmp_path: Path, model: Path, **override) -> Path:
    base = {
        "grid": {"frozen_layers": [0, 2], "train_sizes": [32, 64], "seeds": [1]},
        "training": {"epochs": 1, "eval_every_epochs": 0.5, "max_length": 64},
    }
    for key, value in override.items():
        base[key] = {**base.get(key, {}), **value}
    return write_spec(tmp_path, simple_spec(model=str(model), **base))


def _run(args: list[str], glue_dir: Path) -> int:
    return main([*args, "--data-dir", str(glue_dir), "--no-progress"])


def _cell_counts(db: Path) -> Counter:
    study = load_study(open_storage(f"sqlite:///{db}"), None)
    return Counter(t.user_attrs["cell_key"] for t in study.get_trials(states=(TrialState.COMPLETE,)))


def test_run_status_export(
    tmp_path: Path, tiny_model: Path, full_glue_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    glue_dir = full_glue_dir  # the stored predictions and counts are checked against the whole dev set
    spec_path = _spec(tmp_path, tiny_model)
    db = tmp_path / "study.db"
    storage = f"sqlite:///{db}"
    assert _run(["run", "--study", str(spec_path), "--storage", storage], glue_dir) == 0
    assert "4/4 cells complete, 0 failed" in capsys.readouterr().out

    assert main(["status", "--storage", storage]) == 0
    assert "4 cells: 4 done, 0 running, 0 waiting, 0 failed" in capsys.readouterr().out

    out = tmp_path / "results.parquet"
    assert main(["export", "--storage", storage, "-o", str(out)]) == 0
    table = pd.read_parquet(out)
    assert list(table.columns[: len(RESULT_COLUMNS)]) == RESULT_COLUMNS
    assert "final_accuracy" in table.columns
    assert len(table) == 4 and set(table["state"]) == {"complete"} and set(table["freezing"]) == {"freeze"}
    assert sorted(zip(table["frozen_layers"], table["train_size"], strict=True)) == [(0, 32), (0, 64), (2, 32), (2, 64)]
    assert table["best_dev"].ge(table["final_dev"]).all()
    assert table["n_eval"].eq(872).all() and table["majority_baseline"].between(0.49, 0.51).all()
    assert table["n_layers"].eq(2).all() and table["model"].eq(str(tiny_model)).all()
    columns = list(table.columns)[: len(RESULT_COLUMNS)]  # added at the end of the contract, in this order
    assert (
        columns[-11:]
        == [
            *("order_seed", "trained_with", "pair_encoding", "arm", "arm_level"),
            *("fuse", "fuse_k", "fusion"),
            *("pool_score", "n_pool", "pool_artifact"),
        ]
        == RESULT_COLUMNS[-11:]
    )
    assert table[["pool_score", "n_pool", "pool_artifact"]].isna().all().all()  # no [evaluation]: no pool
    assert table["fuse"].eq("off").all() and table["fuse_k"].eq(1).all() and table["fusion"].eq("unfused").all()
    assert table["trained_with"].eq(table["task"]).all()  # trained alone
    assert table["pair_encoding"].eq("cross").all()  # a single-sentence task: one input
    assert table["order_seed"].eq(table["seed"]).all()  # not crossed: the data order followed the seed
    assert (
        table.loc[table.frozen_layers == 2, "trainable_params"]
        < table.loc[table.frozen_layers == 0, "trainable_params"].max()
    ).all()
    csv_out = tmp_path / "results.csv"
    assert main(["export", "--storage", storage, "-o", str(csv_out)]) == 0
    assert len(pd.read_csv(csv_out)) == 4

    # The exact subsets are stored with the study and are the nested stratified ones.
    study = load_study(open_storage(storage), "test-study")
    stored = study.user_attrs["subsets:sst2:draw=0"]
    labels = pd.read_parquet(glue_dir / "sst2" / "train.parquet")["label"].to_numpy()
    expected = nested_subsets(labels, [32, 64], draw_seed=0)
    assert stored == {"32": expected[32].tolist(), "64": expected[64].tolist()}
    assert set(stored["32"]) < set(stored["64"])
    assert study.user_attrs["spec_hash"] == load_spec(spec_path).spec_hash
    assert study.user_attrs["provenance"]["tasks"]["sst2"]["version"] == 1

    # Per-example predictions of every checkpoint a metric uses (best, heldout, final) are artifacts next to the DB.
    from optuna.artifacts import FileSystemArtifactStore, download_artifact

    trial = study.get_trials(states=(TrialState.COMPLETE,))[0]
    target = tmp_path / "pred.parquet"
    download_artifact(
        artifact_store=FileSystemArtifactStore(str(db) + ".artifacts"),
        artifact_id=trial.user_attrs["predictions_artifact"],
        file_path=str(target),
    )
    predictions = pd.read_parquet(target)
    assert len(predictions) == 872 and {"idx", "label", "prediction", "logit_0", "logit_1"} <= set(predictions)
    assert int((predictions.prediction == predictions.label).sum()) == trial.user_attrs["n_correct"]
    attrs = trial.user_attrs
    assert {"prediction_best", "prediction_heldout", "logit_best_1", "logit_heldout_1", "half"} <= set(predictions)
    # Each checkpoint's stored predictions reproduce the metric it scored and the stored counts.
    assert int((predictions.prediction_best == predictions.label).sum()) == attrs["n_correct_best"]
    assert attrs["n_correct_best"] / 872 == pytest.approx(attrs["best_dev"])
    score = predictions[predictions.half == "score"]
    assert len(score) == attrs["n_eval_heldout"] == 872 - len(study.user_attrs["validation_select:sst2"])
    assert int((score.prediction_heldout == score.label).sum()) == attrs["n_correct_heldout"]
    assert attrs["n_correct_heldout"] / attrs["n_eval_heldout"] == pytest.approx(attrs["heldout"])
    share = predictions.prediction_best.value_counts(normalize=True).max()
    assert attrs["top_class_share_best"] == pytest.approx(share)
    assert table[["n_correct_best", "n_correct_heldout", "top_class_share_final"]].notna().all().all()
    curve = trial.user_attrs["curve"]
    assert [p["step"] for p in curve][-1] == trial.user_attrs["n_steps"]
    assert max(p["full"] for p in curve) == trial.user_attrs["best_dev"] == trial.value


def test_resume_after_max_trials_never_reruns_or_loses_a_cell(tmp_path: Path, tiny_model: Path, glue_dir: Path) -> None:
    spec_path = _spec(tmp_path, tiny_model)
    db = tmp_path / "study.db"
    storage = f"sqlite:///{db}"
    assert _run(["run", "--study", str(spec_path), "--storage", storage, "--max-trials", "3"], glue_dir) == 0
    first = _cell_counts(db)
    assert sum(first.values()) == 3
    assert _run(["run", "--study", str(spec_path), "--storage", storage], glue_dir) == 0
    second = _cell_counts(db)
    assert len(second) == 4 and set(second.values()) == {1}
    study = load_study(open_storage(storage), None)
    done_first = {t.number for t in study.get_trials() if t.user_attrs["cell_key"] in first}
    assert len(done_first) == 3  # the first three trials were kept, not re-run
    assert _run(["run", "--study", str(spec_path), "--storage", storage], glue_dir) == 0
    assert len(study.get_trials()) == 4  # a third run has nothing to do


def test_changed_spec_for_existing_study_is_refused(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    assert (
        _run(["run", "--study", str(_spec(tmp_path, tiny_model)), "--storage", storage, "--max-trials", "1"], glue_dir)
        == 0
    )
    changed = _spec(tmp_path, tiny_model, training={"epochs": 2})
    assert _run(["run", "--study", str(changed), "--storage", storage], glue_dir) == 2
    assert "training.epochs: 1.0 -> 2.0" in capsys.readouterr().err
    assert sum(_cell_counts(tmp_path / "study.db").values()) == 1


def _interrupt_in_a_trial(command: list[str], cwd: Path, db: Path, signum: signal.Signals, after: int) -> None:
    """Start ``command`` (a ``freezestats run``), send ``signum`` once a trial runs after ``after`` have completed;
    the run must end with 130 and say how to resume."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # A shell that starts the suite in the background makes its children ignore SIGINT, and Python then
    # installs no KeyboardInterrupt handler; restore the default, as in an interactive terminal.
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    wait_until_a_trial_runs(proc, db, after)
    proc.send_signal(signum)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output
    assert "Run the same command again to resume" in output


def test_ctrl_c_and_sigterm_stop_cleanly_and_each_rerun_resumes(
    tmp_path: Path, tiny_model: Path, glue_dir: Path
) -> None:
    """Ctrl-C, then SIGTERM from a scheduler or ``kill`` in the rerun: each time the running cell goes back
    uncounted, and the next run resumes where the last stopped (one study, three runs, so each cell trains once
    and two of them once more)."""
    # 4 cells, each a few seconds of training: long enough for a signal to land inside one.
    spec_path = _spec(tmp_path, tiny_model, grid={"train_sizes": [200, 400], "seeds": [1]}, training={"epochs": 3})
    db = tmp_path / "study.db"
    storage = f"sqlite:///{db}"
    command = [sys.executable, "-m", "freezestats", "run", "--study", str(spec_path), "--storage", storage,
               "--data-dir", str(glue_dir), "--no-progress"]  # fmt: skip
    done: dict[str, int] = {}
    for n_interrupted, signum in enumerate((signal.SIGINT, signal.SIGTERM), start=1):
        _interrupt_in_a_trial(command, tmp_path, db, signum, after=len(done))
        study = optuna.load_study(study_name="test-study", storage=storage)
        interrupted = [t for t in study.get_trials() if t.state == TrialState.FAIL]
        assert len(interrupted) == n_interrupted
        assert all(t.user_attrs["fail_reason"] == "interrupted" for t in interrupted)
        now = {t.user_attrs["cell_key"]: t.number for t in study.get_trials(states=(TrialState.COMPLETE,))}
        assert all(now[key] == number for key, number in done.items())  # completed cells were not re-run
        assert len(done) < len(now) < 4
        done = now

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    rerun = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    counts = _cell_counts(db)
    assert len(counts) == 4 and set(counts.values()) == {1}  # no missing and no duplicate cell
    after = {t.user_attrs["cell_key"]: t.number for t in study.get_trials(states=(TrialState.COMPLETE,))}
    assert all(after[key] == number for key, number in done.items())
    assert {t.user_attrs["cell_key"] for t in interrupted} <= set(after)  # the interrupted cells ran again


@pytest.mark.parametrize("fuse", ["off", "2"])
def test_no_thread_starts_where_ctrl_c_raises_at_once(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, monkeypatch: pytest.MonkeyPatch, fuse: str
) -> None:
    """A KeyboardInterrupt inside ``Thread.start`` of a pool's worker leaves a thread no one wakes, and the process
    hangs at exit after "Interrupted" (CI saw it: transformers' weight-loading pool, started inside the training).
    So no thread may start while the gate is open, with any arm, fused or not; the gate's setting is undone when
    the run ends."""
    import threading

    from freezestats.runner.interrupts import InterruptGate

    monkeypatch.delenv("HF_DEACTIVATE_ASYNC_LOAD", raising=False)
    gates: list[InterruptGate] = []
    started_open: list[str] = []
    real_enter, real_start = InterruptGate.__enter__, threading.Thread.start

    def enter(self: InterruptGate) -> InterruptGate:
        gates.append(self)
        return real_enter(self)

    def start(self: threading.Thread) -> None:
        if any(gate._open for gate in gates):
            started_open.append(self.name)
        real_start(self)

    monkeypatch.setattr(InterruptGate, "__enter__", enter)
    monkeypatch.setattr(threading.Thread, "start", start)
    raw = simple_spec(model=str(tiny_model), grid={"train_sizes": [32], "seeds": [1, 2]},
                      training={"epochs": 1, "eval_every_epochs": 0.5, "max_length": 64})  # fmt: skip
    del raw["grid"]["frozen_layers"]
    raw["arms"] = [{"kind": "freeze", "frozen_layers": [1]}, {"kind": "reinit", "top_layers": [1]},
                   {"kind": "lora", "rank": [2]}, {"kind": "probe", "layers": ["last"]}]  # fmt: skip
    spec = write_spec(tmp_path, raw)
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    assert _run(["run", "--study", str(spec), "--storage", storage, "--fuse", fuse], glue_dir) == 0
    assert gates and started_open == []
    assert "HF_DEACTIVATE_ASYNC_LOAD" not in os.environ


@pytest.mark.parametrize("where", ["claimed", "suggesting", "recording"])
def test_ctrl_c_outside_the_fine_tuning_waits_for_a_safe_point(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Ctrl-C just after Optuna claimed a trial, or while a trial writes to the database, never cuts a write short.

    Before the training it requeues the cell when the training starts; while the record is written it lets the
    trial complete and stops after it. A KeyboardInterrupt inside SQLAlchemy's commit once left the requeue
    waiting on the interrupted connection until CI's timeout.
    """
    import freezestats.runner as runner_module

    spec_path = _spec(tmp_path, tiny_model)
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    calls = Counter()

    def ctrl_c_on_second_call(name: str, real):
        def wrapper(*args, **kwargs):
            calls[name] += name == "claimed" or isinstance(args[0], optuna.Trial)  # trial records, not study attrs
            sent_now = calls[name] == 2 and not calls["sent"]
            if sent_now:
                calls["sent"] += 1
                os.kill(os.getpid(), signal.SIGINT)
            result = real(*args, **kwargs)
            calls["finished after the signal"] += sent_now
            return result

        return wrapper

    if where == "claimed":  # between Optuna's ask() and the objective: the trial is RUNNING, no code of ours ran
        real = optuna.study._optimize.get_heartbeat_thread
        monkeypatch.setattr(optuna.study._optimize, "get_heartbeat_thread", ctrl_c_on_second_call(where, real))
    else:
        name = {"suggesting": "suggest_cell", "recording": "set_user_attrs"}[where]
        monkeypatch.setattr(runner_module, name, ctrl_c_on_second_call(where, getattr(runner_module, name)))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    try:
        assert _run(["run", "--study", str(spec_path), "--storage", storage], glue_dir) == 130
    finally:
        signal.signal(signal.SIGINT, previous)
    assert calls["finished after the signal"] == 1  # the write the signal landed in was not cut short
    study = load_study(open_storage(storage), None)
    states = Counter(t.state for t in study.get_trials())
    if where == "recording":
        assert states == {TrialState.COMPLETE: 2, TrialState.WAITING: 2}, states
        assert all("best_dev" in t.user_attrs for t in study.get_trials(states=(TrialState.COMPLETE,)))
    else:
        assert states == {TrialState.COMPLETE: 1, TrialState.FAIL: 1, TrialState.WAITING: 3}, states
        (failed,) = study.get_trials(states=(TrialState.FAIL,))
        assert failed.user_attrs["fail_reason"] == "interrupted"
    monkeypatch.undo()
    assert _run(["run", "--study", str(spec_path), "--storage", storage], glue_dir) == 0
    assert len(_cell_counts(tmp_path / "study.db")) == 4


def test_full_model_lr_search(tmp_path: Path, tiny_model: Path, glue_dir: Path) -> None:
    """The search runs on its own seeds and chooses on the selection half; the grid runs fresh."""
    spec_path = _spec(
        tmp_path,
        tiny_model,
        grid={"frozen_layers": [0, 2], "train_sizes": [32], "seeds": [1, 2]},
        lr_search={"mode": "full-model", "rates": [1e-5, 1e-3]},
    )
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    assert _run(["run", "--study", str(spec_path), "--storage", storage], glue_dir) == 0
    study = load_study(open_storage(storage), None)
    table = results_table(study)
    search = table[table.role == "search"]
    grid = table[table.role == "grid"]
    assert len(search) == 2 * 2 and set(search.frozen_layers) == {0}
    assert set(search.seed) == {1001, 1002}  # the default search seeds, disjoint from the grid's
    assert len(grid) == 2 * 2 and set(grid.seed) == {1, 2}
    assert grid.reused_from_trial.isna().all()  # frozen 0 too is a fresh run, not a search run
    for k in (0, 2):
        assert sorted(grid[grid.frozen_layers == k].seed) == [1, 2]  # seeds paired across freeze levels
    trials = {t.number: t for t in study.get_trials()}
    select = {}
    for row in search.itertuples():
        attrs = trials[row.trial].user_attrs
        assert attrs["select_best"] == max(point["select"] for point in attrs["curve"])
        select.setdefault(row.learning_rate, []).append(attrs["select_best"])
    means = {rate: sum(v) / len(v) for rate, v in select.items()}
    best = min(r for r in means if means[r] == max(means.values()))
    assert set(grid.learning_rate) == {best}  # the chosen rate is visible in the export
    assert set(grid.lr_search) == {"full-model"}
    assert study.user_attrs["lr_choice"] == [["sst2", 32, 0, 0, best]]
    record = study.user_attrs["lr_search_record"]
    assert record["select_metric"] == "select" and record["seeds"] == [1001, 1002] and record["reuse"] is False
    assert {rate: mean for *_, rate, mean, n in record["means"]} == pytest.approx(means)
    assert not any(trials[n].user_attrs["lr_search_reuse"] for n in table.trial)
    assert len(study.get_trials()) == 8  # every run ran: 4 search runs and the 4 grid cells


def test_study_database_opens_in_optuna_dashboard(tmp_path: Path, tiny_model: Path, glue_dir: Path) -> None:
    """optuna-dashboard's own WSGI app lists the study and serves its trials with params and attributes."""
    import json
    import wsgiref.util

    from optuna_dashboard import wsgi

    spec_path = _spec(tmp_path, tiny_model, grid={"frozen_layers": [0], "train_sizes": [32]})
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    assert _run(["run", "--study", str(spec_path), "--storage", storage], glue_dir) == 0
    app = wsgi(storage)

    def get(path: str) -> dict:
        environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path}
        wsgiref.util.setup_testing_defaults(environ)
        status: list[str] = []
        body = b"".join(app(environ, lambda s, h, *a: status.append(s)))
        assert status[0].startswith("200"), (path, status, body[:300])
        return json.loads(body)

    studies = get("/api/studies")["study_summaries"]
    assert [s["study_name"] for s in studies] == ["test-study"]
    detail = get(f"/api/studies/{studies[0]['study_id']}")
    (trial,) = detail["trials"]
    assert trial["state"] == "Complete"
    assert {p["name"] for p in trial["params"]} == {
        "task",
        "frozen_layers",
        "train_size",
        "subset_draw",
        "seed",
        "learning_rate",
    }
    assert any(a["key"] == "best_dev" for a in trial["user_attrs"])


def test_read_commands_never_create_or_touch_a_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "typo.db"
    assert main(["status", "--storage", f"sqlite:///{missing}"]) == 2
    assert main(["export", "--storage", f"sqlite:///{missing}", "-o", str(tmp_path / "r.csv")]) == 2
    assert "No study database at" in capsys.readouterr().err
    assert not missing.exists()
    assert main(["status", "--storage", "not-a-url"]) == 2
    assert "must be an Optuna storage URL" in capsys.readouterr().err


def test_export_refuses_bad_output_and_keeps_the_db(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import hashlib

    spec_path = _spec(tmp_path, tiny_model, grid={"frozen_layers": [0], "train_sizes": [32]})
    db = tmp_path / "study.db"
    storage = f"sqlite:///{db}"
    assert _run(["run", "--study", str(spec_path), "--storage", storage], glue_dir) == 0
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    assert main(["export", "--storage", storage, "-o", str(tmp_path / "results.xlsx")]) == 2
    assert "must end in .parquet or .csv" in capsys.readouterr().err
    assert main(["export", "--storage", storage, "-o", str(tmp_path / "no" / "dir" / "r.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["export", "--storage", storage, "--study-name", "other", "-o", str(tmp_path / "r.csv")]) == 2
    assert "No study named 'other'" in capsys.readouterr().err
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert not list(tmp_path.glob("*.partial"))


def test_per_cell_lr_search_with_reuse_copies_the_search_runs(tmp_path: Path, tiny_model: Path, glue_dir: Path) -> None:
    """``reuse = true``: the old behaviour, searching on the grid seeds and copying the winners, flagged."""
    spec_path = _spec(
        tmp_path,
        tiny_model,
        grid={"frozen_layers": [0, 2], "train_sizes": [32], "seeds": [1]},
        lr_search={"mode": "per-cell", "rates": [1e-5, 1e-3], "select_metric": "best_dev", "reuse": True},
    )
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    assert _run(["run", "--study", str(spec_path), "--storage", storage], glue_dir) == 0
    study = load_study(open_storage(storage), None)
    table = results_table(study)
    search, grid = table[table.role == "search"], table[table.role == "grid"]
    assert len(search) == 4 and len(grid) == 2
    assert set(search.seed) == set(grid.seed) == {1}
    for k in (0, 2):
        rows = search[search.frozen_layers == k].sort_values("learning_rate")
        best = rows.learning_rate.iloc[int(rows.best_dev.to_numpy().argmax())]
        (chosen,) = grid[grid.frozen_layers == k].learning_rate
        assert chosen == best
    assert grid.reused_from_trial.notna().all()  # every grid cell is one of its search runs
    trials = {t.number: t for t in study.get_trials()}
    assert len(trials) == 6
    for row in grid.itertuples():
        assert trials[row.trial].user_attrs["lr_search_reuse"] is True
        assert row.best_dev == trials[int(row.reused_from_trial)].user_attrs["best_dev"]
    assert study.user_attrs["lr_search_record"]["reuse"] is True


def test_extend_adds_only_the_new_cells(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    small = _spec(tmp_path, tiny_model, grid={"frozen_layers": [0], "train_sizes": [32], "seeds": [1]})
    assert _run(["run", "--study", str(small), "--storage", storage], glue_dir) == 0
    first = {t.user_attrs["cell_key"]: t.number for t in load_study(open_storage(storage), None).get_trials()}

    bigger = _spec(tmp_path, tiny_model, grid={"frozen_layers": [0, 2], "train_sizes": [32, 64], "seeds": [1]})
    assert _run(["run", "--study", str(bigger), "--storage", storage], glue_dir) == 2
    assert "pass --extend if the change only adds grid values" in capsys.readouterr().err
    assert _run(["run", "--study", str(bigger), "--storage", storage, "--extend"], glue_dir) == 0
    assert "4/4 cells complete, 0 failed, 3 trials run now" in capsys.readouterr().out
    study = load_study(open_storage(storage), None)
    after = {t.user_attrs["cell_key"]: t.number for t in study.get_trials()}
    assert len(after) == 4 and all(after[k] == n for k, n in first.items())  # the old cell was not re-run
    assert set(study.user_attrs["subsets:sst2:draw=0"]) == {"32", "64"}
    assert len(study.user_attrs["spec_history"]) == 1

    changed = _spec(
        tmp_path,
        tiny_model,
        grid={"frozen_layers": [0, 2], "train_sizes": [32, 64], "seeds": [1]},
        training={"epochs": 2},
    )
    assert _run(["run", "--study", str(changed), "--storage", storage, "--extend"], glue_dir) == 2
    assert "--extend may only add grid values" in capsys.readouterr().err
    fewer = _spec(tmp_path, tiny_model, grid={"frozen_layers": [0], "train_sizes": [32, 64], "seeds": [1]})
    assert _run(["run", "--study", str(fewer), "--storage", storage, "--extend"], glue_dir) == 2
    assert "grid.frozen_layers drops [2]" in capsys.readouterr().err


@pytest.mark.parametrize("frozen_dropout", ["on", "off"])
def test_frozen_dropout_is_labelled_in_the_export(tmp_path: Path, tiny_model: Path, glue_dir: Path, frozen_dropout):
    training = {"epochs": 1, "eval_every_epochs": 0.5, "max_length": 64, "frozen_dropout": frozen_dropout}
    spec_path = _spec(tmp_path, tiny_model, grid={"frozen_layers": [0, 2], "train_sizes": [32]}, training=training)
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    assert _run(["run", "--study", str(spec_path), "--storage", storage], glue_dir) == 0
    table = results_table(load_study(open_storage(storage), None)).set_index("frozen_layers")
    assert set(table["frozen_dropout"]) == {frozen_dropout}
    study = load_study(open_storage(storage), None)
    cached = {t.params["frozen_layers"]: t.user_attrs for t in study.get_trials(states=(TrialState.COMPLETE,))}
    assert cached[2]["eval_prefix_cached"] and not cached[0]["eval_prefix_cached"]  # k=0: nothing frozen
    assert cached[2]["train_prefix_cached"] is (frozen_dropout == "off")


def test_resuming_on_a_machine_with_another_auto_precision_says_so(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    import freezestats.training as training_module

    spec_path = _spec(tmp_path, tiny_model, training={"precision": "auto"})
    args = ["run", "--study", str(spec_path), "--storage", f"sqlite:///{tmp_path / 'study.db'}"]
    monkeypatch.setattr(training_module, "cpu_has_native_bf16", lambda: False)  # a CPU without bf16
    assert _run([*args, "--max-trials", "2"], glue_dir) == 0
    assert "finished trials ran in" not in capsys.readouterr().err
    monkeypatch.setattr(training_module, "cpu_has_native_bf16", lambda: True)  # resumed on one with bf16
    assert _run(args, glue_dir) == 0
    assert "this study's finished trials ran in fp32; the trials run now will use bf16" in capsys.readouterr().err
    table = results_table(load_study(open_storage(f"sqlite:///{tmp_path / 'study.db'}"), None))
    assert sorted(table["precision"]) == ["bf16", "bf16", "fp32", "fp32"]


def test_crossed_order_seeds_run_record_and_extend(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every (seed, order_seed) pair runs once; --extend with a new order seed runs only its cells."""
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    grid = {"frozen_layers": [0], "train_sizes": [32], "seeds": [1, 2]}
    crossed = _spec(tmp_path, tiny_model, grid={**grid, "order_seeds": [1, 2]})
    assert _run(["run", "--study", str(crossed), "--storage", storage], glue_dir) == 0
    assert "4/4 cells complete, 0 failed" in capsys.readouterr().out
    study = load_study(open_storage(storage), None)
    trials = study.get_trials(states=(TrialState.COMPLETE,))
    assert {(t.params["seed"], t.params["order_seed"]) for t in trials} == {(1, 1), (1, 2), (2, 1), (2, 2)}
    assert all(t.user_attrs["order_seed"] == t.params["order_seed"] for t in trials)
    assert all(t.user_attrs["cell_key"].endswith(f"|order_seed={t.params['order_seed']}") for t in trials)
    table = results_table(study)
    assert list(table.columns[: len(RESULT_COLUMNS)]) == RESULT_COLUMNS
    assert list(zip(table.seed, table.order_seed, strict=True)) == [(1, 1), (1, 2), (2, 1), (2, 2)]
    first = {t.user_attrs["cell_key"]: t.number for t in study.get_trials()}

    more = _spec(tmp_path, tiny_model, grid={**grid, "order_seeds": [1, 2, 3]})
    assert _run(["run", "--study", str(more), "--storage", storage], glue_dir) == 2
    assert "grid.order_seeds: [1, 2] -> [1, 2, 3]" in capsys.readouterr().err
    assert _run(["run", "--study", str(more), "--storage", storage, "--extend"], glue_dir) == 0
    assert "6/6 cells complete, 0 failed, 2 trials run now" in capsys.readouterr().out
    study = load_study(open_storage(storage), None)
    after = {t.user_attrs["cell_key"]: t.number for t in study.get_trials()}
    assert len(after) == 6 and all(after[k] == n for k, n in first.items())  # the first four were not re-run
    assert sorted(results_table(study).query("order_seed == 3").seed) == [1, 2]

    fewer = _spec(tmp_path, tiny_model, grid={**grid, "order_seeds": [1, 3]})
    assert _run(["run", "--study", str(fewer), "--storage", storage, "--extend"], glue_dir) == 2
    assert "grid.order_seeds drops [2]" in capsys.readouterr().err
    uncrossed = _spec(tmp_path, tiny_model, grid=grid)
    assert _run(["run", "--study", str(uncrossed), "--storage", storage, "--extend"], glue_dir) == 2
    assert "grid.order_seeds is removed" in capsys.readouterr().err
    assert len(load_study(open_storage(storage), None).get_trials()) == 6


def test_order_seeds_cannot_be_added_to_an_uncrossed_study(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    grid = {"frozen_layers": [0], "train_sizes": [32], "seeds": [1]}
    assert _run(["run", "--study", str(_spec(tmp_path, tiny_model, grid=grid)), "--storage", storage], glue_dir) == 0
    crossed = _spec(tmp_path, tiny_model, grid={**grid, "order_seeds": [1, 2]})
    assert _run(["run", "--study", str(crossed), "--storage", storage, "--extend"], glue_dir) == 2
    assert "grid.order_seeds is added" in capsys.readouterr().err
    assert len(load_study(open_storage(storage), None).get_trials()) == 1


def test_trials_stored_before_order_seeds_export_their_seed_as_order_seed() -> None:
    from freezestats.spec import parse_spec
    from freezestats.study.cells import Cell
    from freezestats.study.trials import cell_distributions

    spec = parse_spec(simple_spec())
    study = optuna.create_study(study_name="old")
    for seed in (1, 2):
        cell = Cell("sst2", 0, 32, 0, seed, 5e-5)
        study.add_trial(
            optuna.trial.create_trial(
                params=cell.params(),
                distributions=cell_distributions(spec),
                value=0.5,
                user_attrs={"cell_key": cell.key, "role": "grid", "best_dev": 0.5},  # no order_seed attribute
            )
        )
    crossed = Cell("sst2", 0, 32, 0, 1, 5e-5, order_seed=9)
    study.add_trial(
        optuna.trial.create_trial(
            params=crossed.params(),
            distributions=cell_distributions(spec, crossed=True),
            value=0.5,
            user_attrs={"cell_key": crossed.key, "role": "grid", "best_dev": 0.5},
        )
    )
    table = results_table(study)
    assert list(zip(table.seed, table.order_seed, strict=True)) == [(1, 1), (1, 9), (2, 2)]


def test_a_search_before_a_crossed_grid_runs_uncrossed(tmp_path: Path, tiny_model: Path, glue_dir: Path) -> None:
    """Search runs keep their seed's data order (no order_seed param); the grid after it is crossed."""
    spec_path = _spec(
        tmp_path,
        tiny_model,
        grid={"frozen_layers": [0], "train_sizes": [32], "seeds": [1], "order_seeds": [4, 5]},
        lr_search={"mode": "full-model", "rates": [1e-5, 1e-3]},
    )
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    assert _run(["run", "--study", str(spec_path), "--storage", storage], glue_dir) == 0
    study = load_study(open_storage(storage), None)
    table = results_table(study)
    search, grid = table[table.role == "search"], table[table.role == "grid"]
    assert sorted(search.seed) == [1001, 1001] and search.order_seed.eq(search.seed).all()
    assert sorted(zip(grid.seed, grid.order_seed, strict=True)) == [(1, 4), (1, 5)]
    params = {t.user_attrs["role"]: set(t.params) for t in study.get_trials()}
    assert "order_seed" not in params["search"] and "order_seed" in params["grid"]

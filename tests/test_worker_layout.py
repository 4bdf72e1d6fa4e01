"""``run --workers auto``: one worker process per core on a CPU (up to four), one elsewhere, said at start."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from _factories import simple_spec, write_spec
from optuna.trial import TrialState

from freezestats.cli.main import main
from freezestats.exceptions import SpecError
from freezestats.runner._layout import AUTO, choose_workers, default_workers, parse_workers, usable_cores
from freezestats.study.trials import load_study, open_storage

FILE_DB = "sqlite:///study.db"


SMALL_GLUE = True  # runs score 256 dev rows per task (conftest.glue_dir): these tests check the study, not scores


def _choose(requested: int | str = AUTO, **override: object):
    where = {"device_type": "cpu", "storage": FILE_DB, "devices": None, "max_trials": None, "cores": 2}
    return choose_workers(requested, **{**where, **override})


def test_auto_on_cpu_is_one_worker_per_core_up_to_four() -> None:
    assert [_choose(cores=c).workers for c in (1, 2, 3, 4, 16)] == [1, 2, 3, 4, 4]
    assert "2 worker processes x 1 torch thread(s) on this 2-core CPU" in _choose(cores=2).reason
    assert "4 worker processes x 4 torch thread(s)" in _choose(cores=16).reason
    assert "auto stops at 4" in _choose(cores=16).reason and "auto stops" not in _choose(cores=4).reason


def test_auto_keeps_one_worker_where_more_would_be_wrong_or_untested() -> None:
    assert _choose(device_type="cuda").workers == 1
    assert _choose(storage="sqlite:///:memory:").workers == 1
    assert _choose(max_trials=3).workers == 1  # a pool could overshoot the trial budget
    assert _choose(devices=["cuda:0", "cuda:1"]).workers == 2
    assert _choose(3, device_type="cuda").workers == 3  # a count is obeyed as given


def test_workers_option_and_environment_parse_or_fail_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_workers("auto") == AUTO and parse_workers(" AUTO ") == AUTO and parse_workers("3") == 3
    for bad, message in (("0", "must be >= 1"), ("two", "a number >= 1 or 'auto'"), ("1.5", "'1.5'")):
        with pytest.raises(SpecError, match=message):
            parse_workers(bad)
    monkeypatch.delenv("FREEZESTATS_WORKERS")
    assert default_workers() == AUTO
    monkeypatch.setenv("FREEZESTATS_WORKERS", "2")
    assert default_workers() == 2


def test_run_with_auto_workers_says_so_and_runs_every_cell_once(
    tmp_path: Path,
    tiny_model: Path,
    glue_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("FREEZESTATS_WORKERS")  # the suite pins 1; this test runs the real default
    spec = write_spec(
        tmp_path,
        simple_spec(
            model=str(tiny_model),
            grid={"frozen_layers": [0, 2], "train_sizes": [32], "seeds": [1, 2]},
            training={"epochs": 1, "eval_every_epochs": 1, "max_length": 64},
        ),
    )
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    assert main(["run", "--study", str(spec), "--storage", storage, "--data-dir", str(glue_dir), "--no-progress"]) == 0
    out = capsys.readouterr().out
    expected = choose_workers(AUTO, device_type="cpu", storage=storage, devices=None, max_trials=None)
    assert f"Workers: {expected.reason}" in out and expected.workers == min(usable_cores(), 4)
    assert "4/4 cells complete, 0 failed, 4 trials run now" in out
    study = load_study(open_storage(storage), None)
    done = Counter(t.user_attrs["cell_key"] for t in study.get_trials(states=(TrialState.COMPLETE,)))
    assert len(done) == 4 and set(done.values()) == {1}


def _enqueued(tmp_path: Path, tiny_model: Path, glue_dir: Path, grid: dict) -> str:
    spec = write_spec(tmp_path, simple_spec(model=str(tiny_model), grid=grid, training={"epochs": 1}))
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    args = ["run", "--study", str(spec), "--storage", storage, "--data-dir", str(glue_dir), "--enqueue-only"]
    assert main(args) == 0
    return storage


def test_auto_starts_no_more_workers_than_claims_left(tmp_path: Path, tiny_model: Path, glue_dir: Path) -> None:
    from freezestats.runner._fused import waiting_claims
    from freezestats.runner._pool import WorkerPool

    storage = _enqueued(tmp_path, tiny_model, glue_dir, {"frozen_layers": [0, 2], "train_sizes": [32], "seeds": [1, 2]})
    study = load_study(open_storage(storage), None)
    assert waiting_claims(study, "off") == 4
    assert waiting_claims(study, "2") == 2 and waiting_claims(study, "auto") == 2  # one group per depth
    assert waiting_claims(study, "3") == 2  # a group of two is one claim of up to 3
    pool = WorkerPool(storage, study.study_name, 4, None, None, tmp_path / "artifacts", auto=True)
    assert pool.size_for(study) == (4, "")
    fused = WorkerPool(storage, study.study_name, 4, None, None, tmp_path / "artifacts", fuse="auto", auto=True)
    n, why = fused.size_for(study)
    assert n == 2 and f"2 worker processes x {max(1, usable_cores() // 2)} torch thread(s)" in why
    assert "since 2 claims are left" in why
    asked = WorkerPool(storage, study.study_name, 4, None, None, tmp_path / "artifacts", fuse="auto")
    assert asked.size_for(study) == (4, "")  # a count given with --workers is obeyed


def test_a_one_cell_study_under_auto_runs_one_worker_on_every_core(
    tmp_path: Path,
    tiny_model: Path,
    glue_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if usable_cores() < 2:
        pytest.skip("needs two cores: auto starts one worker on one core anyway")
    monkeypatch.delenv("FREEZESTATS_WORKERS")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # as outside the suite: the pool sets the threads

    def no_pool(*args: object, **kwargs: object) -> None:
        raise AssertionError("a worker pool was started for the one cell left")

    monkeypatch.setattr("freezestats.runner._pool.WorkerPool.run", no_pool)
    spec = write_spec(
        tmp_path,
        simple_spec(model=str(tiny_model), grid={"frozen_layers": [0], "train_sizes": [32], "seeds": [1]}),
    )
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    assert main(["run", "--study", str(spec), "--storage", storage, "--data-dir", str(glue_dir), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert f"auto: 1 claim left, so this process runs it on {usable_cores()} threads" in captured.err
    (trial,) = load_study(open_storage(storage), None).get_trials(states=(TrialState.COMPLETE,))
    assert trial.user_attrs["torch_threads"] == usable_cores()


_HOLD_A_SHARE = """
import sys, time
from pathlib import Path
from freezestats.runner._threads import ThreadShare
share = ThreadShare(Path(sys.argv[1]), 4)
print("holding", flush=True)
if sys.argv[2] == "release":
    sys.stdin.readline()
    share.release()
    print("released", flush=True)
time.sleep(120)
"""


def _hold_a_share(folder: Path, then: str) -> subprocess.Popen:
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLD_A_SHARE, str(folder), then],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "holding"
    return child


def test_a_killed_or_finished_worker_hands_its_threads_to_the_running_ones(tmp_path: Path) -> None:
    """The threads of a worker killed with SIGKILL (no cleanup ran) or done claiming go to the workers alive."""
    import torch

    from freezestats.runner._threads import ThreadShare

    killed, finished = _hold_a_share(tmp_path, "sleep"), _hold_a_share(tmp_path, "release")
    try:
        mine = ThreadShare(tmp_path, 4, min_interval=0.0)
        assert mine.alive() == 3 and mine.threads() == 1
        killed.kill()
        killed.wait(timeout=30)
        assert mine.alive() == 2 and mine.threads() == 2
        assert len(list(tmp_path.glob("*.lock"))) == 2  # the dead worker's file is gone
        assert finished.stdin is not None and finished.stdout is not None
        finished.stdin.write("go\n")
        finished.stdin.flush()
        assert finished.stdout.readline().strip() == "released"
        assert mine.alive() == 1 and mine.threads() == 4
        before = torch.get_num_threads()
        try:
            mine.rebalance()
            assert torch.get_num_threads() == 4
        finally:
            torch.set_num_threads(before)
        mine.release()
        assert list(tmp_path.glob("*.lock")) == []
    finally:
        for child in (killed, finished):
            child.kill()
            child.wait(timeout=30)

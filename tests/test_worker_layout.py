"""``run --workers auto``: one worker process per core on a CPU (up to four), one elsewhere, said at start."""

from __future__ import annotations

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

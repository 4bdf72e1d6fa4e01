"""N ``freezestats worker`` processes on this machine: ``freezestats run --workers N``.

Workers are separate processes (not threads) because each holds a model and its own torch threads; they
claim cells from the study database like workers on other machines, so one code path serves both.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import optuna
from optuna.trial import TrialState

from freezestats.exceptions import StorageError
from freezestats.runner._layout import usable_cores
from freezestats.study.queue import is_enqueued_cell

__all__ = ["WorkerPool"]


class WorkerPool:
    """N ``freezestats worker`` processes on this machine, started for each phase of a run."""

    def __init__(
        self,
        storage: str,
        study_name: str,
        n: int,
        devices: Sequence[str] | None,
        data_dir: str | Path | None,
        artifacts: Path,
        fuse: str = "off",
    ) -> None:
        self.commands = []
        for i in range(n):
            command = [
                sys.executable,
                "-m",
                "freezestats",
                "worker",
                "--storage",
                storage,
                "--study-name",
                study_name,
                "--no-progress",
                "--artifacts",
                str(artifacts),
            ]
            if fuse != "off":
                command += ["--fuse", fuse]
            if devices:
                command += ["--device", devices[i % len(devices)]]
            if data_dir is not None:
                command += ["--data-dir", str(data_dir)]
            self.commands.append(command)

    def run(self, study: optuna.Study, poll: Callable[[], None]) -> None:
        """Start the workers and call ``poll`` while they run; the caller counts what they ran from the DB
        (:func:`finished_runs`), also when Ctrl-C stops them."""
        env = dict(os.environ)
        # N workers on one machine share its cores: without this, each would start one thread per core.
        env.setdefault("OMP_NUM_THREADS", str(max(1, usable_cores() // len(self.commands))))
        with tempfile.TemporaryDirectory() as tmp:
            logs = [Path(tmp) / f"worker{i}.log" for i in range(len(self.commands))]
            procs = []
            for command, log in zip(self.commands, logs, strict=True):
                with log.open("w") as sink:  # a file, not a pipe: a chatty worker can never block on a full pipe
                    procs.append(subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env))
            try:
                while any(p.poll() is None for p in procs):
                    poll()
                    time.sleep(1.0)
            except KeyboardInterrupt:
                # SIGTERM, not SIGINT: a worker started from a background job inherits SIGINT ignored, while
                # its gate (freezestats.runner.interrupts) takes SIGTERM as the same request and requeues its cell.
                for p in procs:
                    if p.poll() is None:
                        p.send_signal(signal.SIGTERM)
                for p in procs:
                    p.wait(timeout=120)
                raise
            for p, log in zip(procs, logs, strict=True):
                if p.returncode not in (0, 1):
                    tail = log.read_text().strip()[-500:]
                    raise StorageError(f"A worker exited with status {p.returncode}: {tail}")


def finished_runs(study: optuna.Study) -> set[int]:
    """Trials that ran a cell to the end (COMPLETE or FAIL), not counting recorded copies."""
    return {
        t.number
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))
        if is_enqueued_cell(t) and "reused_from_trial" not in t.user_attrs
    }

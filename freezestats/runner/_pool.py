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
from freezestats.runner._fused import waiting_claims
from freezestats.runner._layout import usable_cores
from freezestats.runner._threads import SHARE_ENV, TOTAL_ENV
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
        auto: bool = False,
    ) -> None:
        self.n = n
        self.auto = auto  # `--workers auto`: start no more workers than there are claims to run
        self.fuse = fuse
        self.devices = devices
        self.base = [sys.executable, "-m", "freezestats", "worker", "--storage", storage, "--study-name", study_name]
        self.base += ["--no-progress", "--artifacts", str(artifacts)]
        if fuse != "off":
            self.base += ["--fuse", fuse]
        if data_dir is not None:
            self.base += ["--data-dir", str(data_dir)]

    def commands(self, n: int) -> list[list[str]]:
        """The command lines of ``n`` workers (each with its device, cycled, where devices are listed)."""
        devices = self.devices
        return [self.base + (["--device", devices[i % len(devices)]] if devices else []) for i in range(n)]

    def size_for(self, study: optuna.Study) -> tuple[int, str]:
        """The workers to start now, and why when ``auto`` starts fewer than its layout: never more than the
        claims waiting (cells, or fused groups), since a worker with nothing to claim only holds a core. One
        claim left means no worker at all: the caller runs it in its own process, which saves a worker's start
        (its imports, data and model checks)."""
        if not self.auto:
            return self.n, ""
        claims = waiting_claims(study, self.fuse)
        if claims >= self.n:
            return self.n, ""
        if claims <= 1:
            return 1, f"Workers: auto: {claims} claim left, so this process runs it on {usable_cores()} threads."
        threads = max(1, usable_cores() // claims)
        return (
            claims,
            f"Workers: auto: {claims} worker processes x {threads} torch thread(s), since {claims} claims are left.",
        )

    def run(self, study: optuna.Study, poll: Callable[[], None], n: int | None = None) -> None:
        """Start ``n`` workers (default: the pool's size) and call ``poll`` while they run; the caller counts what
        they ran from the DB (:func:`finished_runs`), also when Ctrl-C stops them."""
        n = self.n if n is None else n
        env = dict(os.environ)
        with tempfile.TemporaryDirectory() as tmp:
            # N workers on one machine share its cores: without OMP_NUM_THREADS each would start one thread per
            # core. The workers share N times their threads (cores // N, or the user's OMP_NUM_THREADS), and one
            # that exits hands its part to the trials still running (freezestats.runner._threads).
            per_worker = int(env.get("OMP_NUM_THREADS") or max(1, usable_cores() // n))
            share = Path(tmp) / "threads"
            share.mkdir()
            env.update({"OMP_NUM_THREADS": str(per_worker), SHARE_ENV: str(share), TOTAL_ENV: str(per_worker * n)})
            logs = [Path(tmp) / f"worker{i}.log" for i in range(n)]
            procs = []
            for command, log in zip(self.commands(n), logs, strict=True):
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

"""Hand the threads of a worker that has nothing left to claim to the trials still running on this machine.

A pool of N workers on C cores starts each with C // N torch threads. When fewer cells are left than workers,
the idle workers exit while the others still train; without a hand-over their cores sit idle until the last
trial ends. So every pool worker holds an exclusive ``flock`` on a file of its own in a folder the pool makes
(``$FREEZESTATS_THREAD_SHARE``), from its start to its exit, and a running trial, at its step boundaries, counts
the files still locked: with A workers alive it runs on ``max(1, T // A)`` threads (``torch.set_num_threads``),
where T is what the pool handed out in all (N workers x C // N threads, or x the user's ``OMP_NUM_THREADS``).

Why a lock and not a counter: the kernel drops a process's locks when it dies, so a worker killed mid-trial
(SIGKILL included) frees its share at once, and no cleanup step can be missed. The dead worker's file is removed
by the next worker that finds it unlocked.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

__all__ = ["SHARE_ENV", "TOTAL_ENV", "ThreadShare", "torch_threads"]

SHARE_ENV = "FREEZESTATS_THREAD_SHARE"
"""The folder of the pool's lock files; set by the pool for its workers only."""
TOTAL_ENV = "FREEZESTATS_THREADS_IN_ALL"
"""The threads the pool's workers share between them: N workers times each one's threads at start."""


class ThreadShare:
    """This worker's place in the pool's share of threads: hold it while alive, ask it for the threads to run on."""

    def __init__(self, folder: Path, total: int, min_interval: float = 1.0) -> None:
        self.folder = folder
        self.total = total
        self.min_interval = min_interval  # seconds between two looks at the folder: a step is ~10-100 ms on a CPU
        self._own_path = folder / f"{os.getpid()}.lock"
        self._own: IO[str] | None = self._own_path.open("w")
        fcntl.flock(self._own, fcntl.LOCK_EX)
        self._looked = -float("inf")

    @classmethod
    def from_environment(cls) -> ThreadShare | None:
        """The share a pool set up for this worker process, or None outside a pool."""
        folder, total = os.environ.get(SHARE_ENV), os.environ.get(TOTAL_ENV)
        if not folder or not total or not Path(folder).is_dir():
            return None
        return cls(Path(folder), int(total))

    def alive(self) -> int:
        """Workers that still hold their lock (this one included while it has not released it)."""
        count = 0
        for path in self.folder.glob("*.lock"):
            if path == self._own_path:
                count += self._own is not None
                continue
            try:
                with path.open("r") as probe:
                    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except FileNotFoundError:  # released between the listing and the look
                continue
            except BlockingIOError:  # its worker holds it: alive
                count += 1
                continue
            path.unlink(missing_ok=True)  # unlocked: its worker exited or was killed
        return count

    def threads(self) -> int:
        """``max(1, total // alive)``: the threads this worker's trial may use now."""
        return max(1, self.total // max(1, self.alive()))

    def rebalance(self) -> None:
        """At a step boundary: take the threads this worker's share is worth now (at most once per interval)."""
        now = time.monotonic()
        if now - self._looked < self.min_interval:
            return
        self._looked = now
        import torch

        threads = self.threads()
        if threads != torch.get_num_threads():
            torch.set_num_threads(threads)

    def release(self) -> None:
        """Nothing left to claim: give the threads back (the file goes first, so no one counts it after)."""
        if self._own is None:
            return
        self._own_path.unlink(missing_ok=True)
        self._own.close()  # closing drops the lock
        self._own = None


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block on ``n`` torch threads, then restore the process's own count."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)

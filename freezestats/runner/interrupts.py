"""Ctrl-C that lands only where the runner can record it.

A KeyboardInterrupt can arrive anywhere: inside Optuna between claiming a trial and calling the
objective, or while the objective writes the trial's results. Landing there, it leaves a trial FAIL
with no reason (so the cell is counted as a failure of its own) or RUNNING until its heartbeat goes
stale. The gate defers a first Ctrl-C outside the regions the runner marks as interruptible (the
fine-tuning itself) and delivers it at the next safe point; a second Ctrl-C is delivered at once, so a
user can always force a stop.

SIGTERM is the same request from a machine: a batch scheduler preempting a job, ``kill``, a container
stopping. Without the gate it kills the worker mid-trial, the trial stays RUNNING until its heartbeat goes
stale, and then counts as a failure of its cell (one of its ``max_retries``). With it, SIGTERM is delivered
as a KeyboardInterrupt like Ctrl-C: the cell goes back in the queue uncounted.

No Python thread may start where the gate is open. A KeyboardInterrupt that lands while a thread pool starts a
worker (inside ``Thread.start``, before the pool records the worker's queue) leaves a non-daemon thread that no
one ever wakes, and the interpreter then waits for it at exit forever: the run prints "Interrupted" and hangs.
transformers (5.x) loads weights with a ``ThreadPoolExecutor`` made per ``from_pretrained``, inside the
training, so while the gate is entered it loads them synchronously (``HF_DEACTIVATE_ASYNC_LOAD``; a MiniLM load
takes 0.035 s either way on a 2-core CPU).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType

__all__ = ["InterruptGate"]


#: The handler each signal must have for the gate to take it over: Python's own for SIGINT (a process that
#: ignores SIGINT, as background jobs do, keeps ignoring it), the default action (terminate) for SIGTERM.
_TAKEN_OVER = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}

#: transformers' switch for loading weights without its thread pool (see the module's docstring).
_SYNC_LOAD = "HF_DEACTIVATE_ASYNC_LOAD"


class InterruptGate:
    """Installs SIGINT and SIGTERM handlers while entered (in the main thread, where each still has its default
    behaviour: Ctrl-C raising KeyboardInterrupt, SIGTERM terminating)."""

    def __init__(self) -> None:
        self._open = False
        self._pending = False
        self._previous: dict[int, object] = {}
        self._sync_load_before: str | None = None

    def __enter__(self) -> InterruptGate:
        self._sync_load_before = os.environ.get(_SYNC_LOAD)
        os.environ[_SYNC_LOAD] = "1"
        # Signal handlers can be set only from the main thread.
        if threading.current_thread() is threading.main_thread():
            for signum, default in _TAKEN_OVER.items():
                previous = signal.getsignal(signum)
                if previous is default:
                    self._previous[signum] = previous
                    signal.signal(signum, self._handle)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)  # type: ignore[arg-type]
        self._previous = {}
        self._pending = False
        if self._sync_load_before is None:
            os.environ.pop(_SYNC_LOAD, None)
        else:
            os.environ[_SYNC_LOAD] = self._sync_load_before

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._open or self._pending:
            raise KeyboardInterrupt
        self._pending = True

    @property
    def pending(self) -> bool:
        """A Ctrl-C arrived and has not been delivered yet."""
        return self._pending

    def check(self) -> None:
        """A safe point: deliver a deferred Ctrl-C."""
        if self._pending:
            self._pending = False
            raise KeyboardInterrupt

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        """Ctrl-C raises at once inside this block (after a deferred one is delivered on entry)."""
        self.check()
        self._open = True
        try:
            yield
        finally:
            self._open = False

"""Ctrl-C that lands only where the runner can record it.

A KeyboardInterrupt can arrive anywhere: inside Optuna between claiming a trial and calling the
objective, or while the objective writes the trial's results. Landing there, it leaves a trial FAIL
with no reason (so the cell is counted as a failure of its own) or RUNNING until its heartbeat goes
stale. The gate defers a first Ctrl-C outside the regions the runner marks as interruptible (the
fine-tuning itself) and delivers it at the next safe point; a second Ctrl-C is delivered at once, so a
user can always force a stop.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType

__all__ = ["InterruptGate"]


class InterruptGate:
    """Installs a SIGINT handler while entered (in the main thread, if Ctrl-C raises KeyboardInterrupt there)."""

    def __init__(self) -> None:
        self._open = False
        self._pending = False
        self._previous: object = None
        self._installed = False

    def __enter__(self) -> InterruptGate:
        # Only where Python's own handler is active: a process that ignores SIGINT keeps ignoring it,
        # and signal handlers can be set only from the main thread.
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.getsignal(signal.SIGINT)
            if self._previous is signal.default_int_handler:
                signal.signal(signal.SIGINT, self._handle)
                self._installed = True
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)  # type: ignore[arg-type]
            self._installed = False
        self._pending = False

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

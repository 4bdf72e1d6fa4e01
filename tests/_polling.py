"""Wait, from outside, until a ``freezestats run`` subprocess is inside a trial: the moment the interruption tests
(Ctrl-C, SIGTERM, SIGKILL) send their signal."""

from __future__ import annotations

import sqlite3
import subprocess
import time
from pathlib import Path


def wait_until_a_trial_runs(proc: subprocess.Popen, db: Path, after: int = 0, timeout: float = 240) -> None:
    """Return once the study in the SQLite file ``db`` has more than ``after`` COMPLETE trials and one RUNNING;
    fails the test if ``proc`` ends first.

    Polls often: the signal must land early in a trial, not in the few milliseconds after its results are
    written (a Ctrl-C there waits for the next trial; a kill there leaves nothing RUNNING). Reads with a read-only
    connection, so the test never races the runner to create the schema.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
                states = [row[0] for row in con.execute("SELECT state FROM trials")]
        except sqlite3.Error:  # not created yet
            continue
        if states.count("COMPLETE") > after and "RUNNING" in states:
            break
    if proc.poll() is not None:
        output = proc.communicate()[0] if proc.stdout else ""
        raise AssertionError(f"the run ended before it could be interrupted: {output}")

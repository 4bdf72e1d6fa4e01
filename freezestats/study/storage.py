"""Opening a study database: Optuna RDB storage with heartbeats, and SQLite made safe for several workers.

Kept apart from :mod:`freezestats.study.trials` (which re-exports :func:`open_storage`, :func:`artifact_dir_for` and
:data:`DEFAULT_STORAGE`) because this is about the database engine, not about cells: how a URL is checked,
how a dead worker's trial is detected (heartbeats recorded before a claim), and how SQLite transactions are
made atomic so that two workers never claim one trial. Nothing here knows what a cell or a spec is, except
that a trial failed for a lost heartbeat is handed back to :func:`freezestats.study.queue.requeue`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from freezestats.exceptions import StorageError

__all__ = ["DEFAULT_STORAGE", "GRACE_PERIOD", "HEARTBEAT_INTERVAL", "artifact_dir_for", "open_storage"]

DEFAULT_STORAGE = "sqlite:///freezestats.db"
#: Seconds between heartbeats of a running trial, and how long a silent trial may stay RUNNING.
HEARTBEAT_INTERVAL = 30
GRACE_PERIOD = 120


def open_storage(
    url: str,
    must_exist: bool = False,
    heartbeat_interval: int = HEARTBEAT_INTERVAL,
    grace_period: int = GRACE_PERIOD,
    max_retries: int | None = None,
) -> optuna.storages.BaseStorage:
    """Optuna storage for ``url``; RDB URLs get heartbeats so trials of a dead worker are detected.

    ``must_exist`` is for commands that only read (status, export): they must not create an empty
    SQLite file where the user mistyped a path.
    """
    if "://" not in url:
        raise StorageError(
            f"A storage must be an Optuna storage URL such as {DEFAULT_STORAGE} or "
            f"postgresql://user@host/db, but got {url!r}."
        )
    if url.startswith("sqlite:///"):
        db = Path(url.removeprefix("sqlite:///")).expanduser().resolve()
        if must_exist and not db.is_file():
            raise StorageError(f"No study database at {db} ({url}).")
        parent = db.parent
        if not parent.is_dir():
            raise StorageError(f"The folder of the SQLite study database does not exist: {parent} ({url}).")
        if not os.access(parent, os.W_OK):
            raise StorageError(f"The folder of the SQLite study database is not writable: {parent} ({url}).")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for attempt in range(3):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # heartbeats are stable
                storage = _HeartbeatOnClaimStorage(
                    url,
                    heartbeat_interval=heartbeat_interval,
                    grace_period=grace_period,
                    heartbeat_stale_trial_callback=None if max_retries is None else _requeue_stale(max_retries),
                    engine_kwargs=_engine_kwargs(url),
                )
        except Exception as err:  # SQLAlchemy raises driver-specific errors for the same miss
            if "already exists" in str(err) and attempt < 2:
                continue  # another process created the schema at the same moment; now it exists
            raise StorageError(f"Cannot open the study storage {url}: {str(err).splitlines()[0]}") from err
        if url.startswith("sqlite"):
            _make_sqlite_transactions_atomic(storage.engine, read_only=must_exist)
        return storage
    raise AssertionError("unreachable")


class _HeartbeatOnClaimStorage(optuna.storages.RDBStorage):
    """RDB storage that records a trial's first heartbeat just before a worker claims it.

    Optuna's ``ask`` turns a WAITING trial RUNNING and only then starts the trial's heartbeat thread. A
    worker killed in between leaves a RUNNING trial with no heartbeat at all, and ``fail_stale_trials``
    only fails trials whose last heartbeat is old, so that cell would stay RUNNING (and never re-run)
    forever. Recording the heartbeat first closes the window: a claimed trial always has one. A worker
    that then loses the claim to another leaves only a heartbeat the winner overwrites at once.
    """

    def set_trial_state_values(self, trial_id: int, state: TrialState, values: Sequence[float] | None = None) -> bool:
        if state == TrialState.RUNNING and self.heartbeat_interval is not None:
            self.record_heartbeat(trial_id)
        return super().set_trial_state_values(trial_id, state, values)

    def set_trial_user_attrs(self, trial_id: int, attrs: Mapping[str, Any]) -> None:
        """Store every attribute of ``attrs`` in one transaction: all of them or, on an error, none.

        Why: Optuna commits each ``set_trial_user_attr`` on its own, and a finished run stores about 45
        attributes. On SQLite every commit takes the database's write lock and syncs the file, so a run's
        record was ~45 commits, serialised across all workers (``bench/storage_writes.py``). This is Optuna's
        own per-attribute upsert, run in one session; it is private in Optuna 4-5 (without it, as in 3.x, each
        attribute is stored on its own, as before), so a change there breaks ``tests/test_storage_writes.py``.
        """
        upsert = getattr(self, "_set_trial_attr_without_commit", None)
        if upsert is None:
            for key, value in attrs.items():
                self.set_trial_user_attr(trial_id, key, value)
            return
        from optuna.storages._rdb import models
        from optuna.storages._rdb.storage import _create_scoped_session

        with _create_scoped_session(self.scoped_session) as session:
            for key, value in attrs.items():
                upsert(session, models.TrialUserAttributeModel, trial_id, key, value)


def _make_sqlite_transactions_atomic(engine: Any, read_only: bool) -> None:
    """Make each SQLAlchemy transaction one SQLite transaction, so two workers cannot claim one trial.

    Python's sqlite3 driver sends BEGIN only before the first INSERT/UPDATE, so Optuna's claim of a
    WAITING trial (read the state, then write RUNNING) reads outside any transaction: two workers can
    both read WAITING and both run the cell, and the second ``tell`` fails ("Cannot tell a COMPLETE
    trial"). SQLAlchemy's documented remedy is to switch the driver's own BEGIN off and emit one at the
    start of every transaction. ``BEGIN IMMEDIATE`` takes the write lock up front, so a second writer
    waits (up to the connect timeout) instead of failing with a deadlock; commands that only read get a
    plain BEGIN, which works on a read-only file.
    """
    from sqlalchemy import event

    begin = "BEGIN" if read_only else "BEGIN IMMEDIATE"

    @event.listens_for(engine, "connect")
    def _no_driver_transactions(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        connection.exec_driver_sql(begin)

    engine.dispose()  # connections opened while Optuna set the schema up predate the listeners


def _requeue_stale(max_retries: int) -> Callable[[optuna.Study, FrozenTrial], None]:
    """Optuna calls this once per trial it fails for a lost heartbeat: the cell goes back in the queue."""

    def callback(study: optuna.Study, trial: FrozenTrial) -> None:
        from freezestats.study.queue import requeue

        requeue(study, trial, max_retries)

    return callback


def _engine_kwargs(url: str) -> dict[str, Any]:
    # SQLite: wait for a busy database instead of failing at once (heartbeats write from a thread).
    return {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {"pool_pre_ping": True}


def artifact_dir_for(url: str) -> Path:
    """Default artifact folder: ``<db>.artifacts`` beside a SQLite file, else ./freezestats-artifacts."""
    if url.startswith("sqlite:///"):
        db = Path(url.removeprefix("sqlite:///")).expanduser().resolve()
        return db.with_name(db.name + ".artifacts")
    return Path("freezestats-artifacts").resolve()

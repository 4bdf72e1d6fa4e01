"""Run a study: check everything, enqueue the cells, fine-tune them one by one, resume where it stopped.

``run_study`` is what ``freezestats run`` calls. It validates the whole study (spec, model, data, device)
before the first trial, stores the spec, the provenance and the exact train subsets with the study, then
works through the WAITING trials with Optuna's ``optimize`` (which gives each running trial a heartbeat
and marks an exception as a FAILED trial with its reason). Re-running it with the same spec and storage
resumes: COMPLETE cells are kept, interrupted ones are enqueued again.

This module holds the verbs and the scheduler that claims cells; each other job is a private module:
preparing a study (``_prepare``), one trial's run and record (``_trial``), the learning-rate search's
hand-over to the grid (``_search``), the worker pool (``_pool``), the progress display (``_progress``) and
provenance (``_provenance``). The objective that writes a trial's record stays here, beside the claim it
belongs to, so ``freezestats.runner.set_user_attrs`` is the one place a trial's record is written.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import optuna
from optuna.trial import TrialState

from freezestats.runner._fused import parse_fuse, run_fused_group, waiting_group
from freezestats.runner._layout import usable_cores
from freezestats.runner._pool import WorkerPool, finished_runs
from freezestats.runner._prepare import PreparedStudy, PreparedTask, prepare_study
from freezestats.runner._progress import Progress
from freezestats.runner._provenance import store_study_attrs, stored_carves, with_stored_carves
from freezestats.runner._search import grid_after_search
from freezestats.runner._threads import ThreadShare, torch_threads
from freezestats.runner._trial import run_cell
from freezestats.runner.interrupts import InterruptGate
from freezestats.spec.study import StudySpec
from freezestats.study.cells import Cell
from freezestats.study.data_identity import check_data_identity
from freezestats.study.queue import (
    INTERRUPTED,
    duplicate_claim,
    enqueue_cells,
    is_enqueued_cell,
    requeue,
    trials_by_cell,
)
from freezestats.study.storage import artifact_dir_for, open_storage
from freezestats.study.trials import SPEC_ATTR, create_or_load_study, load_study, set_user_attrs, suggest_cell

__all__ = ["PreparedStudy", "PreparedTask", "RunReport", "prepare_study", "run_study", "work_study"]


@dataclass(frozen=True)
class RunReport:
    """What a call of :func:`run_study` did."""

    study_name: str
    storage: str
    n_cells: int
    n_complete: int
    n_failed_cells: int
    n_run_now: int
    wall_seconds: float
    interrupted: bool = False


def run_study(
    spec: StudySpec,
    storage: str,
    *,
    data_dir: str | Path | None = None,
    artifact_dir: str | Path | None = None,
    max_trials: int | None = None,
    show_progress: bool = True,
    prepared: PreparedStudy | None = None,
    enqueue_only: bool = False,
    workers: int = 1,
    devices: Sequence[str] | None = None,
    extend: bool = False,
    fuse: str = "off",
    auto_workers: bool = False,
) -> RunReport:
    """Run (or resume) the study described by ``spec`` in ``storage``.

    With ``enqueue_only`` the study and its cells are created and nothing runs (workers started with
    :func:`work_study` anywhere run them). With ``workers > 1`` this process enqueues and N worker
    processes (one per entry of ``devices``, cycled) claim and run the cells; with ``auto_workers`` no more of them
    than there are claims left (:meth:`WorkerPool.size_for`). ``fuse`` (``off``, ``auto`` or K):
    claim up to K runs of a cell that differ only in their seed and train them fused (:mod:`._fused`).
    """
    started = time.perf_counter()
    prepared, study, artifacts = open_for_run(spec, storage, prepared, data_dir, artifact_dir, extend)
    if enqueue_only:
        search, grid = prepared.cells()
        enqueue_cells(study, search or grid, spec.execution.max_retries)  # with a search, the grid waits for it
        return _report(study, prepared, storage, started, n_run=0)
    pool = None
    if workers > 1:
        pool = WorkerPool(storage, spec.name, workers, devices, data_dir, artifacts, fuse, auto=auto_workers)
    runner = _Runner(prepared, study, artifacts, max_trials, show_progress, pool, fuse)  # a pool's bar counts cells
    interrupted = runner.until_done_or_interrupted(runner.run)
    return _report(study, prepared, storage, started, n_run=runner.n_run, interrupted=interrupted)


def open_for_run(
    spec: StudySpec,
    storage: str,
    prepared: PreparedStudy | None,
    data_dir: str | Path | None,
    artifact_dir: str | Path | None,
    extend: bool = False,
) -> tuple[PreparedStudy, optuna.Study, Path]:
    """Create or load the study that ``run`` (fixed or adaptive) works on, with its stored carves and provenance,
    after failing any trial whose worker stopped sending heartbeats: the one start-up both loops share."""
    prepared = prepared or prepare_study(spec, data_dir)
    backend = open_storage(storage, **_heartbeat(spec))
    study = create_or_load_study(backend, spec, extend=extend, data_identity=prepared.data_identity())
    prepared = with_stored_carves(study, prepared, data_dir)
    artifacts = Path(artifact_dir) if artifact_dir else artifact_dir_for(storage)
    store_study_attrs(study, prepared, artifacts)
    _fail_stale(study)
    return prepared, study, artifacts


def work_study(
    storage: str,
    study_name: str | None = None,
    *,
    device: str | None = None,
    data_dir: str | Path | None = None,
    artifact_dir: str | Path | None = None,
    max_trials: int | None = None,
    show_progress: bool = True,
    fuse: str = "off",
) -> RunReport:
    """Claim and run WAITING cells of an existing study until none is left (``freezestats worker``).

    The spec is read from the study itself, so a worker needs only the storage URL; ``device``
    overrides the spec's device (e.g. ``cuda:1``) without changing the study.
    """
    started = time.perf_counter()
    study = load_study(open_storage(storage, must_exist=True), study_name)
    spec = StudySpec.from_stored(study.user_attrs[SPEC_ATTR], source=f"study '{study.study_name}'")
    if device is not None:
        spec = replace(spec, training=replace(spec.training, device=device))
    study = load_study(open_storage(storage, **_heartbeat(spec)), study.study_name)
    prepared = prepare_study(spec, data_dir, carves=stored_carves(study))
    check_data_identity(study, prepared.data_identity())
    artifacts = Path(artifact_dir or study.user_attrs.get("artifact_dir") or artifact_dir_for(storage))
    store_study_attrs(study, prepared, artifacts)
    _fail_stale(study)
    runner = _Runner(prepared, study, artifacts, max_trials, show_progress, None, fuse)
    interrupted = runner.until_done_or_interrupted(runner.drain)
    return _report(study, prepared, storage, started, n_run=runner.n_run, interrupted=interrupted)


def _heartbeat(spec: StudySpec) -> dict[str, int]:
    ex = spec.execution
    return {"heartbeat_interval": ex.heartbeat_interval, "grace_period": ex.grace_period, "max_retries": ex.max_retries}


def _fail_stale(study: optuna.Study) -> None:
    """RUNNING trials whose worker stopped sending heartbeats become FAIL (and are retried)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


def _report(
    study: optuna.Study, prepared: PreparedStudy, storage: str, started: float, n_run: int, interrupted: bool = False
) -> RunReport:
    by_cell = trials_by_cell(study)
    complete = sum(any(t.state == TrialState.COMPLETE for t in trials) for trials in by_cell.values())
    failed = sum(
        not any(t.state in (TrialState.COMPLETE, TrialState.WAITING, TrialState.RUNNING) for t in trials)
        for trials in by_cell.values()
    )
    return RunReport(
        study_name=study.study_name,
        storage=storage,
        n_cells=prepared.n_cells(),
        n_complete=complete,
        n_failed_cells=failed,
        n_run_now=n_run,
        wall_seconds=time.perf_counter() - started,
        interrupted=interrupted,
    )


class _Runner:
    """Claims WAITING trials one at a time and fine-tunes them, with a progress display."""

    def __init__(
        self,
        prepared: PreparedStudy,
        study: optuna.Study,
        artifacts: Path,
        max_trials: int | None,
        show_progress: bool,
        pool: WorkerPool | None = None,
        fuse: str = "off",
    ) -> None:
        from optuna.artifacts import FileSystemArtifactStore

        from freezestats.encoder.prefix_cache import PrefixCache

        self.prepared = prepared
        self.spec = prepared.spec
        self.study = study
        artifacts.mkdir(parents=True, exist_ok=True)
        self.artifact_store = FileSystemArtifactStore(str(artifacts))
        self.max_trials = max_trials
        self.n_run = 0
        self.progress = Progress(show_progress, prepared.n_cells())
        self.pool = pool
        self.fuse = parse_fuse(fuse)  # `off`, `auto` or K: runs of one cell group claimed and trained together
        self.prefix_cache = PrefixCache()  # frozen-layer outputs, shared by this process's trials
        self.interrupts = InterruptGate()  # Ctrl-C lands inside a trial's fine-tuning or between trials
        self.threads = ThreadShare.from_environment()  # a pool's worker: its share of the machine's threads
        # Optuna logs a traceback per failed trial; we print one line and store the reason instead.
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        self._note_mixed_precision()

    def _note_mixed_precision(self) -> None:
        """Say so when this process will train in another precision than the study's finished trials did.

        ``precision = "auto"`` resolves per machine (bf16 on GPUs and bf16-capable CPUs, fp32 elsewhere),
        so a study resumed on other hardware can mix precisions; each trial records its own, and the
        analysis can be restricted to one.
        """
        finished = self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        ran = {t.user_attrs["precision"] for t in finished if is_enqueued_cell(t) and "precision" in t.user_attrs}
        now = self.prepared.precision
        if ran and ran != {now}:
            self.progress.note(
                f"Note: this study's finished trials ran in {', '.join(sorted(ran))}; the trials run now will "
                f"use {now} (training.precision = {self.spec.training.precision!r} on this machine). Each trial "
                "records its precision (the `precision` column of the export); set it explicitly to keep one."
            )

    def run(self) -> None:
        """Both phases: the learning-rate search (if any), then the grid."""
        search, grid = self.prepared.cells()
        if search:
            self._enqueue_and_drain(search)
            if not self._budget_left():
                return
            grid = grid_after_search(self.study, self.spec, self.prepared.pool_sizes)
        self._enqueue_and_drain(grid)

    def _enqueue_and_drain(self, cells: list[Cell]) -> None:
        """Enqueue, run, and enqueue again what failed (up to ``max_retries`` times per cell)."""
        while self._budget_left():
            added = enqueue_cells(self.study, cells, self.spec.execution.max_retries)
            self.interrupts.check()
            if not added and not self._waiting():
                return
            n_workers, why = self.pool.size_for(self.study) if self.pool is not None else (1, "")
            if why:
                self.progress.note(why)
            if self.pool is not None and n_workers > 1:
                before = finished_runs(self.study)
                try:
                    self.pool.run(self.study, poll=self._poll_pool, n=n_workers)
                finally:  # counted from the DB, so a stop with Ctrl-C still reports what the workers ran
                    self.n_run += len(finished_runs(self.study) - before)
            elif self.pool is not None:  # `auto` with one claim left: here, on every core
                with torch_threads(usable_cores()):
                    self.drain()
            else:
                self.drain()

    def on_step(self, step: int, total: int) -> None:
        """A training step ended: take the threads of pool workers that have exited, then show the step."""
        if self.threads is not None:
            self.threads.rebalance()
        self.progress.step(step, total)

    def _poll_pool(self) -> None:
        self.progress.set_done(self._n_complete())
        self.interrupts.check()  # raises in the pool's wait loop, which passes Ctrl-C on to the workers

    def until_done_or_interrupted(self, work: Callable[[], None]) -> bool:
        """Do ``work`` (:meth:`run` or :meth:`drain`) behind the Ctrl-C gate; True when Ctrl-C stopped it.

        The interrupted cell is already back in the queue by then, so the caller only reports the stop.
        """
        try:
            with self.interrupts:
                work()
        except KeyboardInterrupt:
            return True
        finally:
            self.progress.stop()
        return False

    def _budget_left(self) -> bool:
        return self.max_trials is None or self.n_run < self.max_trials

    def _waiting(self) -> bool:
        return bool(self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))

    def drain(self) -> None:
        """Run WAITING trials in this process until none is left (or the trial budget is spent)."""
        self.progress.set_done(self._n_complete())
        while self._budget_left() and self._waiting():
            group = waiting_group(self) if self.fuse != "off" else []
            if self.max_trials is not None:
                group = group[: self.max_trials - self.n_run]
            if len(group) > 1:
                _fail_stale(self.study)  # as `optimize` does before each trial
                run_fused_group(self, group)
                self.interrupts.check()
                self.progress.set_done(self._n_complete())
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                self.study.optimize(self._objective, n_trials=1, catch=(Exception,), gc_after_trial=False)
            self.interrupts.check()
            self.progress.set_done(self._n_complete())
        if self.threads is not None:  # nothing left to claim: the trials still running take this worker's threads
            self.threads.release()

    def _n_complete(self) -> int:
        return sum(
            1 for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if is_enqueued_cell(t)
        )

    def _objective(self, trial: optuna.Trial) -> float:
        """Claim the trial's cell, run it and store its record; a failure or Ctrl-C puts the cell back."""
        if not is_enqueued_cell(trial):
            # Another worker took the last WAITING cell between our check and our claim.
            trial.set_user_attr("stray", True)
            raise optuna.TrialPruned("no enqueued cell was left to claim")
        if duplicate_claim(self.study, trial):  # the cell was enqueued twice at once; the other copy has it
            trial.set_user_attr("duplicate", True)
            raise optuna.TrialPruned("another trial of this cell ran or runs")
        self.n_run += 1  # counted here, so a stray claim (a race lost to another worker) is not a run
        if self.fuse != "off":  # a run of a `--fuse` worker that had nothing to fuse it with
            set_user_attrs(trial, {"fuse": self.fuse, "fuse_k": 1, "fusion": "alone: nothing to fuse it with"})
        try:
            # Ctrl-C raises at once only inside the training (run_cell's `interruptible` blocks). Raised inside a
            # database write (the suggestions here, the artifacts and the record after the training), it can
            # leave SQLAlchemy's connection mid-transaction and the requeue below waiting on it; there it is
            # deferred: to the training's start, or to the check after the trial, which is then COMPLETE.
            cell = suggest_cell(trial, self.spec)
            self.progress.start_cell(cell)
            record = run_cell(
                self.prepared,
                cell,
                trial,
                artifact_store=self.artifact_store,
                prefix_cache=self.prefix_cache,
                on_step=self.on_step,
                interruptible=self.interrupts.interruptible,
            )
            set_user_attrs(trial, record.attrs())
        except KeyboardInterrupt:  # the cell goes back in the queue and does not count as a failure
            trial.set_user_attr("fail_reason", INTERRUPTED)
            requeue(self.study, trial, self.spec.execution.max_retries, counted=False)
            raise
        except Exception as err:
            reason = f"{type(err).__name__}: {err}"[:2000]
            trial.set_user_attr("fail_reason", reason)
            again = requeue(self.study, trial, self.spec.execution.max_retries)
            where = trial.user_attrs.get("cell_key", "?")
            self.progress.note(f"trial {trial.number} ({where}) failed: {reason}" + (" (retrying)" if again else ""))
            raise
        return float(record.best_dev)

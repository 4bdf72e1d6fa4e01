"""Run a study: check everything, enqueue the cells, fine-tune them one by one, resume where it stopped.

``run_study`` is what ``freezestats run`` calls. It validates the whole study (spec, model, data, device)
before the first trial, stores the spec, the provenance and the exact train subsets with the study, then
works through the WAITING trials with Optuna's ``optimize`` (which gives each running trial a heartbeat
and marks an exception as a FAILED trial with its reason). Re-running it with the same spec and storage
resumes: COMPLETE cells are kept, interrupted ones are enqueued again.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pandas as pd
from optuna.trial import TrialState

from freezestats import __version__
from freezestats.backbone import load_tokenizer, n_layers_of
from freezestats.cells import Cell, CellRole, grid_cells, reusable_search_cell, search_cells
from freezestats.data import TaskData, load_task_data
from freezestats.exceptions import StorageError
from freezestats.freezing import get_strategy
from freezestats.interrupts import InterruptGate
from freezestats.lr_search import choose_rates, rate_means, search_score, select_half_best
from freezestats.metrics import is_failed_run, majority_baseline
from freezestats.predictions import checkpoint_counts, predictions_frame
from freezestats.spec import FULL, StudySpec, check_against
from freezestats.subsets import nested_subsets, validation_halves
from freezestats.tasks import get_task
from freezestats.trials import (
    INTERRUPTED,
    SPEC_ATTR,
    artifact_dir_for,
    copy_trial,
    create_or_load_study,
    enqueue_cells,
    is_enqueued_cell,
    load_study,
    open_storage,
    requeue,
    set_user_attrs,
    suggest_cell,
    trials_by_cell,
)

__all__ = ["PreparedStudy", "RunReport", "prepare_study", "run_study", "work_study"]


@dataclass
class PreparedTask:
    """A task's data with everything derived from it once per process."""

    data: TaskData
    subsets: dict[int, dict[int, np.ndarray]]  # draw -> size -> pool indices
    select_idx: np.ndarray
    score_idx: np.ndarray
    encoded: dict[str, Any] = field(default_factory=dict)  # filled lazily: "train", "validation", "rows"


@dataclass
class PreparedStudy:
    """A validated study, ready to run: what ``freezestats validate`` checks and ``run`` uses."""

    spec: StudySpec
    n_layers: int
    pool_sizes: dict[str, int]
    tasks: dict[str, PreparedTask]
    precision: str  # what ``training.precision`` resolves to on this machine (``auto`` depends on it)

    def cells(self) -> tuple[list[Cell], list[Cell]]:
        """(search cells, grid cells); grid cells that wait for a search are not listed."""
        return search_cells(self.spec, self.pool_sizes), grid_cells(self.spec, self.pool_sizes)

    def n_cells(self) -> int:
        """Trials the study will hold when done (search trials plus grid cells)."""
        g = self.spec.grid
        n_grid = len(self.spec.tasks) * len(g.train_sizes) * g.subset_draws * len(g.frozen_layers) * len(g.seeds)
        n_grid *= len(g.order_seeds) if g.order_seeds is not None else 1
        return n_grid + len(search_cells(self.spec, self.pool_sizes))


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


def prepare_study(spec: StudySpec, data_dir: str | Path | None = None) -> PreparedStudy:
    """Every check that can fail before training: model, strategy, data, frozen range, sizes, device."""
    from freezestats.training import resolve_device, resolve_precision

    get_strategy(spec.model.strategy)
    n_layers = n_layers_of(spec.model.name)
    precision = resolve_precision(spec.training.precision, resolve_device(spec.training.device))
    datasets = {name: load_task_data(get_task(name), data_dir) for name in spec.tasks}
    pool_sizes = {name: len(data.train) for name, data in datasets.items()}
    check_against(spec, n_layers, pool_sizes)
    tasks = {}
    sizes = [s for s in spec.grid.train_sizes if s != FULL]
    for name, data in datasets.items():
        regression = data.task.is_regression
        subsets = {
            draw: nested_subsets(data.train_labels, sizes, draw_seed=draw, regression=regression) if sizes else {}
            for draw in range(spec.grid.subset_draws)
        }
        if FULL in spec.grid.train_sizes:
            for draw_subsets in subsets.values():
                draw_subsets[pool_sizes[name]] = np.arange(pool_sizes[name], dtype=np.int64)
        select_idx, score_idx = validation_halves(data.validation_labels, regression=regression)
        tasks[name] = PreparedTask(data=data, subsets=subsets, select_idx=select_idx, score_idx=score_idx)
    return PreparedStudy(spec=spec, n_layers=n_layers, pool_sizes=pool_sizes, tasks=tasks, precision=precision)


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
) -> RunReport:
    """Run (or resume) the study described by ``spec`` in ``storage``.

    With ``enqueue_only`` the study and its cells are created and nothing runs (workers started with
    :func:`work_study` anywhere run them). With ``workers > 1`` this process enqueues and N worker
    processes (one per entry of ``devices``, cycled) claim and run the cells.
    """
    started = time.perf_counter()
    prepared = prepared or prepare_study(spec, data_dir)
    backend = open_storage(storage, **_heartbeat(spec))
    study = create_or_load_study(backend, spec, extend=extend)
    artifacts = Path(artifact_dir) if artifact_dir else artifact_dir_for(storage)
    _store_study_attrs(study, prepared, artifacts)
    _fail_stale(study)
    if enqueue_only:
        search, grid = prepared.cells()
        enqueue_cells(study, search or grid, spec.execution.max_retries)  # with a search, the grid waits for it
        return _report(study, prepared, storage, started, n_run=0)
    pool = None
    if workers > 1:
        pool = _WorkerPool(storage, spec.name, workers, devices, data_dir, artifacts)
    runner = _Runner(prepared, study, artifacts, max_trials, show_progress and pool is None, pool)
    interrupted = runner.until_done_or_interrupted(runner.run)
    return _report(study, prepared, storage, started, n_run=runner.n_run, interrupted=interrupted)


def work_study(
    storage: str,
    study_name: str | None = None,
    *,
    device: str | None = None,
    data_dir: str | Path | None = None,
    artifact_dir: str | Path | None = None,
    max_trials: int | None = None,
    show_progress: bool = True,
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
    prepared = prepare_study(spec, data_dir)
    artifacts = Path(artifact_dir or study.user_attrs.get("artifact_dir") or artifact_dir_for(storage))
    _store_study_attrs(study, prepared, artifacts)
    _fail_stale(study)
    runner = _Runner(prepared, study, artifacts, max_trials, show_progress, None)
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


class _WorkerPool:
    """N ``freezestats worker`` processes on this machine, started for each phase of a run."""

    def __init__(
        self,
        storage: str,
        study_name: str,
        n: int,
        devices: Sequence[str] | None,
        data_dir: str | Path | None,
        artifacts: Path,
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
            if devices:
                command += ["--device", devices[i % len(devices)]]
            if data_dir is not None:
                command += ["--data-dir", str(data_dir)]
            self.commands.append(command)

    def run(self, study: optuna.Study, poll: Callable[[], None]) -> int:
        """Start the workers, call ``poll`` while they run, return how many trials they ran (read from the DB)."""
        before = _finished_runs(study)
        env = dict(os.environ)
        # N workers on one machine share its cores: without this, each would start one thread per core.
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // len(self.commands))))
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
                for p in procs:
                    if p.poll() is None:
                        p.send_signal(signal.SIGINT)
                for p in procs:
                    p.wait(timeout=120)
                raise
            for p, log in zip(procs, logs, strict=True):
                if p.returncode not in (0, 1):
                    tail = log.read_text().strip()[-500:]
                    raise StorageError(f"A worker exited with status {p.returncode}: {tail}")
        return len(_finished_runs(study) - before)


def _finished_runs(study: optuna.Study) -> set[int]:
    """Trials that ran a cell to the end (COMPLETE or FAIL), not counting recorded copies."""
    return {
        t.number
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))
        if is_enqueued_cell(t) and "reused_from_trial" not in t.user_attrs
    }


class _Runner:
    """Claims WAITING trials one at a time and fine-tunes them, with a progress display."""

    def __init__(
        self,
        prepared: PreparedStudy,
        study: optuna.Study,
        artifacts: Path,
        max_trials: int | None,
        show_progress: bool,
        pool: _WorkerPool | None = None,
    ) -> None:
        from optuna.artifacts import FileSystemArtifactStore

        from freezestats.prefix_cache import PrefixCache

        self.prepared = prepared
        self.spec = prepared.spec
        self.study = study
        artifacts.mkdir(parents=True, exist_ok=True)
        self.artifact_store = FileSystemArtifactStore(str(artifacts))
        self.max_trials = max_trials
        self.n_run = 0
        self.progress = _Progress(show_progress, prepared.n_cells())
        self.pool = pool
        self.prefix_cache = PrefixCache()  # frozen-layer outputs, shared by this process's trials
        self.interrupts = InterruptGate()  # Ctrl-C lands inside a trial's fine-tuning or between trials
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
            grid = self._grid_after_search()
        self._enqueue_and_drain(grid)

    def _enqueue_and_drain(self, cells: list[Cell]) -> None:
        """Enqueue, run, and enqueue again what failed (up to ``max_retries`` times per cell)."""
        while self._budget_left():
            added = enqueue_cells(self.study, cells, self.spec.execution.max_retries)
            self.interrupts.check()
            if not added and not self._waiting():
                return
            if self.pool is not None:
                self.n_run += self.pool.run(self.study, poll=self._poll_pool)
            else:
                self.drain()

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
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                self.study.optimize(self._objective, n_trials=1, catch=(Exception,), gc_after_trial=False)
            self.interrupts.check()
            self.progress.set_done(self._n_complete())

    def _n_complete(self) -> int:
        return sum(
            1 for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if is_enqueued_cell(t)
        )

    def _grid_after_search(self) -> list[Cell]:
        """Choose the rates from the finished search trials, record the choice, return the grid cells.

        The rate is chosen on the search seeds by ``lr_search.select_metric`` (default: the selection
        half of the validation set); the grid, frozen 0 included, then runs fresh on the grid seeds.
        Only with ``lr_search.reuse`` are grid cells that a search run already ran recorded as copies
        of it (``reused_from_trial``, ``lr_search_reuse``) instead of being run.
        """
        search = self.spec.lr_search
        by_cell = trials_by_cell(self.study)
        results = []
        search_trials = {}
        for cell in search_cells(self.spec, self.prepared.pool_sizes):
            trial = next((t for t in by_cell.get(cell.key, []) if t.state == TrialState.COMPLETE), None)
            if trial is not None:
                results.append((cell, search_score(trial.user_attrs, search.select_metric)))
                search_trials[cell] = trial
        chosen = choose_rates(results)
        set_user_attrs(
            self.study,
            {
                "lr_choice": [[*group, rate] for group, rate in sorted(chosen.items())],
                "lr_search_record": {
                    "select_metric": search.select_metric,
                    "seeds": list(search.seeds),
                    "reuse": search.reuse,
                    # [task, train_size, subset_draw, frozen_layers, rate, mean, n_runs] per group and rate
                    "means": [
                        [*group, rate, mean, n]
                        for group, by_rate in rate_means(results).items()
                        for rate, (mean, n) in by_rate.items()
                    ],
                },
            },
        )
        remaining = []
        for cell in grid_cells(self.spec, self.prepared.pool_sizes, chosen):
            reusable = reusable_search_cell(self.spec, cell)
            source = search_trials.get(reusable) if reusable is not None else None
            already = any(t.state == TrialState.COMPLETE for t in by_cell.get(cell.key, []))
            if source is not None and not already:
                copy_trial(self.study, source, cell, self.spec)
            elif source is None:
                remaining.append(cell)
        return remaining

    def _objective(self, trial: optuna.Trial) -> float:
        if not is_enqueued_cell(trial):
            # Another worker took the last WAITING cell between our check and our claim.
            trial.set_user_attr("stray", True)
            raise optuna.TrialPruned("no enqueued cell was left to claim")
        self.n_run += 1  # counted here, so a stray claim (a race lost to another worker) is not a run
        try:
            with self.interrupts.interruptible():
                cell = suggest_cell(trial, self.spec)
                self.progress.start_cell(cell)
                record = self._run_cell(cell, trial)
                set_user_attrs(trial, record)
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
        return float(record["best_dev"])

    def _run_cell(self, cell: Cell, trial: optuna.Trial) -> dict[str, Any]:
        from freezestats.training import fine_tune

        task = self.prepared.tasks[cell.task]
        train, validation = self._encoded(cell)
        metric = self.spec.metric_for(cell.task)
        outcome = fine_tune(
            model_name=self.spec.model.name,
            task=task.data.task,
            metric=metric,
            train=train,
            validation=validation,
            select_idx=task.select_idx,
            score_idx=task.score_idx,
            strategy=self.spec.model.strategy,
            frozen_layers=cell.frozen_layers,
            seed=cell.seed,
            order_seed=cell.data_order_seed,
            learning_rate=cell.learning_rate,
            training=self.spec.training,
            tokenizer=load_tokenizer(self.spec.model.name),
            on_step=self.progress.step,
            prefix_cache=self.prefix_cache,
        )
        regression = task.data.task.is_regression
        labels = validation.labels
        baseline = majority_baseline(metric, train.labels, labels, regression)
        artifact_id = self._upload_predictions(trial, predictions_frame(outcome.checkpoints, labels, task.select_idx))
        return {
            "model": self.spec.model.name,
            "strategy": self.spec.model.strategy,
            "n_layers": self.prepared.n_layers,
            "metric": metric,
            "best_dev": outcome.summary.best_dev,
            "best_step": outcome.summary.best_step,
            "final_dev": outcome.summary.final_dev,
            "heldout": outcome.summary.heldout,
            "heldout_step": outcome.summary.heldout_step,
            "select_best": select_half_best(outcome.curve),  # what lr_search.select_metric = "select" uses
            "majority_baseline": baseline,
            "failed": is_failed_run(outcome.final_predictions, regression, outcome.summary.final_dev, baseline),
            **checkpoint_counts(outcome.checkpoints, labels, task.score_idx, regression),
            "final_metrics": outcome.final_metrics,
            "curve": outcome.curve,
            "lr_search": self.spec.lr_search.mode,
            "lr_search_reuse": self.spec.lr_search.reuse,
            "frozen_dropout": self.spec.training.frozen_dropout,
            "order_seed": cell.data_order_seed,  # the seed of the data order: `seed` itself unless crossed
            "eval_prefix_cached": outcome.extra["eval_prefix_cached"],
            "train_prefix_cached": outcome.extra["train_prefix_cached"],
            "trainable_params": outcome.trainable_params,
            "total_params": outcome.total_params,
            "n_steps": outcome.n_steps,
            "final_train_loss": outcome.final_train_loss,
            "wall_seconds": outcome.wall_seconds,
            "peak_mem_bytes": outcome.peak_mem_bytes,
            "peak_mem_kind": outcome.peak_mem_kind,
            "device": outcome.device,
            "precision": outcome.precision,
            "versions": _library_versions(),
            "predictions_artifact": artifact_id,
        }

    def _encoded(self, cell: Cell) -> tuple[Any, Any]:
        """The cell's train subset and the validation set, tokenized once per task and process."""
        from freezestats.training import encode_split

        task = self.prepared.tasks[cell.task]
        if not task.encoded:
            tokenizer = load_tokenizer(self.spec.model.name)
            max_length = self.spec.training.max_length
            rows = np.unique(np.concatenate([idx for draw in task.subsets.values() for idx in draw.values()]))
            train = task.data.train.iloc[rows]
            columns = task.data.task.text_columns
            task.encoded["rows"] = rows
            task.encoded["train"] = encode_split(
                [train[c].tolist() for c in columns],
                train["label"].to_numpy(),
                tokenizer,
                max_length,
                f"{cell.task}/train",
            )
            val = task.data.validation
            task.encoded["validation"] = encode_split(
                [val[c].tolist() for c in columns],
                val["label"].to_numpy(),
                tokenizer,
                max_length,
                f"{cell.task}/validation",
            )
        pool_idx = task.subsets[cell.subset_draw][cell.train_size]
        positions = np.searchsorted(task.encoded["rows"], pool_idx)
        return task.encoded["train"].subset(positions), task.encoded["validation"]

    def _upload_predictions(self, trial: optuna.Trial, frame: pd.DataFrame) -> str:
        from optuna.artifacts import upload_artifact

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"predictions_trial{trial.number}.parquet"
            frame.to_parquet(path, index=False)
            return upload_artifact(artifact_store=self.artifact_store, file_path=str(path), study_or_trial=trial)


def _store_study_attrs(study: optuna.Study, prepared: PreparedStudy, artifacts: Path) -> None:
    """Provenance and the exact subsets; stored once, and checked on resume (the data must not change)."""
    attrs: dict[str, Any] = {}
    for name, task in prepared.tasks.items():
        for draw, by_size in task.subsets.items():
            attrs[f"subsets:{name}:draw={draw}"] = {
                str(size): (
                    "all"
                    if size == prepared.pool_sizes[name] and FULL in prepared.spec.grid.train_sizes
                    else idx.tolist()
                )
                for size, idx in sorted(by_size.items())
            }
        attrs[f"validation_select:{name}"] = task.select_idx.tolist()
    for key, value in attrs.items():
        stored = study.user_attrs.get(key)
        if stored is None:
            set_user_attrs(study, {key: value})
        elif key.startswith("subsets:") and all(value.get(size) == idx for size, idx in stored.items()):
            if set(value) != set(stored):  # an extended grid adds sizes; the stored ones must not change
                set_user_attrs(study, {key: {**stored, **value}})
        elif stored != value:
            raise StorageError(
                f"The stored train subsets or validation halves of study '{study.study_name}' ({key}) differ from "
                f"those computed now: the task data changed since the study was created. Refusing to mix results."
            )
    if "provenance" not in study.user_attrs:
        set_user_attrs(study, {"provenance": _provenance(prepared), "artifact_dir": str(artifacts)})


def _provenance(prepared: PreparedStudy) -> dict[str, Any]:
    return {
        "freezestats_version": __version__,
        "git_hash": _git_hash(),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "spec_hash": prepared.spec.spec_hash,
        "spec_source": prepared.spec.source,
        "tasks": {
            name: {
                "version": t.data.task.version,
                "source": t.data.source,
                "n_train": len(t.data.train),
                "n_validation": len(t.data.validation),
            }
            for name, t in prepared.tasks.items()
        },
        "n_layers": prepared.n_layers,
        "platform": platform.platform(),
        "versions": _library_versions(),
    }


def _library_versions() -> dict[str, str]:
    import sys

    import torch
    import transformers

    return {
        "freezestats": __version__,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "optuna": optuna.__version__,
        "numpy": np.__version__,
    }


def _git_hash() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


class _Progress:
    """Rich progress: cells done / total with ETA, and the steps of the current cell."""

    def __init__(self, enabled: bool, total: int) -> None:
        self.enabled = enabled
        self._bar: Any = None
        if not enabled:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
        )
        self._cells = self._bar.add_task("cells", total=total)
        self._steps = self._bar.add_task("  current cell", total=1, visible=False)
        self._bar.start()

    def set_done(self, done: int) -> None:
        if self._bar is not None:
            self._bar.update(self._cells, completed=done)

    def start_cell(self, cell: Cell) -> None:
        if self._bar is not None:
            role = "lr search " if cell.role is CellRole.SEARCH else ""
            label = (
                f"  {role}{cell.task} frozen={cell.frozen_layers} n={cell.train_size} "
                f"draw={cell.subset_draw} seed={cell.seed} lr={cell.learning_rate:g}"
            )
            if cell.order_seed is not None:
                label += f" order_seed={cell.order_seed}"
            self._bar.reset(self._steps, total=1, description=label, visible=True)

    def step(self, step: int, total: int) -> None:
        if self._bar is not None:
            self._bar.update(self._steps, completed=step, total=total)

    def note(self, message: str) -> None:
        """A line above the bars (or on stderr without them)."""
        if self._bar is not None:
            self._bar.console.print(message, markup=False, highlight=False)
        else:
            print(message, file=sys.stderr)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

"""``--fuse``: a worker claims up to K WAITING trials of one cell group and trains them as one fused computation.

A cell group is the cells that differ only in their seeds (and data-order seed and subset draw): same task,
train size, level, learning rate, arm, role and pair encoding. Each run stays its own Optuna trial: it is claimed
by the storage's atomic WAITING -> RUNNING transition (the one ``study.ask`` uses), beats its own heartbeat, and is
told its own result and record, exactly as an unfused trial is, plus ``fuse`` (the worker's setting), ``fuse_k``
(how many runs were claimed together) and ``fusion`` (``"fused"`` or ``"alone: <why>"``, from
:func:`~freezestats.training.fused.fine_tune_many`). A run that fails fails only its own trial (and is requeued as
any failure is); Ctrl-C or SIGTERM hands every claimed trial back uncounted; a SIGKILL leaves them RUNNING until
their heartbeats go stale and ``fail_stale_trials`` fails and requeues each of them.

``auto`` takes every WAITING run of the group, up to :data:`AUTO_MAX` and up to what fits in half of the device's
free memory at the claim (:mod:`freezestats.training.fused.memory`).
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import replace
from typing import Any

import optuna
from optuna.storages._heartbeat import get_heartbeat_thread
from optuna.trial import FrozenTrial, TrialState

from freezestats.encoder.backbone import load_tokenizer
from freezestats.exceptions import SpecError, TrialFailed
from freezestats.runner._prepare import encoded_splits
from freezestats.runner._trial import task_record
from freezestats.spec.pairs import CROSS
from freezestats.study.cells import Cell, CellRole
from freezestats.study.queue import INTERRUPTED, cell_from_trial, duplicate_claim, is_enqueued_cell, requeue
from freezestats.study.trials import set_user_attrs, suggest_cell

_Runner = Any
"""The runner (``freezestats.runner._Runner``: its study, spec, prepared study, progress, gate); not imported, as the
runner imports this module."""

__all__ = ["AUTO_MAX", "fuse_limit", "parse_fuse", "run_fused_group", "waiting_claims", "waiting_group"]

AUTO_MAX = 8
"""``--fuse auto`` fuses at most this many runs."""


def parse_fuse(value: str | int | None) -> str:
    """Check a ``--fuse`` value: ``off``, ``auto`` or an integer K >= 1 (1 is the same as ``off``)."""
    text = "off" if value is None else str(value).strip().lower()
    if text in ("off", "auto"):
        return text
    if text.isdigit() and int(text) >= 1:
        return "off" if int(text) == 1 else str(int(text))
    raise SpecError(f"`--fuse` must be off, auto or an integer K >= 1, but got {value!r}.")


def fuse_limit(fuse: str, n_waiting: int, fits: int | None = None) -> int:
    """How many runs of a group with ``n_waiting`` WAITING runs to claim; ``auto`` also claims no more than
    ``fits``, the runs that fit in the device's free memory (:func:`~freezestats.training.fused.memory.memory_limit`).
    An integer K is the user's choice and is not capped."""
    if fuse == "off":
        return 1
    if fuse == "auto":
        return min(n_waiting, AUTO_MAX, fits if fits is not None else AUTO_MAX)
    return min(n_waiting, int(fuse))


def waiting_claims(study: optuna.Study, fuse: str) -> int:
    """How many claims the WAITING cells make: one per cell, or with ``--fuse`` one per K runs of a group.

    ``auto`` is counted at its most (:data:`AUTO_MAX` a claim); where less fits in memory the workers claim more,
    smaller groups. Cells that never fuse (a task group's, another arm's loop) are counted as groups too: a lower
    count only means fewer workers, each with more threads."""
    waiting = [t for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)) if is_enqueued_cell(t)]
    if fuse == "off":
        return len(waiting)
    k = AUTO_MAX if fuse == "auto" else int(fuse)
    sizes: dict[Cell, int] = {}
    for trial in waiting:
        key = _group_key(trial)
        sizes[key] = sizes.get(key, 0) + 1
    return sum(-(-size // k) for size in sizes.values())


def _group_key(trial: FrozenTrial) -> Cell:
    return replace(cell_from_trial(trial), seed=0, order_seed=None, subset_draw=0)


def waiting_group(runner: _Runner) -> list[FrozenTrial]:
    """The WAITING trials to claim together: the group of the longest WAITING run (learning-rate search runs
    first, then the largest train size; the oldest among equals), up to the runner's K.

    Longest first so that parallel workers do not end on a few 1000-example groups while the others idle (a grid
    enqueues its small train sizes first). Measured on the H100's 350-run MiniLM blog grid with 10 fused workers
    and no MPS, it changed little (229.0 s against 231.5 s in enqueue order): there the shared GPU, not the tail,
    was the limit.

    Fewer than two (nothing to fuse, or a cell that never fuses: a task group's, an arm with a loop of its own)
    means: claim one trial the ordinary way.
    """
    waiting = [t for t in runner.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)) if is_enqueued_cell(t)]
    if not waiting:
        return []
    longest = max(waiting, key=_expected_length)  # max keeps the first (oldest) of equals
    first = cell_from_trial(longest)
    if runner.spec.group_named(first.task) is not None or not _shared_loop(runner, first):
        return []
    if runner.prepared.tasks[first.task].pool is not None:  # the fused loop does not score a pool yet
        return []
    key = _group_key(longest)
    group = [t for t in waiting if _group_key(t) == key]
    fits = _runs_that_fit(runner, first) if runner.fuse == "auto" and len(group) > 1 else None
    return group[: fuse_limit(runner.fuse, len(group), fits)]


def _runs_that_fit(runner: _Runner, cell: Cell) -> int:
    """How many runs of ``cell``'s model fit in the worker's device's free memory now."""
    from freezestats.training import resolve_device
    from freezestats.training.fused.memory import memory_limit

    spec = runner.spec
    num_labels = runner.prepared.tasks[cell.task].data.task.num_labels
    return memory_limit(spec.model.name, num_labels, spec.training, resolve_device(spec.training.device))


def _expected_length(trial: FrozenTrial) -> tuple[bool, int]:
    """Sort key for claiming: search runs before grid runs (the grid's learning rates wait for them), then the
    train size (a run's steps grow with it; its frozen depth changes a fused step's time little on a GPU)."""
    cell = cell_from_trial(trial)
    return cell.role == CellRole.SEARCH, cell.train_size


def _shared_loop(runner: _Runner, cell: Cell) -> bool:
    """Whether the cell's arm trains with the shared loop (``fine_tune``), the only one that fuses."""
    from freezestats.arms._base import Arm

    return type(runner.prepared.arm_of(cell)).run is Arm.run


def _claim(study: optuna.Study, frozen: list[FrozenTrial]) -> list[optuna.Trial]:
    """Claim each trial by the storage's atomic WAITING -> RUNNING step; those another worker took are skipped.

    Optuna has no public call that claims a chosen WAITING trial: ``study.ask()`` pops the oldest one. This is the
    storage call ``ask`` itself makes (``set_trial_state_values`` returns False when another worker won the race),
    and ``get_heartbeat_thread`` is what ``study.optimize`` wraps a trial in; both are private in Optuna 3-5, so a
    change there breaks ``tests/test_fused_runner.py`` rather than a study.
    """
    claimed = []
    for t in frozen:
        try:
            if study._storage.set_trial_state_values(t._trial_id, state=TrialState.RUNNING):
                claimed.append(optuna.Trial(study, t._trial_id))
        except optuna.exceptions.UpdateFinishedTrialError:
            continue
    return claimed


def run_fused_group(runner: _Runner, frozen: list[FrozenTrial]) -> None:
    """Claim ``frozen``, train them with ``fine_tune_many`` and tell each trial its own result."""
    study = runner.study
    trials = _claim(study, frozen)
    live = []
    for trial in trials:
        if duplicate_claim(study, trial):
            trial.set_user_attr("duplicate", True)
            study.tell(trial, state=TrialState.PRUNED)
        else:
            live.append(trial)
    if not live:
        return
    runner.n_run += len(live)
    with ExitStack() as beats:
        for trial in live:
            beats.enter_context(get_heartbeat_thread(trial._trial_id, study._storage))
        _train_and_tell(runner, live)


def _train_and_tell(runner: _Runner, trials: list[optuna.Trial]) -> None:
    pending = list(trials)
    try:
        cells = [suggest_cell(trial, runner.spec) for trial in trials]
        for trial in trials:
            set_user_attrs(trial, {"fuse": runner.fuse, "fuse_k": len(trials)})
        runner.progress.start_cell(cells[0])
        runs, splits = _inputs(runner, cells)
        with runner.interrupts.interruptible():
            from freezestats.training.fused import fine_tune_many

            outcomes = fine_tune_many(runs)
        for trial, cell, outcome, (train, validation) in zip(trials, cells, outcomes, splits, strict=True):
            if isinstance(outcome, TrialFailed):
                _fail(runner, trial, outcome)
            else:
                record = task_record(
                    runner.prepared, cell, cell.task, outcome, train, validation, trial, runner.artifact_store
                )
                set_user_attrs(trial, {**record.attrs(), "fusion": outcome.extra.get("fusion", "alone")})
                runner.study.tell(trial, float(record.best_dev))
            pending.remove(trial)
    except KeyboardInterrupt:  # every claimed cell goes back in the queue, uncounted
        for trial in pending:
            trial.set_user_attr("fail_reason", INTERRUPTED)
            requeue(runner.study, trial, runner.spec.execution.max_retries, counted=False)
            runner.study.tell(trial, state=TrialState.FAIL)
        raise
    except Exception as err:
        for trial in pending:
            _fail(runner, trial, err)


def _fail(runner: _Runner, trial: optuna.Trial, err: BaseException) -> None:
    """One run's failure: its trial only, requeued like an unfused trial's."""
    reason = f"{type(err).__name__}: {err}"[:2000]
    trial.set_user_attr("fail_reason", reason)
    again = requeue(runner.study, trial, runner.spec.execution.max_retries)
    runner.study.tell(trial, state=TrialState.FAIL)
    where = trial.user_attrs.get("cell_key", "?")
    runner.progress.note(f"trial {trial.number} ({where}) failed: {reason}" + (" (retrying)" if again else ""))


def _inputs(runner: _Runner, cells: list[Cell]) -> tuple[list[dict[str, Any]], list[tuple[Any, Any]]]:
    """``fine_tune``'s keyword inputs for each cell (as the arm's ``run`` passes them), and each cell's splits."""
    prepared, spec = runner.prepared, runner.spec
    runs, splits = [], []
    tokenizer = load_tokenizer(spec.model.name)
    for i, cell in enumerate(cells):
        task = prepared.tasks[cell.task]
        train, validation = encoded_splits(prepared, cell)
        splits.append((train, validation))
        run = {
            "arm": prepared.arm_of(cell),
            "frozen_layers": cell.level,
            "model_name": spec.model.name,
            "task": task.data.task,
            "metric": spec.metric_for(cell.task),
            "train": train,
            "validation": validation,
            "select_idx": task.select_idx,
            "score_idx": task.score_idx,
            "seed": cell.seed,
            "order_seed": cell.data_order_seed,
            "learning_rate": cell.learning_rate,
            "training": spec.training,
            "tokenizer": tokenizer,
            "on_step": runner.on_step if i == 0 else None,
            "prefix_cache": runner.prefix_cache,
        }
        if cell.pair_encoding != CROSS:
            run["pair_encoding"] = cell.pair_encoding
        runs.append(run)
    return runs, splits

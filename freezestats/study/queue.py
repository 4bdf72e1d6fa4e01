"""The queue of cells in the study: which cells to enqueue, which trial ran which cell, and re-enqueueing a failure.

This is what makes ``run`` resumable and every cell claimed once: a cell is enqueued (WAITING) only when it has
no COMPLETE, WAITING or RUNNING trial and retries left, and a failed trial is handed back by the one process
that owns the failure. Kept apart from :mod:`freezestats.study.trials` (creating and loading the study, a
cell's Optuna distributions) because the storage's heartbeat callback re-enqueues through it too
(:mod:`freezestats.study.storage`), and the storage must not import the module that opens it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from freezestats.spec.pairs import CROSS
from freezestats.study.cells import Cell, CellRole

__all__ = [
    "INTERRUPTED",
    "cell_from_trial",
    "counts_as_retry",
    "duplicate_claim",
    "enqueue_cells",
    "is_enqueued_cell",
    "requeue",
    "trials_by_cell",
]

INTERRUPTED = "interrupted"
"""The ``fail_reason`` of a trial stopped by the user (Ctrl-C, SIGTERM): not a failure of its cell."""


def _cell_params(trial: FrozenTrial) -> dict[str, Any]:
    """The cell's coordinates: the enqueued values, which are complete even when a worker stopped between
    two ``suggest`` calls (its ``params`` then hold only part of the cell); copied trials have only params.
    """
    return dict(trial.system_attrs.get("fixed_params") or trial.params)


def cell_from_trial(trial: FrozenTrial) -> Cell:
    """The cell a stored trial ran (or, while it is WAITING, will run)."""
    p = _cell_params(trial)
    return Cell(
        task=p["task"],
        frozen_layers=int(p["frozen_layers"] if "arm_level" not in p else p["arm_level"]),
        train_size=int(p["train_size"]),
        subset_draw=int(p["subset_draw"]),
        seed=int(p["seed"]),
        learning_rate=None if p.get("learning_rate") is None else float(p["learning_rate"]),
        role=CellRole(trial.user_attrs.get("role", CellRole.GRID.value)),
        order_seed=None if p.get("order_seed") is None else int(p["order_seed"]),
        arm=trial.user_attrs.get("arm"),
        pair_encoding=p.get("pair_encoding", CROSS),
    )


def is_enqueued_cell(trial: optuna.Trial | FrozenTrial) -> bool:
    """Trials that carry a cell (not a stray one created when a worker raced for the last cell)."""
    return "cell_key" in trial.user_attrs


def trials_by_cell(study: optuna.Study) -> dict[str, list[FrozenTrial]]:
    """Every trial of the study grouped by the cell it belongs to, oldest first."""
    grouped: dict[str, list[FrozenTrial]] = defaultdict(list)
    for trial in study.get_trials(deepcopy=False):
        if is_enqueued_cell(trial):
            grouped[trial.user_attrs["cell_key"]].append(trial)
    return dict(grouped)


def counts_as_retry(trial: FrozenTrial) -> bool:
    """A failed attempt that was the cell's own fault (an interruption by the user is not)."""
    return trial.state == TrialState.FAIL and trial.user_attrs.get("fail_reason") != INTERRUPTED


def enqueue_cells(study: optuna.Study, cells: Iterable[Cell], max_retries: int = 1) -> list[Cell]:
    """Enqueue every cell that has no COMPLETE, WAITING or RUNNING trial and has retries left.

    Returns the enqueued cells. This is what makes ``run`` resumable: completed cells are never
    re-run, interrupted ones are enqueued again.
    """
    existing = trials_by_cell(study)
    added = []
    for cell in cells:
        trials = existing.get(cell.key, [])
        if any(t.state in (TrialState.COMPLETE, TrialState.WAITING, TrialState.RUNNING) for t in trials):
            continue
        if sum(counts_as_retry(t) for t in trials) > max_retries:
            continue
        study.enqueue_trial(cell.params(), user_attrs=cell.attrs())
        added.append(cell)
    return added


def duplicate_claim(study: optuna.Study, trial: optuna.Trial | FrozenTrial) -> bool:
    """Whether another trial of ``trial``'s cell is COMPLETE or RUNNING: the cell was enqueued twice.

    :func:`enqueue_cells` checks, then writes; two processes that enqueue the same cell at the same instant
    (two decision steps of an adaptive study, two ``run`` commands started together) can both write it. The
    worker that claims such a copy stands down (the caller prunes it), so a cell never runs twice. A RUNNING
    trial with a ``fail_reason`` is one whose worker is failing it and has handed the cell back (:func:`requeue`
    writes the new trial before Optuna marks the old one FAILED), so it does not count. Two copies claimed at
    the same instant both stand down, and the next enqueue puts the cell back: a cell is never lost for good.
    """
    key = trial.user_attrs.get("cell_key")
    alive = (TrialState.COMPLETE, TrialState.RUNNING)
    for other in study.get_trials(deepcopy=False, states=alive):
        if other.number == trial.number or other.user_attrs.get("cell_key") != key:
            continue
        if other.state == TrialState.COMPLETE or "fail_reason" not in other.user_attrs:
            return True
    return False


def requeue(study: optuna.Study, trial: FrozenTrial | optuna.Trial, max_retries: int, counted: bool = True) -> bool:
    """Enqueue ``trial``'s cell again if it has retries left; returns whether it did.

    Called by the one process that owns the failure (the worker whose trial raised, or the one whose
    ``fail_stale_trials`` call failed a dead worker's trial), so a cell is never enqueued twice.
    """
    key = trial.user_attrs.get("cell_key")
    if key is None:
        return False
    same_cell = trials_by_cell(study).get(key, [])
    stored = next((t for t in same_cell if t.number == trial.number), None)
    if stored is None:
        return False
    others = [t for t in same_cell if t.number != trial.number]
    if any(t.state in (TrialState.COMPLETE, TrialState.WAITING) for t in others):
        return False
    failures = sum(counts_as_retry(t) for t in others) + (1 if counted else 0)
    if failures > max_retries:
        return False
    role = trial.user_attrs.get("role", "grid")
    attrs = {"cell_key": key, "role": role}
    for name in ("arm", "pair_encoding"):  # present only on cells that have them (Cell.attrs)
        if name in trial.user_attrs:
            attrs[name] = trial.user_attrs[name]
    study.enqueue_trial(_cell_params(stored), user_attrs=attrs)
    return True

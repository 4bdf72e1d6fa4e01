"""Flatten a study database into the tidy results table, and summarise per-cell progress.

The table has one row per trial (one per task for a task group's trial) and fixed snake_case columns
(:data:`RESULT_COLUMNS`, defined by :class:`freezestats.results.record.TrialRecord`); it is the only thing the
statistics and the report read, so its columns are a contract: add, never rename. The one column renamed since
(:data:`RENAMED_COLUMNS`) is still read under its old name, from a study's trials and from a table
(:func:`read_renamed_columns`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pandas as pd
from optuna.trial import FrozenTrial, TrialState

from freezestats.exceptions import StorageError, warn_renamed
from freezestats.results.record import EXPORT_COLUMNS
from freezestats.study.queue import cell_from_trial, is_enqueued_cell, trials_by_cell
from freezestats.study.storage import open_storage
from freezestats.study.trials import load_study

__all__ = [
    "RENAMED_COLUMNS",
    "RESULT_COLUMNS",
    "STATUS_COLUMNS",
    "cell_status",
    "export_results",
    "read_renamed_columns",
    "results_table",
]

RESULT_COLUMNS: list[str] = EXPORT_COLUMNS
"""The table's columns, in order: the exported fields of :class:`~freezestats.results.record.TrialRecord`."""
RENAMED_COLUMNS = {"strategy": "freezing"}
"""A column's name before it was renamed -> its name now (``strategy`` meant the freeze arm's freezing rule)."""
STATUS_COLUMNS = [
    "cell",
    "task",
    "frozen_layers",
    "train_size",
    "subset_draw",
    "seed",
    "role",
    "status",
    "attempts",
    "best_dev",
    "fail_reason",
]
_SORT_COLUMNS = ["role", "task", "train_size", "arm", "arm_level", "frozen_layers", "subset_draw", "seed"]
_SORT_COLUMNS += ["order_seed", "trial"]
_TRIAL_ATTRS = ("fuse", "fuse_k", "fusion")
_LOST = "no heartbeat: the worker stopped mid-trial"
_STATE_NAMES = {
    TrialState.COMPLETE: "complete",
    TrialState.FAIL: "fail",
    TrialState.RUNNING: "running",
    TrialState.WAITING: "waiting",
    TrialState.PRUNED: "pruned",
}


def results_table(study: optuna.Study, include_incomplete: bool = False) -> pd.DataFrame:
    """One row per trial and task (COMPLETE only, unless ``include_incomplete``), columns :data:`RESULT_COLUMNS`.

    Final-checkpoint values of every task metric are added as ``final_<metric>`` columns.
    """
    rows = []
    for trial in study.get_trials(deepcopy=False):
        if not is_enqueued_cell(trial) or (trial.state != TrialState.COMPLETE and not include_incomplete):
            continue
        rows.extend(_rows(study.study_name, trial))
    frame = pd.DataFrame(rows)
    extra = sorted({c for c in frame.columns if c.startswith("final_") and c != "final_dev"})
    frame = frame.reindex(columns=RESULT_COLUMNS + extra)
    return (
        frame.sort_values(
            _SORT_COLUMNS,
            ignore_index=True,
        )
        if len(frame)
        else frame
    )


def _rows(study_name: str, trial: FrozenTrial) -> list[dict[str, Any]]:
    """The trial's row, or one row per task for a task group's trial (``task`` the task, ``trained_with`` the group)."""
    members = trial.user_attrs.get("group_records")
    if not members:
        return [_row(study_name, trial, trial.user_attrs)]
    rows = []
    for task, attrs in members.items():
        row = _row(study_name, trial, attrs)
        row["task"] = task
        rows.append(row)
    return rows


def _row(study_name: str, trial: FrozenTrial, attrs: dict[str, Any]) -> dict[str, Any]:
    cell = cell_from_trial(trial)
    row: dict[str, Any] = {
        "study": study_name,
        "trial": trial.number,
        "state": _STATE_NAMES.get(trial.state, trial.state.name.lower()),
        "role": cell.role.value,
        **cell.params(),
    }
    row["fail_reason"] = trial.user_attrs.get("fail_reason")  # the trial's, also for each task of a group
    for column in RESULT_COLUMNS:
        if column not in row and column not in _TRIAL_ATTRS:
            row[column] = attrs.get(column)
    for column in _TRIAL_ATTRS:  # set on the trial itself, also for each task of a group's trial
        row[column] = trial.user_attrs.get(column)
    for old, new in RENAMED_COLUMNS.items():
        if new not in attrs:  # a trial stored before the rename
            row[new] = attrs.get(old)
    if row["frozen_dropout"] is None:  # trials stored before the setting existed ran the blog's protocol
        row["frozen_dropout"] = "on"
    if row["arm"] is None:  # a single-arm study: its one arm is freeze, at the cell's freeze depth
        row["arm"], row["arm_level"] = "freeze", row["frozen_layers"]
    elif attrs.get("arm_kind") == "freeze":  # a freeze arm among others: its level is a freeze depth
        row["frozen_layers"] = row["arm_level"]
    if row["order_seed"] is None:  # not crossed (or stored before order seeds existed): the order followed the seed
        row["order_seed"] = row["seed"]
    if row["trained_with"] is None:  # stored before groups existed: trained alone
        row["trained_with"] = row["task"]
    if row["pair_encoding"] is None:  # stored before the setting existed: one joint input
        row["pair_encoding"] = "cross"
    if row["fuse"] is None:  # run without `--fuse` (or before it existed): trained alone
        row["fuse"], row["fuse_k"], row["fusion"] = "off", 1, "unfused"
    for name, value in attrs.get("final_metrics", {}).items():
        row[f"final_{name}"] = value
    return row


def read_renamed_columns(table: pd.DataFrame, where: str) -> pd.DataFrame:
    """``table`` (a results table read from ``where``) with its columns of :data:`RENAMED_COLUMNS` under their new
    names, and a one-line note when there were any; a table that has both names keeps both as they are."""
    renamed = {old: new for old, new in RENAMED_COLUMNS.items() if old in table.columns and new not in table.columns}
    for old, new in renamed.items():
        warn_renamed("results column", old, new, where)
    return table.rename(columns=renamed) if renamed else table


def export_results(storage: str, output: str | Path, study_name: str | None = None) -> pd.DataFrame:
    """Write the results table to ``output`` (.parquet or .csv), atomically; returns it."""
    output = Path(output)
    if output.suffix not in (".parquet", ".csv"):
        raise StorageError(f"The export file must end in .parquet or .csv, but got {str(output)!r}.")
    if not output.parent.is_dir():
        raise StorageError(f"The folder of the export file does not exist: {output.parent}.")
    study = load_study(open_storage(storage, must_exist=True), study_name)
    table = results_table(study)
    if table.empty:
        raise StorageError(f"Study '{study.study_name}' has no completed trials yet; nothing to export.")
    partial = output.with_name(output.name + ".partial")
    try:
        if output.suffix == ".parquet":
            table.to_parquet(partial, index=False)
        else:
            table.to_csv(partial, index=False)
        partial.replace(output)  # atomic: an interrupted export never leaves a half-written file behind
    except OSError as err:
        raise StorageError(f"Cannot write {output}: {err.strerror or err}.") from err
    finally:
        partial.unlink(missing_ok=True)  # only left over when writing failed or was interrupted
    return table


def cell_status(study: optuna.Study) -> pd.DataFrame:
    """One row per cell with its status: done, running, waiting or failed (no attempt left pending)."""
    rows = []
    for key, trials in trials_by_cell(study).items():
        states = [t.state for t in trials]
        if TrialState.COMPLETE in states:
            status = "done"
        elif TrialState.RUNNING in states:
            status = "running"
        elif TrialState.WAITING in states:
            status = "waiting"
        else:
            status = "failed"
        cell = cell_from_trial(trials[-1])
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        failures = [t.user_attrs.get("fail_reason", _LOST) for t in trials if t.state == TrialState.FAIL]
        rows.append(
            {
                "cell": key,
                "task": cell.task,
                "frozen_layers": cell.frozen_layers,
                "train_size": cell.train_size,
                "subset_draw": cell.subset_draw,
                "seed": cell.seed,
                "role": cell.role.value,
                "status": status,
                "attempts": sum(t.state != TrialState.WAITING for t in trials),
                "best_dev": complete[0].user_attrs.get("best_dev") if complete else None,
                "fail_reason": failures[-1] if failures and status != "done" else None,
            }
        )
    return pd.DataFrame(rows, columns=STATUS_COLUMNS)

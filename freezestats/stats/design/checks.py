"""Input validation shared by the descriptive and Lee-style analyses of a results table.

Every analysis validates its input here *before* computing anything, so that a bad table fails with
one message that states the invariant, the offending value and what to do, instead of a KeyError or a
silent NaN deep inside pandas. The rules, applied in this order by :func:`prepare`:

1. ``data`` is a non-empty :class:`pandas.DataFrame` with the required columns;
2. ``response`` (when the analysis has one) is a numeric column;
3. only ``role == "grid"`` rows are analysed (``"search"`` rows are learning-rate trials);
4. only ``state == "complete"`` rows are analysed, when the table has a ``state`` column
   (``freezestats export`` writes complete trials only; a table built with ``include_incomplete``
   carries failed / running trials whose responses are missing or partial);
5. ``task`` selects one task; analyses that compare levels within one task require a single task;
6. the table holds a single ``model`` (a comparison across models is a different question);
7. rows whose response (or ``failed`` flag) is missing are dropped (listwise deletion), and at least
   one row must remain.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np
import pandas as pd

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.input_table import normalize_results

__all__ = [
    "CELL",
    "KNOWN_RESPONSES",
    "REPLICATE",
    "check_confidence",
    "prepare",
    "require_single_task",
    "trainable_layers",
    "unreplicated_cells",
]

CELL = ["task", "train_size", "frozen_layers"]
"""The columns that define one cell of the grid (one summary row)."""

REPLICATE = ["subset_draw", "seed"]
"""The columns that identify one replicate (the same training subset and seed) across the cells of a task."""

KNOWN_RESPONSES = ("best_dev", "final_dev", "heldout")
"""Per-run responses every results table has (tables may add ``final_<metric>`` columns)."""


def prepare(
    data: pd.DataFrame,
    *,
    columns: Iterable[str],
    response: str | None = None,
    task: str | None = None,
    single_task: bool = False,
    caller: str,
) -> pd.DataFrame:
    """Validated copy of the analysable rows of a results table.

    Parameters
    ----------
    data
        The results table (one row per fine-tuning run).
    columns
        Columns the caller needs, besides ``role`` and ``response``.
    response
        Name of the per-run response column, or None when the analysis has none.
    task
        Keep only this task; None keeps all tasks.
    single_task
        If true, more than one task left after selection is an error.
    caller
        Name of the public function, for the messages.

    Returns
    -------
    pandas.DataFrame
        A copy with a fresh index, ``train_size`` and ``frozen_layers`` as int64, and no missing
        ``response``.

    Raises
    ------
    ModelFitError
        If any rule in the module docstring is violated.
    """
    if not isinstance(data, pd.DataFrame):
        raise ModelFitError(
            f"{caller}: `data` must be a pandas DataFrame (the results table), but got {type(data).__name__}."
        )
    if len(data) == 0:
        raise ModelFitError(
            f"{caller}: the results table must have at least one row, but it is empty (0 rows); "
            "export a study with completed trials (`freezestats export`) first."
        )
    data = normalize_results(data)
    needed = ["role", *columns]
    if response is not None:
        needed.append(response)
        _check_response(data, response, caller)
    missing = [c for c in dict.fromkeys(needed) if c not in data.columns]
    if missing:
        raise ModelFitError(
            f"{caller}: the results table must have the columns {missing}, but they are missing "
            f"(columns present: {list(data.columns)}); pass the table written by `freezestats export`."
        )

    frame = data[data["role"] == "grid"]
    if frame.empty:
        roles = sorted(map(str, data["role"].dropna().unique()))
        raise ModelFitError(
            f"{caller}: only role == 'grid' rows are analysed, but the table has none (roles present: {roles}); "
            "'search' rows are learning-rate trials, not measurements."
        )
    if "state" in frame.columns:
        complete = frame[frame["state"] == "complete"]
        if complete.empty:
            states = sorted(map(str, frame["state"].dropna().unique()))
            raise ModelFitError(
                f"{caller}: only state == 'complete' grid rows are analysed, but there are none "
                f"(states present: {states}); wait for trials to finish."
            )
        frame = complete

    tasks = sorted(map(str, frame["task"].dropna().unique())) if "task" in frame.columns else []
    if task is not None:
        if task not in tasks:
            raise ModelFitError(f"{caller}: task={task!r} is not in the table's grid rows; tasks present: {tasks}.")
        frame = frame[frame["task"] == task]
    elif single_task and len(tasks) > 1:
        raise ModelFitError(
            f"{caller} analyses one task at a time, but the table has {len(tasks)} tasks {tasks}; "
            f"pass task=, e.g. task={tasks[0]!r}."
        )
    if "model" in frame.columns:
        models = sorted(map(str, frame["model"].dropna().unique()))
        if len(models) > 1:
            raise ModelFitError(
                f"{caller}: the table must hold runs of a single model, but it has {models}; "
                "filter it to one model first (e.g. data[data['model'] == ...])."
            )

    frame = frame.copy()
    for column in ("train_size", "frozen_layers", "n_layers"):
        if column in frame.columns and column in needed:
            frame[column] = _as_int(frame[column], column, caller)
    if response is not None:
        frame[response] = pd.to_numeric(frame[response], errors="coerce").astype(float)
        frame = frame[np.isfinite(frame[response])]
        if frame.empty:
            raise ModelFitError(
                f"{caller}: response {response!r} must have at least one finite value in the selected grid rows, "
                "but every value is missing or infinite."
            )
    return frame.reset_index(drop=True)


def require_single_task(frame: pd.DataFrame) -> str:
    """The one task of a prepared frame (``prepare(..., single_task=True)`` guarantees there is one)."""
    return str(frame["task"].iloc[0])


def trainable_layers(frozen_layers: pd.Series | np.ndarray, n_layers: pd.Series | np.ndarray) -> np.ndarray:
    """Transformer blocks left trainable: ``L - max(k, 0)`` (``k = -1`` freezes only the embeddings)."""
    return np.asarray(n_layers, dtype=np.int64) - np.maximum(np.asarray(frozen_layers, dtype=np.int64), 0)


def check_confidence(confidence: float, caller: str) -> float:
    """``confidence`` as a float strictly between 0 and 1."""
    try:
        value = float(confidence)
    except (TypeError, ValueError):
        value = float("nan")
    if not 0.0 < value < 1.0:
        raise ModelFitError(f"{caller}: `confidence` must be in (0, 1), but got confidence={confidence!r}.")
    return value


def _check_response(data: pd.DataFrame, response: str, caller: str) -> None:
    if not isinstance(response, str) or response not in data.columns:
        extra = sorted(c for c in data.columns if isinstance(c, str) and c.startswith("final_") and c != "final_dev")
        choices = [c for c in KNOWN_RESPONSES if c in data.columns] + extra
        raise ModelFitError(
            f"{caller}: `response` must name a per-run score column of the table, but got response={response!r}; "
            f"choose one of {choices or list(KNOWN_RESPONSES)}."
        )
    column = data[response]
    if pd.api.types.is_bool_dtype(column) or not (
        pd.api.types.is_numeric_dtype(column) or pd.to_numeric(column, errors="coerce").notna().any()
    ):
        raise ModelFitError(
            f"{caller}: `response` must be a numeric score column, but column {response!r} has dtype {column.dtype}; "
            f"choose one of {list(KNOWN_RESPONSES)}."
        )


def _as_int(column: pd.Series, name: str, caller: str) -> pd.Series:
    values = pd.to_numeric(column, errors="coerce")
    bad = values.isna() | (values != np.round(values))
    if bad.any():
        first = column[bad].iloc[0]
        first = first.item() if isinstance(first, np.generic) else first
        raise ModelFitError(
            f"{caller}: column {name!r} must hold integers, but got {name}={first!r} "
            f"(row {column.index[bad][0]}); fix or drop that row."
        )
    return values.astype(np.int64)


def unreplicated_cells(
    frame: pd.DataFrame, levels: list[str], min_runs: int = 2
) -> list[tuple[tuple[object, ...], int, int]]:
    """The cells with fewer than ``min_runs`` runs: ``(level values, train size, runs)`` for every combination of
    the ``levels`` columns' values and the train sizes in ``frame``, empty cells included, in sorted order.

    A model that gives each cell its own residual variance cannot estimate it from one run (REML puts it near
    zero); the callers turn this list into one error naming the cells as their readers know them.
    """
    sizes = sorted(int(n) for n in pd.unique(frame["train_size"]))
    keys = sorted(set(zip(*(frame[c].tolist() for c in levels), strict=True)))
    runs = Counter(zip(*(frame[c].tolist() for c in levels), (int(n) for n in frame["train_size"]), strict=True))
    return [(key, n, runs[(*key, n)]) for key in keys for n in sizes if runs[(*key, n)] < min_runs]


def _failure_frame(
    data: pd.DataFrame, task: str | None, *, single_task: bool, caller: str, extra: list[str] | None = None
) -> pd.DataFrame:
    """Prepared grid rows with ``failed`` as a clean boolean column (missing flags dropped)."""
    frame = prepare(data, columns=[*CELL, *(extra or []), "failed"], task=task, single_task=single_task, caller=caller)
    raw = frame["failed"]
    known = raw.notna()
    flags = raw[known].map(_as_flag)
    bad = flags.isna()
    if bad.any():
        value = raw[known][bad].iloc[0]
        value = value.item() if isinstance(value, np.generic) else value
        raise ModelFitError(
            f"{caller}: column 'failed' must be boolean (True/False), but got failed={value!r}; "
            "it flags runs that collapsed to the majority class."
        )
    frame = frame[known].copy()
    if frame.empty:
        raise ModelFitError(f"{caller}: column 'failed' must be known for some grid run, but every value is missing.")
    frame["failed"] = flags.astype(bool).to_numpy()
    return frame.reset_index(drop=True)


def _as_flag(value: object) -> bool | None:
    """True/False for a boolean-like value (bool, 0/1, "true"/"false"/"1"/"0"), else None."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, str):
        return {"true": True, "false": False, "1": True, "0": False}.get(value.strip().lower())
    if isinstance(value, (int, float, np.integer, np.floating)) and value in (0, 1):
        return bool(value)
    return None

"""The front door of ``analyze``: is this table something every analysis can read?

Every analysis step (the mixed model with and without failed runs, the interaction test, the failure model, …)
validates its own input, so a table that none of them can use used to come back as the same reason once per
step, joined into kilobytes. The checks here run once, before any step, and each problem gets one line that
names it once: what is wrong, the first offending value and its row, and what to do. Messages stay short
(:data:`MAX_MESSAGE`): a list of every column present is not a diagnosis.

What is read, and how (the README's "Tables from elsewhere" lists the same):

- ``state`` is compared case-insensitively (``COMPLETE`` as Optuna's ``trials_dataframe()`` and its dashboard
  write it, ``complete`` as ``freezestats export`` does); only complete rows are analysed;
- ``role`` likewise (``grid``; ``search`` rows are learning-rate trials); no ``role`` column means every row is a
  grid run;
- the response must be numeric where it is given (empty cells are missing runs, dropped), and inside its
  metric's range: [0, 1] for accuracy and F1, [-1, 1] for MCC and correlations;
- a trial (``study``, ``trial``, ``task``) appears once;
- every model needs two runs (seeds) in some cell of each task.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from freezestats.exceptions import ModelFitError

__all__ = ["MAX_MESSAGE", "METRIC_RANGES", "REQUIRED_COLUMNS", "check_results_table", "normalize_results", "shorten"]

REQUIRED_COLUMNS = ("task", "frozen_layers", "train_size", "seed", "failed")
"""Columns every analysis needs, besides the response."""

METRIC_RANGES = {
    "accuracy": (0.0, 1.0),
    "f1": (0.0, 1.0),
    "macro_f1": (0.0, 1.0),
    "mcc": (-1.0, 1.0),
    "pearson": (-1.0, 1.0),
    "spearman": (-1.0, 1.0),
}
"""The values a run's score can take, by the ``metric`` column's name (freezestats stores fractions, not points)."""

MAX_MESSAGE = 300
"""About the longest line an input error prints; longer lists are cut with '…'."""


def normalize_results(data: pd.DataFrame) -> pd.DataFrame:
    """A results table from elsewhere, read as freezestats writes one: no ``role`` column means every row is a grid
    run, and ``state`` and ``role`` are compared in lower case (``COMPLETE`` as Optuna spells it is ``complete``).

    Always a copy when it changes anything: pandas 3 reads text as its ``str`` dtype, not ``object``, so the dtype
    says nothing about whether the spelling needs fixing.
    """
    out = data if "role" in data.columns else data.assign(role="grid")
    for column in ("state", "role"):
        if column in out.columns and not pd.api.types.is_numeric_dtype(out[column]):
            lowered = out[column].astype("string").str.strip().str.lower()
            if not lowered.equals(out[column].astype("string")):
                out = out.copy() if out is data else out
                out[column] = lowered.astype(object).where(lowered.notna(), None)
    return out


def shorten(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` cut to about ``limit`` characters at a word, with '…' where it was cut."""
    if len(text) <= limit:
        return text
    return text[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def _listed(values: Sequence[object], most: int = 10) -> str:
    shown = ", ".join(map(str, values[:most]))
    return shown + (f", … ({len(values)} in all)" if len(values) > most else "")


def check_results_table(
    data: pd.DataFrame | None,
    response: str,
    *,
    model: str = "mixed",
    tasks: Sequence[str] | None = None,
    reference: int = 0,
) -> pd.DataFrame:
    """The complete grid runs of ``data`` (normalised), or a one-line :class:`ModelFitError` naming the problem.

    Raises for: an empty table, missing required columns, no complete grid rows, duplicated trials, a
    non-numeric or out-of-range response, a ``tasks`` entry or ``reference`` depth the table lacks, and a task
    whose cells all hold one run.
    """
    if data is None or len(data) == 0:
        raise ModelFitError("The results table is empty: run the study first (freezestats run).")
    missing = [c for c in (*REQUIRED_COLUMNS, response) if c not in data.columns]
    if missing:
        raise ModelFitError(
            f"The results table lacks column(s) {missing}, which every analysis needs; is it a freezestats export "
            "(`freezestats export`), or a table with those columns (one row per run)?"
        )
    table = normalize_results(data)
    grid = _complete_grid(table)
    _check_unique_trials(grid)
    _check_response(grid, response)
    _check_selection(grid, tasks, reference)
    _check_replicated(grid, tasks, model)
    return grid


def _complete_grid(table: pd.DataFrame) -> pd.DataFrame:
    grid = table[table["role"] == "grid"]
    if grid.empty:
        roles = sorted(map(str, table["role"].dropna().unique()))
        raise ModelFitError(
            shorten(
                f"The results table has no grid runs (role present: {_listed(roles)}); 'search' rows are "
                "learning-rate trials, not measurements."
            )
        )
    if "state" not in grid.columns:
        return grid
    complete = grid[grid["state"] == "complete"]
    if complete.empty:
        states = sorted(map(str, grid["state"].dropna().unique()))
        raise ModelFitError(
            shorten(
                f"The results table has no complete runs: the {len(grid)} grid rows have state "
                f"{_listed(states)}; only state 'complete' (any case) is analysed. Wait for trials to finish."
            )
        )
    return complete


def _check_unique_trials(grid: pd.DataFrame) -> None:
    """One row per (study, trial, task): a table concatenated twice would count every run twice as seeds."""
    key = [c for c in ("study", "trial", "task") if c in grid.columns]
    if "trial" not in key:
        return
    repeated = grid[grid.duplicated(key, keep=False)]
    if not repeated.empty:
        first = repeated.iloc[0]
        where = ", ".join(f"{c} {first[c]}" for c in key)
        raise ModelFitError(
            f"The results table repeats trials: {repeated.drop_duplicates(key).shape[0]} trial(s) appear more than "
            f"once, first {where} (rows {_listed(list(repeated.index[:3]), 3)}); drop the duplicates, e.g. "
            f"table.drop_duplicates({key})."
        )


def _check_response(grid: pd.DataFrame, response: str) -> None:
    """A numeric response (empty cells are missing runs) inside its metric's range."""
    raw = grid[response]
    values = pd.to_numeric(raw, errors="coerce")
    text = values.isna() & raw.notna() & (raw.astype("string").str.strip() != "")
    if text.any():
        row = text[text].index[0]
        raise ModelFitError(
            f"Column {response!r} must hold numbers, but row {row} has {raw[row]!r} "
            f"({int(text.sum())} such row(s)); fix or empty those cells."
        )
    metrics = grid["metric"].astype("string").str.lower() if "metric" in grid.columns else pd.Series("", grid.index)
    for name, (low, high) in METRIC_RANGES.items():
        outside = (metrics == name) & ((values < low) | (values > high))
        if outside.any():
            row = outside[outside].index[0]
            hint = " (points instead of a fraction?)" if values[row] > 1 else ""
            raise ModelFitError(
                f"Column {response!r} must be in [{low:g}, {high:g}] for metric {name!r}, but row {row} has "
                f"{float(values[row]):g}{hint} ({int(outside.sum())} such row(s))."
            )
    infinite = np.isinf(values.to_numpy(dtype=float))
    if infinite.any():
        row = grid.index[infinite][0]
        raise ModelFitError(f"Column {response!r} must be finite, but row {row} has {float(values[row]):g}.")


def _check_selection(grid: pd.DataFrame, tasks: Sequence[str] | None, reference: int) -> None:
    """``--task`` values the table has, and a ``--reference`` depth each chosen task ran."""
    available = sorted(map(str, grid["task"].dropna().unique()))
    unknown = [t for t in tasks or () if t not in available]
    if unknown:
        raise ModelFitError(shorten(f"Task(s) {unknown} are not in the results table; it has {_listed(available)}."))
    for task in tasks or available:
        depths = sorted(int(k) for k in pd.to_numeric(grid.loc[grid["task"] == task, "frozen_layers"]).dropna())
        if depths and reference not in depths:
            raise ModelFitError(
                shorten(
                    f"--reference {reference} is not a frozen level of task {task!r}; its levels are "
                    f"{_listed(sorted(set(depths)))}."
                )
            )


def _check_replicated(grid: pd.DataFrame, tasks: Sequence[str] | None, model: str) -> None:
    """Some cell with two runs: with one run per cell, a seed effect is confounded with the residual (mixed, glmm)
    and the OLS model with every depth × size term has no residual degrees of freedom left."""
    for task in tasks or sorted(map(str, grid["task"].dropna().unique())):
        runs = grid[grid["task"] == task]
        if runs.empty:
            continue
        per_cell = runs.groupby(["frozen_layers", "train_size"]).size()
        if per_cell.max() < 2:
            seeds = sorted(runs["seed"].dropna().unique().tolist())
            raise ModelFitError(
                shorten(
                    f"Task {task!r} has one run per cell (seed {_listed(seeds)}), but the {model} model needs "
                    "at least 2 seeds per cell to estimate the run-to-run spread; run more seeds."
                )
            )

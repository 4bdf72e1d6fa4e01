"""The replicate bootstrap behind :mod:`.operating_point`: cell means resampled by seed and
subset draw.

:func:`~.operating_point.relative_scores` and
:func:`~freezestats.stats.relative_quality.operating_point.operating_point` share one
computation: validate the table, average every (train_size, frozen_layers) cell, and redraw those means over
resampled replicates with all their runs in every cell at once (why replicates and not runs is argued in
:func:`~.operating_point.relative_scores`). What each function then reads off the draws differs
(ratios and differences, or the fewest trainable layers that reach a threshold); the resampling and its input checks
do not, and they are a job of their own, kept here so that :mod:`.operating_point` holds the two
statistics and their documentation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.checks import prepare, require_single_task, trainable_layers


@dataclass(frozen=True)
class _Bootstrap:
    task: str
    cells: pd.DataFrame  # task, train_size, frozen_layers, trainable_layers, n (sorted)
    sizes: dict[int, np.ndarray]  # train_size -> positions of its cells
    reference_index: np.ndarray  # for every cell, the position of its size's reference cell
    baseline_per_cell: np.ndarray
    point: np.ndarray  # cell means, shape (C,)
    replicates: np.ndarray  # bootstrap cell means, shape (B, C)
    n_boot: int


def _bootstrap(
    data: pd.DataFrame,
    response: str,
    task: str | None,
    reference: int,
    relative_to: str,
    n_boot: int,
    rng: int | np.random.Generator | None,
    unit: Sequence[str],
    caller: str,
) -> _Bootstrap:
    """Validate, then compute cell means and their replicate-bootstrap distribution."""
    if relative_to not in ("zero", "majority"):
        raise ModelFitError(
            f"{caller}: `relative_to` must be 'zero' (Lee et al.'s ratio) or 'majority' (improvement over the "
            f"majority-class baseline), but got relative_to={relative_to!r}."
        )
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise ModelFitError(f"{caller}: `n_boot` must be an integer >= 1, but got n_boot={n_boot!r}; 2000 is usual.")
    unit = [unit] if isinstance(unit, str) else list(unit)
    if not unit:
        raise ModelFitError(f"{caller}: `unit` must name at least one column, e.g. ('subset_draw', 'seed').")
    request = _Request(response, reference, relative_to == "majority", int(n_boot), rng, unit, caller)
    frame, name, n_layers = _checked_runs(data, task, request)
    return _resample(frame, name, n_layers, request)


@dataclass(frozen=True)
class _Request:
    """What the resampling needs of the caller's options, once they are checked."""

    response: str
    reference: int
    over_majority: bool  # relative_to == "majority"
    n_boot: int
    rng: int | np.random.Generator | None
    unit: list[str]
    caller: str


def _checked_runs(data: pd.DataFrame, task: str | None, request: _Request) -> tuple[pd.DataFrame, str, int]:
    """The task's runs, each problem with them named in one line; the task and its number of layers."""
    response, reference, unit, caller = request.response, request.reference, request.unit, request.caller
    extra = ["majority_baseline"] if request.over_majority else []
    frame = prepare(
        data,
        columns=["task", "train_size", "frozen_layers", "n_layers", *unit, *extra],
        response=response,
        task=task,
        single_task=True,
        caller=caller,
    )
    name = require_single_task(frame)
    layers = frame["n_layers"].unique()
    if layers.size != 1:
        raise ModelFitError(
            f"{caller}: `n_layers` must be the same for every run of a task, but task {name!r} has "
            f"{sorted(map(int, layers))}; the table mixes models."
        )
    if not isinstance(reference, (int, np.integer)) or isinstance(reference, bool):
        raise ModelFitError(f"{caller}: `reference` must be an integer freeze depth, but got reference={reference!r}.")
    missing = sorted(
        int(size) for size, part in frame.groupby("train_size") if not (part["frozen_layers"] == reference).any()
    )
    if missing:
        levels = sorted(map(int, frame["frozen_layers"].unique()))
        raise ModelFitError(
            f"{caller}: every training size needs runs of the reference depth frozen_layers={reference}, but "
            f"train_size {missing} has none (depths present: {levels}); pass reference= one of them."
        )
    if request.over_majority:
        frame["majority_baseline"] = pd.to_numeric(frame["majority_baseline"], errors="coerce")
        if frame["majority_baseline"].isna().any():
            raise ModelFitError(
                f"{caller}: relative_to='majority' needs `majority_baseline` for every run, but "
                f"{int(frame['majority_baseline'].isna().sum())} are missing; use relative_to='zero'."
            )
    return frame, name, int(layers[0])


def _resample(frame: pd.DataFrame, name: str, n_layers: int, request: _Request) -> _Bootstrap:
    """Cell means and their bootstrap over replicate units (multinomial weights on per-unit sums)."""
    response, reference, n_boot, unit, caller = (
        request.response, request.reference, request.n_boot, request.unit, request.caller
    )  # fmt: skip
    keys = frame[unit].astype(str).agg("|".join, axis=1)
    units = pd.Index(sorted(keys.unique()))
    if units.size < 2:
        raise ModelFitError(
            f"{caller}: a bootstrap over replicates needs at least 2 distinct {tuple(unit)} units, but task "
            f"{name!r} has {units.size} ({units[0]!r}); run more seeds (grid.seeds)."
        )
    cell_keys = ["train_size", "frozen_layers"]
    cells = frame.groupby(cell_keys, sort=True).size().rename("n").reset_index()
    cells.insert(0, "task", name)
    cells["trainable_layers"] = trainable_layers(cells["frozen_layers"], np.full(len(cells), n_layers))
    cells["n"] = cells["n"].astype(np.int64)
    position = pd.MultiIndex.from_frame(cells[cell_keys])
    col = position.get_indexer(pd.MultiIndex.from_frame(frame[cell_keys]))
    row = units.get_indexer(keys)
    sums = np.zeros((units.size, len(cells)))
    counts = np.zeros((units.size, len(cells)))
    np.add.at(sums, (row, col), frame[response].to_numpy(dtype=float))
    np.add.at(counts, (row, col), 1.0)

    generator = np.random.default_rng(request.rng)
    weights = generator.multinomial(units.size, np.full(units.size, 1.0 / units.size), size=int(n_boot)).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        replicates = (weights @ sums) / (weights @ counts)
    replicates[~np.isfinite(replicates)] = np.nan
    point = sums.sum(axis=0) / counts.sum(axis=0)

    sizes = {int(s): np.flatnonzero(cells["train_size"].to_numpy() == s) for s in sorted(cells["train_size"].unique())}
    reference_index = np.empty(len(cells), dtype=np.int64)
    baseline = np.zeros(len(cells))
    for size, index in sizes.items():
        ref = index[cells["frozen_layers"].to_numpy()[index] == reference][0]
        reference_index[index] = ref
        if request.over_majority:
            baseline[index] = float(frame.loc[frame["train_size"] == size, "majority_baseline"].mean())
    return _Bootstrap(name, cells, sizes, reference_index, baseline, point, replicates, int(n_boot))


def _percentiles(values: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Column-wise alpha/2 and 1 - alpha/2 quantiles over the finite replicates (NaN if none)."""
    finite = np.isfinite(values)
    low = np.full(values.shape[1], np.nan)
    high = np.full(values.shape[1], np.nan)
    for j in range(values.shape[1]):
        column = values[finite[:, j], j]
        if column.size:
            low[j], high[j] = np.quantile(column, [alpha / 2.0, 1.0 - alpha / 2.0])
    return low, high

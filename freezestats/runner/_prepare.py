"""Prepare a study: every check that can fail before training, and the data each process derives once.

``prepare_study`` is what ``freezestats validate`` checks and what every run and worker starts from: the
study's arm (its plugins imported), the model's depth, the device and precision, the task data, the nested
train subsets and the validation halves. :func:`encoded_splits` tokenizes a task's data the first time a
cell of that task runs in this process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from freezestats.arms import arms_for_spec
from freezestats.arms._base import Arm
from freezestats.arms._registry import get_arm
from freezestats.encoder.backbone import load_tokenizer, n_layers_of
from freezestats.exceptions import SpecError
from freezestats.spec.grid import FULL
from freezestats.spec.pairs import CROSS
from freezestats.spec.study import StudySpec, check_against
from freezestats.study.cells import Cell, grid_cells, group_cells, search_cells
from freezestats.tasks.data import TaskData, load_task_data
from freezestats.tasks.pool import EvaluationPool, reserve_pool
from freezestats.tasks.subsets import nested_subsets, validation_halves

if TYPE_CHECKING:
    from freezestats.training._encoding import EncodedSplit

__all__ = ["PreparedStudy", "PreparedTask", "encoded_pool", "encoded_splits", "prepare_study"]


@dataclass
class PreparedTask:
    """A task's data with everything derived from it once per process."""

    data: TaskData
    subsets: dict[int, dict[int, np.ndarray]]  # draw -> size -> pool indices
    select_idx: np.ndarray
    score_idx: np.ndarray
    pool: EvaluationPool | None = None  # the evaluation pool reserved from train (``[evaluation]``), if any
    encoded: dict[str, Any] = field(default_factory=dict)  # lazily: "rows", "train", "validation" (+ "/bi" ones)


@dataclass
class PreparedStudy:
    """A validated study, ready to run: what ``freezestats validate`` checks and ``run`` uses."""

    spec: StudySpec
    n_layers: int
    pool_sizes: dict[str, int]
    tasks: dict[str, PreparedTask]
    precision: str  # what ``training.precision`` resolves to on this machine (``auto`` depends on it)
    arms: dict[str | None, Arm]  # what trains each cell, by the cell's arm (``None``: a single-arm study)

    @property
    def arm(self) -> Arm:
        """The arm of a single-arm study (the first arm of a spec with ``[[arms]]``)."""
        return next(iter(self.arms.values()))

    def arm_of(self, cell: Cell) -> Arm:
        """The arm that trains ``cell``."""
        return self.arms[cell.arm]

    def scored_items(self) -> dict[str, int]:
        """Per task, the items each run is scored on: its evaluation pool, else the validation set's score half."""
        return {name: len(t.pool) if t.pool is not None else len(t.score_idx) for name, t in self.tasks.items()}

    def cells(self) -> tuple[list[Cell], list[Cell]]:
        """(search cells, grid cells); grid cells that wait for a search are not listed."""
        return search_cells(self.spec, self.pool_sizes), grid_cells(self.spec, self.pool_sizes, n_layers=self.n_layers)

    def data_identity(self) -> dict[str, Any]:
        """The user tasks' data as read (file hashes, label map): what the study keeps and checks on resume."""
        return {
            name: task.data.origin.identity(task.data.task)
            for name, task in self.tasks.items()
            if task.data.origin is not None
        }

    def carves(self) -> dict[str, np.ndarray]:
        """The validation rows carved from train, per user task that has no validation split of its own."""
        return {
            name: task.data.origin.carved
            for name, task in self.tasks.items()
            if task.data.origin is not None and task.data.origin.carved is not None
        }

    def n_cells(self) -> int:
        """Trials the study will hold when done (search trials plus grid cells)."""
        if self.spec.has_arms:
            return len(grid_cells(self.spec, self.pool_sizes, n_layers=self.n_layers))
        g, spec = self.spec.grid, self.spec
        per_size = sum(len(spec.pair_encodings_for(task, k)) for task in spec.tasks for k in g.frozen_layers)
        n_grid = per_size * len(g.train_sizes) * g.subset_draws * len(g.seeds)
        n_grid *= len(g.order_seeds) if g.order_seeds is not None else 1
        n_grid += len(group_cells(self.spec))
        return n_grid + len(search_cells(self.spec, self.pool_sizes))


def prepare_study(
    spec: StudySpec, data_dir: str | Path | None = None, carves: dict[str, np.ndarray] | None = None
) -> PreparedStudy:
    """Every check that can fail before training: arm and freezing rule, model, data, levels, sizes, device.

    ``carves``: the validation rows a study stored for its user tasks without a validation split, so that a
    resume or a worker uses the same carve (else each is carved now, :mod:`freezestats.tasks.carve`).
    """
    from freezestats.training import resolve_device, resolve_precision

    arms = arms_for_spec(spec)
    n_layers = n_layers_of(spec.model.name)
    precision = resolve_precision(spec.training.precision, resolve_device(spec.training.device))
    carves = carves or {}
    datasets = {name: load_task_data(spec.task(name), data_dir, carves.get(name)) for name in spec.all_tasks}
    pools: dict[str, EvaluationPool] = {}
    if spec.evaluation is not None:
        _check_pool_arms(arms)
        for name in spec.tasks:  # a group's tasks train on their own single-task data: no pool for them yet
            datasets[name], pools[name] = reserve_pool(datasets[name], spec.evaluation.pool)
    pool_sizes = {name: len(data.train) for name, data in datasets.items()}
    classes = {
        name: data.task.num_labels
        for name, data in datasets.items()
        if data.origin is not None and not data.task.is_regression
    }
    notes = {name: pool_note(data) + _reserved_note(pools.get(name)) for name, data in datasets.items()}
    check_against(spec, n_layers, pool_sizes, classes, notes)
    _check_levels(arms, spec, n_layers)
    tasks = {name: _prepare_task(spec, data, pool_sizes[name], pools.get(name)) for name, data in datasets.items()}
    return PreparedStudy(
        spec=spec, n_layers=n_layers, pool_sizes=pool_sizes, tasks=tasks, precision=precision, arms=arms
    )


def pool_note(data: TaskData) -> str:
    """How a user task's train pool came about, when part of train was carved out as validation."""
    origin = data.origin
    if origin is None or origin.carved is None:
        return ""
    return f": {origin.n_train_file} rows in train less {len(origin.carved)} carved out as validation"


def _check_pool_arms(arms: dict[str | None, Arm]) -> None:
    """The pool is scored by the shared training loop; an arm with a loop of its own does not score it yet."""
    own = sorted(str(name) for name, arm in arms.items() if type(arm).run is not Arm.run)
    if own:
        raise SpecError(f"`[evaluation]` pools are scored by the shared training loop; arm(s) {', '.join(own)} "
                        "train with a loop of their own and cannot score one yet.")  # fmt: skip


def _reserved_note(pool: EvaluationPool | None) -> str:
    return "" if pool is None else f" (after reserving the {len(pool)}-item evaluation pool)"


def _check_levels(arms: dict[str | None, Arm], spec: StudySpec, n_layers: int) -> None:
    """Every level of every arm must be one the arm has for this model."""
    for index, variant in enumerate(spec.arm_variants()):
        arm = arms[variant.name if spec.has_arms else None]
        valid = arm.valid_levels(n_layers)
        where = f"arms[{_table_of(spec, index)}]" if spec.has_arms else "grid"
        for i, level in enumerate(variant.levels):
            if get_arm(arm.name).resolve_level(level, n_layers) not in valid:
                shown = f"{valid[0]}..{valid[-1]}" if isinstance(valid, range) else str(list(valid))
                raise SpecError(
                    f"`{where}.{arm.level_axis}` must hold levels of arm '{arm.name}' for model '{spec.model.name}' "
                    f"(L={n_layers}: {shown}), but got {level} ({where}.{arm.level_axis}[{i}], {spec.source})."
                )


def _table_of(spec: StudySpec, variant_index: int) -> int:
    """The index of the ``[[arms]]`` table that the ``variant_index``-th variant comes from."""
    counts = [len(arm.variants()) for arm in spec.arms]
    total = 0
    for table, count in enumerate(counts):
        total += count
        if variant_index < total:
            return table
    raise IndexError(variant_index)


def _prepare_task(spec: StudySpec, data: TaskData, pool_size: int, pool: EvaluationPool | None) -> PreparedTask:
    """The task's nested train subsets per draw (``full``: the whole pool) and its validation halves."""
    regression = data.task.is_regression
    sizes = [s for s in spec.grid.train_sizes if s != FULL]
    draws = spec.grid.seeds if spec.grid.subsets == "per_seed" else range(spec.grid.subset_draws)
    subsets = {
        draw: nested_subsets(data.train_labels, sizes, draw_seed=draw, regression=regression) if sizes else {}
        for draw in draws
    }
    if FULL in spec.grid.train_sizes:
        for draw_subsets in subsets.values():
            draw_subsets[pool_size] = np.arange(pool_size, dtype=np.int64)
    select_idx, score_idx = validation_halves(data.validation_labels, regression=regression)
    return PreparedTask(data=data, subsets=subsets, select_idx=select_idx, score_idx=score_idx, pool=pool)


def encoded_splits(prepared: PreparedStudy, cell: Cell) -> tuple[EncodedSplit, EncodedSplit]:
    """The cell's train subset and the validation set, tokenized once per task and process."""
    from freezestats.training._encoding import encode_split

    task = prepared.tasks[cell.task]
    encoding = cell.pair_encoding if task.data.task.is_pair else CROSS
    suffix = "" if encoding == CROSS else f"/{encoding}"  # a bi split is another split to the prefix cache
    if f"train{suffix}" not in task.encoded:
        tokenizer = load_tokenizer(prepared.spec.model.name)
        max_length = prepared.spec.training.max_length
        rows = np.unique(np.concatenate([idx for draw in task.subsets.values() for idx in draw.values()]))
        columns = task.data.task.text_columns
        task.encoded["rows"] = rows
        for split, frame in (("train", task.data.train.iloc[rows]), ("validation", task.data.validation)):
            task.encoded[f"{split}{suffix}"] = encode_split(
                [frame[c].tolist() for c in columns],
                frame["label"].to_numpy(),
                tokenizer,
                max_length,
                f"{cell.task}/{split}{suffix}",
                encoding,
            )
    pool_idx = task.subsets[cell.subset_draw][cell.train_size]  # positions in the train pool
    positions = np.searchsorted(task.encoded["rows"], pool_idx)
    return task.encoded[f"train{suffix}"].subset(positions), task.encoded[f"validation{suffix}"]


def encoded_pool(prepared: PreparedStudy, task_name: str) -> EncodedSplit | None:
    """The task's evaluation pool, tokenized once per process (``None`` without one)."""
    from freezestats.training._encoding import encode_split

    task = prepared.tasks[task_name]
    if task.pool is None:
        return None
    if "pool" not in task.encoded:
        columns = task.data.task.text_columns
        items = task.pool.items
        task.encoded["pool"] = encode_split(
            [items[c].tolist() for c in columns],
            task.pool.labels,
            load_tokenizer(prepared.spec.model.name),
            prepared.spec.training.max_length,
            f"{task_name}/pool",
        )
    return task.encoded["pool"]

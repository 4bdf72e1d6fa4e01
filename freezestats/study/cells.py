"""Expand a study spec into cells: the units of work, each one fine-tuning run.

A grid cell is (task, frozen_layers, train_size, subset_draw, seed) with the learning rate it runs at;
with ``grid.order_seeds`` the data-order seed joins it (every seed crossed with every order seed), and with
``grid.pair_encoding`` the pair encoding joins the cells of pair tasks (and of groups with one). A task
group's cell has the group's name as its task: one run that trains every task of the group.
With a learning-rate search, search cells add the candidate rate to that key; they run on the search
seeds (``lr_search.seeds``, disjoint from the grid's unless ``lr_search.reuse``), each in its own seed's
data order. Cells are values: the runner enqueues each one as an Optuna trial and recognises it again by
:attr:`Cell.key`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from freezestats.spec.grid import FULL
from freezestats.spec.pairs import CROSS
from freezestats.spec.study import StudySpec

__all__ = [
    "Cell",
    "CellRole",
    "grid_cells",
    "group_cells",
    "resolve_train_size",
    "reusable_search_cell",
    "search_cells",
]


class CellRole(str, Enum):
    """Whether a trial is part of the grid or of the learning-rate search that precedes it."""

    GRID = "grid"
    SEARCH = "search"


@dataclass(frozen=True, order=True)
class Cell:
    """One fine-tuning run of the study.

    ``frozen_layers`` is the cell's level on its arm's axis: the freeze depth in a single-arm study (and for
    the ``freeze`` arm), the rank of a ``lora`` cell, the layer of a ``probe`` cell, ... (:attr:`level`).
    """

    task: str
    frozen_layers: int
    train_size: int
    subset_draw: int
    seed: int
    learning_rate: float | None
    """``None`` for an arm without a learning rate (a probe)."""
    role: CellRole = CellRole.GRID
    order_seed: int | None = None
    """The data-order seed when the grid crosses it with ``seed`` (``grid.order_seeds``); ``None``: the data
    order follows ``seed``, as in every study made before order seeds existed."""
    arm: str | None = None
    """The arm variant of a spec with ``[[arms]]``; ``None``: the one arm of a single-arm study."""
    pair_encoding: str = CROSS
    """How the cell's sentence-pair tasks read their sentences (``grid.pair_encoding``); ``cross`` for every
    other cell, and for every cell of a study made before the setting existed."""

    @property
    def level(self) -> int:
        """The cell's level on its arm's axis (stored in ``frozen_layers``, the single-arm study's name for it)."""
        return self.frozen_layers

    @property
    def key(self) -> str:
        """Identity of the cell within its study; search cells also differ by rate, crossed cells by order seed,
        ``bi`` cells by their pair encoding (``cross`` is left out, so cells made before it keep their keys)."""
        where = f"frozen={self.frozen_layers}" if self.arm is None else f"arm={self.arm}|level={self.frozen_layers}"
        base = f"{self.task}|{where}|n={self.train_size}|draw={self.subset_draw}|seed={self.seed}"
        if self.order_seed is not None:
            base = f"{base}|order_seed={self.order_seed}"
        if self.pair_encoding != CROSS:
            base = f"{base}|pair={self.pair_encoding}"
        return f"search|{base}|lr={self.learning_rate:g}" if self.role is CellRole.SEARCH else base

    @property
    def data_order_seed(self) -> int:
        """The seed of the training data order: ``order_seed`` when crossed, else ``seed``."""
        return self.seed if self.order_seed is None else self.order_seed

    @property
    def group(self) -> tuple[str, int, int, int]:
        """The (task, train_size, subset_draw, frozen_layers) a learning rate is chosen for."""
        return (self.task, self.train_size, self.subset_draw, self.frozen_layers)

    def attrs(self) -> dict[str, Any]:
        """The user attributes a trial of this cell is enqueued with: its identity, role, and (if any) arm and
        pair encoding other than ``cross``."""
        attrs: dict[str, Any] = {"cell_key": self.key, "role": self.role.value}
        if self.arm is not None:
            attrs["arm"] = self.arm
        if self.pair_encoding != CROSS:
            attrs["pair_encoding"] = self.pair_encoding
        return attrs

    def params(self) -> dict[str, Any]:
        """Optuna trial parameters (what distinguishes trials in the dashboard); ``order_seed`` only when crossed,
        ``pair_encoding`` only when not ``cross``.

        A cell of a spec with ``[[arms]]`` has ``arm_level`` instead of ``frozen_layers``, and no
        ``learning_rate`` when its arm has none. Its ``arm`` is not a parameter but a user attribute
        (:meth:`attrs`): Optuna fixes a categorical parameter's choices for good, and ``--extend`` may add arms.
        """
        params: dict[str, Any] = {"task": self.task}
        if self.arm is None:
            params["frozen_layers"] = self.frozen_layers
        else:
            params["arm_level"] = self.frozen_layers
        params.update(train_size=self.train_size, subset_draw=self.subset_draw, seed=self.seed)
        if self.learning_rate is not None:
            params["learning_rate"] = self.learning_rate
        if self.order_seed is not None:
            params["order_seed"] = self.order_seed
        if self.pair_encoding != CROSS:
            params["pair_encoding"] = self.pair_encoding
        return params


def resolve_train_size(size: int | str, pool_size: int) -> int:
    """``"full"`` means the whole train pool."""
    return pool_size if size == FULL else int(size)


def _combinations(
    spec: StudySpec, pool_sizes: Mapping[str, int], frozen: tuple[int, ...], seeds: tuple[int, ...]
) -> Iterator[tuple]:
    for task, size, draw, k, seed in itertools.product(
        spec.tasks, spec.grid.train_sizes, range(spec.grid.subset_draws), frozen, seeds
    ):
        yield task, resolve_train_size(size, pool_sizes[task]), draw, k, seed


def search_cells(spec: StudySpec, pool_sizes: Mapping[str, int]) -> list[Cell]:
    """Cells of the learning-rate search: all rates on the full model (``full-model``) or at every freeze
    level (``per-cell``), for every task, train size and subset draw, on the search seeds."""
    if spec.lr_search.mode == "none":
        return []
    frozen = (0,) if spec.lr_search.mode == "full-model" else spec.grid.frozen_layers
    return [
        Cell(task, k, n, draw, seed, rate, CellRole.SEARCH)
        for task, n, draw, k, seed in _combinations(spec, pool_sizes, frozen, spec.lr_search.seeds)
        for rate in spec.lr_search.rates
    ]


def reusable_search_cell(spec: StudySpec, cell: Cell) -> Cell | None:
    """The search cell whose run ``cell`` (a grid cell) copies, or None: only with ``lr_search.reuse``.

    Without ``reuse`` no grid cell is a copy: the search seeds differ from the grid seeds, and a run
    chosen because it scored well would carry the winner's curse into the grid. A crossed cell (with an
    ``order_seed``) is never a copy either: search runs follow their own seed's data order.
    """
    search = spec.lr_search
    if not search.reuse or search.mode == "none" or (search.mode == "full-model" and cell.frozen_layers != 0):
        return None
    if cell.order_seed is not None:
        return None
    return Cell(
        cell.task, cell.frozen_layers, cell.train_size, cell.subset_draw, cell.seed, cell.learning_rate, CellRole.SEARCH
    )


def grid_cells(
    spec: StudySpec,
    pool_sizes: Mapping[str, int],
    chosen_rates: Mapping[tuple[str, int, int, int], float] | None = None,
    n_layers: int | None = None,
) -> list[Cell]:
    """The grid, on the grid seeds (each crossed with every ``grid.order_seeds``, when given). With a search,
    ``chosen_rates`` maps :attr:`Cell.group` to its rate; groups not yet decided are left out (their cells
    cannot run before their search finishes).

    With ``[[arms]]`` every arm variant runs at each of its levels over the same tasks, sizes, draws and
    seeds, at its own rate; ``n_layers`` resolves symbolic levels (a probe's ``"last"``).
    """
    order_seeds: tuple[int | None, ...] = spec.grid.order_seeds if spec.grid.order_seeds is not None else (None,)
    if spec.has_arms:
        return _subset_per_seed(spec, _arm_cells(spec, pool_sizes, order_seeds, n_layers))
    cells = []
    for task, n, draw, k, seed in _combinations(spec, pool_sizes, spec.grid.frozen_layers, spec.grid.seeds):
        if spec.lr_search.mode == "none":
            rate = spec.training.learning_rate
        else:
            group = (task, n, draw, 0 if spec.lr_search.mode == "full-model" else k)
            if chosen_rates is None or group not in chosen_rates:
                continue
            rate = chosen_rates[group]
        cells.extend(
            Cell(task, k, n, draw, seed, rate, order_seed=order, pair_encoding=encoding)
            for order in order_seeds
            for encoding in spec.pair_encodings_for(task, k)
        )
    return _subset_per_seed(spec, cells + group_cells(spec))


def _subset_per_seed(spec: StudySpec, cells: list[Cell]) -> list[Cell]:
    """With ``grid.subsets = "per_seed"`` a cell's training subset is its seed's own draw: ``subset_draw = seed``
    (the grid then has one draw, so nothing is crossed away)."""
    if spec.grid.subsets != "per_seed":
        return cells
    return [replace(cell, subset_draw=cell.seed) for cell in cells]


def group_cells(spec: StudySpec) -> list[Cell]:
    """The grid's cells of every task group: ``task`` is the group's name (what its rows call ``trained_with``).

    A group trains each of its tasks on that task's nested subset of ``train_size`` (the single-task cell's),
    at ``training.learning_rate`` (groups have no search yet), with the same seeds and order seeds.
    """
    order_seeds: tuple[int | None, ...] = spec.grid.order_seeds if spec.grid.order_seeds is not None else (None,)
    return [
        Cell(
            group.name, k, int(size), draw, seed, spec.training.learning_rate, order_seed=order, pair_encoding=encoding
        )
        for group, size, draw, k, seed, order in itertools.product(
            spec.groups,
            spec.grid.train_sizes,
            range(spec.grid.subset_draws),
            spec.grid.frozen_layers,
            spec.grid.seeds,
            order_seeds,
        )
        for encoding in spec.pair_encodings_for(group.name, k)
    ]


def _arm_cells(
    spec: StudySpec, pool_sizes: Mapping[str, int], order_seeds: tuple[int | None, ...], n_layers: int | None
) -> list[Cell]:
    """The grid of a spec with ``[[arms]]``: every (variant, level) crossed with the shared axes."""
    from freezestats.spec.arm_kinds import get_kind

    levels: list[tuple[str, int, float | None]] = []
    for variant in spec.arm_variants():
        arm = get_kind(variant.kind)
        for level in variant.levels:
            if isinstance(level, str) and n_layers is None:
                raise ValueError(f"Level {level!r} of arm {variant.name!r} needs the model's n_layers to resolve.")
            resolved = arm.resolve_level(level, n_layers if n_layers is not None else 0)
            if (variant.name, resolved, variant.learning_rate) not in levels:  # "last" may repeat an index
                levels.append((variant.name, resolved, variant.learning_rate))
    return [
        Cell(task, level, resolve_train_size(size, pool_sizes[task]), draw, seed, rate, order_seed=order, arm=name)
        for task, size, draw, (name, level, rate), seed in itertools.product(
            spec.tasks, spec.grid.train_sizes, range(spec.grid.subset_draws), levels, spec.grid.seeds
        )
        for order in order_seeds
    ]

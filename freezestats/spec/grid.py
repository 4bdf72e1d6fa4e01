"""The spec's ``[grid]`` table: the axes every task's cells cross (freeze depths, train sizes, seeds, ...).

Kept apart from :mod:`freezestats.spec.study` because the grid's rules depend on the rest of the spec: its frozen
depths move into ``[[arms]]`` when the spec has arms, and its ``pair_encoding`` axis applies to the pair tasks
only (:mod:`freezestats.spec.pairs`). The stored form of a grid (what the spec hash covers) is decided by
:meth:`freezestats.spec.study.StudySpec.to_dict`, not here, so that moving this code never moves a study's hash.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from freezestats.spec.pairs import CROSS, parse_pair_encoding
from freezestats.spec.parser import _Parser

__all__ = ["FULL", "GridSpec", "parse_grid"]

FULL = "full"


@dataclass(frozen=True)
class GridSpec:
    """The grid: every combination of these is one cell (one trial) per task."""

    frozen_layers: tuple[int, ...]
    """The freeze depths of a single-arm study; empty when the spec has ``[[arms]]`` (each arm lists its levels)."""
    train_sizes: tuple[int | Literal["full"], ...]
    seeds: tuple[int, ...]
    subset_draws: int = 1
    order_seeds: tuple[int, ...] | None = None
    """Data-order seeds crossed with ``seeds`` (Dodge et al. 2020): every cell runs for every (seed,
    order_seed) pair, ``seed`` fixing the head initialisation and dropout and ``order_seed`` the order of
    the training examples. ``None`` (the key absent): the data order follows ``seed``."""
    pair_encoding: tuple[str, ...] = (CROSS,)
    """How sentence-pair tasks read their two sentences (:mod:`freezestats.encoder.pair_encoding`): ``cross``, one
    joint input, and/or ``bi``, two pooled passes. An axis of the pair tasks' cells (and of the cells of
    groups with a pair task) only: single-sentence tasks' cells ignore it. The default keeps old specs' hash."""
    subsets: str = "shared"
    """``shared``: every seed of a draw trains on the same nested subsets; ``per_seed``: each seed draws its own
    (still nested across sizes), so that seed-to-seed variation includes the choice of training examples and an
    answer speaks of new training sets, not of one (Bouthillier et al. 2021). Needs ``subset_draws = 1``."""
    bi_frozen_layers: tuple[int, ...] | None = None
    """The frozen levels at which ``bi`` cells run (a subset of ``frozen_layers``), so that the cross/bi
    contrast can be measured at one level without doubling the whole grid; ``None``: at every level."""

    def stored_form(self) -> dict[str, Any]:
        """The grid as stored and hashed: keys added since studies were first stored are left out at their
        defaults, so those studies keep their hash."""
        data = asdict(self)
        defaults = {"order_seeds": None, "pair_encoding": (CROSS,), "bi_frozen_layers": None, "subsets": "shared"}
        for key, default in defaults.items():
            if getattr(self, key) == default:
                del data[key]
        return data

    @property
    def crossed(self) -> bool:
        """Whether the data order has seeds of its own, crossed with the initialisation seeds."""
        return self.order_seeds is not None


def parse_grid(p: _Parser, raw: Mapping[str, Any], all_tasks: list[str]) -> GridSpec:
    """``[grid]``: the axes every task's cells cross (frozen depths only without ``[[arms]]``)."""
    grid_raw = p.table(raw, "grid")
    p.keys(
        grid_raw,
        "grid.",
        {
            "frozen_layers",
            "train_sizes",
            "seeds",
            "subset_draws",
            "subsets",
            "order_seeds",
            "pair_encoding",
            "bi_frozen_layers",
        },
    )
    with_arms = "arms" in raw
    if with_arms and "frozen_layers" in grid_raw:
        raise p.fail(
            "`grid.frozen_layers` must be left out when the spec has [[arms]]: give the freeze depths "
            "in a [[arms]] table with kind = 'freeze' and frozen_layers = [...]"
        )
    if with_arms and "pair_encoding" in grid_raw:
        raise p.fail(
            "`grid.pair_encoding` is not supported with [[arms]] yet: compare cross and bi encoding in a spec "
            "without arms (frozen_layers in [grid])"
        )
    frozen = (
        ()
        if with_arms
        else tuple(
            p.integer(v, f"grid.frozen_layers[{i}]", low=-1)
            for i, v in enumerate(p.nonempty_list(grid_raw, "frozen_layers", "grid."))
        )
    )
    sizes: list[int | Literal["full"]] = []
    for i, v in enumerate(p.nonempty_list(grid_raw, "train_sizes", "grid.")):
        sizes.append(FULL if v == FULL else p.integer(v, f"grid.train_sizes[{i}]", low=1, allow=(FULL,)))
    seeds = tuple(
        p.integer(v, f"grid.seeds[{i}]", low=0) for i, v in enumerate(p.nonempty_list(grid_raw, "seeds", "grid."))
    )
    order_seeds = None
    if "order_seeds" in grid_raw:
        order_seeds = tuple(
            p.integer(v, f"grid.order_seeds[{i}]", low=0)
            for i, v in enumerate(p.nonempty_list(grid_raw, "order_seeds", "grid."))
        )
    for values, key in (
        (frozen, "grid.frozen_layers"),
        (sizes, "grid.train_sizes"),
        (seeds, "grid.seeds"),
        (order_seeds or (), "grid.order_seeds"),
    ):
        p.unique(values, key)
    subset_draws = p.integer(grid_raw.get("subset_draws", 1), "grid.subset_draws", low=1)
    subsets = p.choice(grid_raw.get("subsets", "shared"), "grid.subsets", ("shared", "per_seed"))
    if subsets == "per_seed" and subset_draws != 1:
        raise p.fail("`grid.subsets = 'per_seed'` gives each seed its own draw: leave `grid.subset_draws` at 1")
    if subsets == "per_seed" and p.table(raw, "lr_search").get("mode", "none") != "none":
        raise p.fail("`grid.subsets = 'per_seed'` with a learning-rate search is not supported yet: set one rate")
    return GridSpec(
        frozen_layers=frozen,
        train_sizes=tuple(sizes),
        seeds=seeds,
        subset_draws=subset_draws,
        subsets=subsets,
        order_seeds=order_seeds,
        **parse_pair_encoding(p, grid_raw, frozen, all_tasks),
    )

"""The ``[lr_search]`` table of a spec: Lee, Tang & Lin's learning-rate search before the grid, and its checks.

Kept apart from :mod:`freezestats.spec.study` because most of its rules are about how the search's seeds relate to
the grid's (disjoint, or equal when its runs are reused), and because the stored form of a search must keep
the exact shape of studies made before ``seeds`` and ``reuse`` existed, so that their spec hash never changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from freezestats.spec.parser import _Parser

if TYPE_CHECKING:
    from freezestats.spec.grid import GridSpec

__all__ = ["LR_SEARCH_MODES", "SEARCH_SEED_BASE", "SELECT_METRICS", "LRSearchSpec", "parse_lr_search"]

LR_SEARCH_MODES = ("none", "full-model", "per-cell")
SELECT_METRICS = ("select", "heldout", "best_dev", "final_dev")
#: Default search seeds: 1001..1000+len(grid.seeds), disjoint from any ordinary grid seeds.
SEARCH_SEED_BASE = 1001


@dataclass(frozen=True)
class LRSearchSpec:
    """Optional learning-rate search (Lee, Tang & Lin 2019 search on the full model).

    The search runs every rate on its own ``seeds`` (disjoint from the grid's), the rate is chosen on
    ``select_metric`` (by default the best score on the selection half of the validation set, so the
    scoring half never helps choose), and the grid then runs at that rate on the grid seeds. With
    ``reuse`` the search runs on the grid seeds and its runs at the chosen rate are copied into the grid
    (the behaviour before this option existed; those grid runs carry the winner's curse).
    """

    mode: str = "none"
    rates: tuple[float, ...] = ()
    select_metric: str = "select"
    seeds: tuple[int, ...] = ()
    reuse: bool = False

    def stored_form(self, grid_seeds: tuple[int, ...]) -> dict[str, Any]:
        """The plain data stored with the study and hashed.

        Forms that existed before ``seeds`` and ``reuse`` keep their exact old shape, so that those
        studies keep their spec hash: no search (``mode = "none"``), and a search that reuses its runs
        on the grid seeds, which is what every search did then (:func:`parse_spec` reads the old shape
        back as exactly that).
        """
        metric = _no_search_metric(self.select_metric) if self.mode == "none" else self.select_metric
        data: dict[str, Any] = {"mode": self.mode, "rates": list(self.rates), "select_metric": metric}
        if self.mode != "none" and not (self.reuse and self.seeds == grid_seeds):
            data.update(seeds=list(self.seeds), reuse=self.reuse)
        return data


def _no_search_metric(metric: str) -> str:
    """Without a search the selection metric is unused; it is kept as the old default ("heldout", from
    before "select" existed), so that every study made without a search keeps its spec hash."""
    return "heldout" if metric == "select" else metric


def parse_lr_search(p: _Parser, lr_raw: Mapping[str, Any], grid: GridSpec) -> LRSearchSpec:
    """``[lr_search]``: mode, rates, seeds (disjoint from the grid's), selection metric, reuse."""
    p.keys(lr_raw, "lr_search.", {"mode", "rates", "select_metric", "seeds", "reuse"})
    mode = p.choice(lr_raw.get("mode", "none"), "lr_search.mode", LR_SEARCH_MODES)
    if mode == "none":
        for key, unset in (("rates", []), ("seeds", []), ("reuse", False)):
            if lr_raw.get(key, unset) != unset:
                raise p.fail(f"`lr_search.{key}` is set but `lr_search.mode` is 'none'; set a mode or drop the {key}")
        metric = p.choice(lr_raw.get("select_metric", "heldout"), "lr_search.select_metric", SELECT_METRICS)
        return LRSearchSpec(mode=mode, select_metric=_no_search_metric(metric))
    rates = tuple(
        p.number(v, f"lr_search.rates[{i}]", positive=True)
        for i, v in enumerate(p.nonempty_list(lr_raw, "rates", "lr_search."))
    )
    p.unique(rates, "lr_search.rates")
    if grid.crossed and lr_raw.get("reuse") is True:
        raise p.fail(
            "`lr_search.reuse = true` copies search runs into the grid, but search runs follow their seed's data "
            "order and the grid's `grid.order_seeds` cross it with other orders; drop `reuse` or `grid.order_seeds`"
        )
    if mode == "full-model" and 0 not in grid.frozen_layers:
        raise p.fail(
            "`lr_search.mode = 'full-model'` searches on the full model, so `grid.frozen_layers` must "
            f"contain 0, but got frozen_layers={list(grid.frozen_layers)}"
        )
    # A stored spec without `seeds`/`reuse` is the old shape (see LRSearchSpec.stored_form): that search
    # ran on the grid seeds and its runs were reused. A spec file always gets the new defaults.
    legacy = p.stored and "seeds" not in lr_raw and "reuse" not in lr_raw
    reuse = True if legacy else lr_raw.get("reuse", False)
    if not isinstance(reuse, bool):
        raise p.fail(f"`lr_search.reuse` must be true or false, but got reuse={reuse!r}")
    if "seeds" in lr_raw:
        seeds = tuple(
            p.integer(v, f"lr_search.seeds[{i}]", low=0)
            for i, v in enumerate(p.nonempty_list(lr_raw, "seeds", "lr_search."))
        )
        p.unique(seeds, "lr_search.seeds")
        given = "lr_search.seeds"
    elif reuse:
        seeds, given = grid.seeds, "lr_search.seeds (default with reuse: the grid seeds)"
    else:
        # Default: as many search seeds as grid seeds, numbered from 1001 so they never coincide with
        # the usual small grid seeds; the search never silently runs on (and selects with) grid seeds.
        seeds = tuple(range(SEARCH_SEED_BASE, SEARCH_SEED_BASE + len(grid.seeds)))
        given = f"lr_search.seeds (default {SEARCH_SEED_BASE}..{SEARCH_SEED_BASE + len(grid.seeds) - 1})"
    if reuse:
        if set(seeds) != set(grid.seeds):
            raise p.fail(
                "`lr_search.reuse = true` copies search runs into the grid, so `lr_search.seeds` must equal "
                f"`grid.seeds`, but got lr_search.seeds={list(seeds)} and grid.seeds={list(grid.seeds)}"
            )
        seeds = grid.seeds  # the grid's order: the stored form of a reusing search is the old one
    else:
        overlap = sorted(set(seeds) & set(grid.seeds))
        if overlap:
            raise p.fail(
                "`lr_search.seeds` must be disjoint from `grid.seeds` (the rate must not be chosen on the runs "
                f"the grid reports; set `lr_search.reuse = true` to copy them on purpose), but {given}="
                f"{list(seeds)} and grid.seeds={list(grid.seeds)} share {overlap}"
            )
    metric = p.choice(lr_raw.get("select_metric", "select"), "lr_search.select_metric", SELECT_METRICS)
    return LRSearchSpec(mode=mode, rates=rates, select_metric=metric, seeds=seeds, reuse=reuse)

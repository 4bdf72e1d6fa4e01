"""The fewest runs any per-cell fixed allocation needs for a mean power: a yardstick for the adaptive design.

    python bench/allocation_floor.py bench/results/adaptive_seeds_m003*.json   # the floor of saved adaptive_seeds runs

Why: the adaptive bench compares its runs with a fixed design that gives *every* cell the same seeds. An adaptive
design saves runs in two ways: it gives few seeds to the cells that are plainly worse (or whose power does not
grow with seeds), and it stops a cell early once its answer is known. The first saving is open to any
allocation that knew each cell's truth in advance; this module measures how far it goes. It gives each cell its
own seed count, from the bench's grid of fixed designs (or the 2-seed futility screen, which shows nothing), the
reference of a size as many as the most any of its depths gets (the contrasts are paired by seed), and finds the
allocation with the fewest runs whose mean power over the comparisons with truth above the margin reaches a
given power. A cell's power at S seeds is the uniform S-seed design's power there, as the bench measured it: an
approximation, since in a mixed allocation the family's graph passes levels between cells otherwise. Knowing the
truth, the allocation is no design a user could run; an adaptive design that comes near it has taken most of
what allocation alone can take, and what is left has to come from stopping early.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Sequence
from itertools import groupby
from pathlib import Path

SCREEN_SEEDS = 2  # the futility screen every cell of the adaptive plans gets at least


def _pareto(points: dict[int, float]) -> dict[int, float]:
    """Keep the (runs, power) points that no point with fewer or as many runs beats on power."""
    best, kept = -1.0, {}
    for runs in sorted(points):
        if points[runs] > best:
            best = kept[runs] = points[runs]
    return kept


def _add(frontier: dict[int, float], options: Iterable[tuple[int, float]]) -> dict[int, float]:
    """Every point of ``frontier`` with one more cell, at each of its (seeds, power) options."""
    out: dict[int, float] = {}
    for runs, power in frontier.items():
        for seeds, gain in options:
            key = runs + seeds
            out[key] = max(out.get(key, -1.0), power + gain)
    return _pareto(out)


def allocation_floor(rows: Sequence[dict], margin: float, fixed_seeds: Sequence[int], power: float) -> int | None:
    """The fewest runs of a per-cell fixed allocation, knowing every cell's truth, whose mean power over the
    comparisons with truth above ``-margin`` reaches ``power``; None where even the most seeds do not.

    ``rows`` are the bench's per-comparison rows (``train_size, frozen_layers, truth`` and ``fixed_S``, the power
    of the uniform S-seed design, for every S in ``fixed_seeds``); each size also has one reference cell."""
    cells = sorted(rows, key=lambda r: r["train_size"])
    targets = sum(1 for r in cells if r["truth"] > -margin)
    if targets == 0:
        return None
    total = {0: 0.0}
    for _, at_size in groupby(cells, key=lambda r: r["train_size"]):
        at_size = list(at_size)
        size_points: dict[int, float] = {}
        for ref in [SCREEN_SEEDS, *fixed_seeds]:  # the reference's seeds bound its depths' (paired by seed)
            frontier = {ref: 0.0}
            for r in at_size:
                grid = [(s, float(r[f"fixed_{s}"])) for s in fixed_seeds if s <= ref] if r["truth"] > -margin else []
                frontier = _add(frontier, [(SCREEN_SEEDS, 0.0), *grid])
            for runs, gain in frontier.items():
                size_points[runs] = max(size_points.get(runs, -1.0), gain)
        total = _add(total, _pareto(size_points).items())
    reached = [runs for runs, summed in total.items() if summed / targets >= power - 1e-12]
    return min(reached) if reached else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, nargs="+", help="saved bench/adaptive_seeds.py runs (.json)")
    args = parser.parse_args()
    print("per-cell allocation floor: the fewest runs of a fixed allocation of seeds per cell, chosen knowing every "
          "cell's truth, that reaches the adaptive design's mean power (cells' powers from the record's uniform "
          "designs)")  # fmt: skip
    print(f"{'record':<100} {'power':>6} {'adaptive':>9} {'floor':>6} {'adaptive/floor':>15}")
    for path in args.records:
        record = json.loads(path.read_text())
        rows = [r for r in record["rows"] if r.get("row") != "summary"]
        summary = next(r for r in record["rows"] if r.get("row") == "summary")
        seeds = record.get("fixed_seeds", [2, 4, 6, 8, 10])
        floor = allocation_floor(rows, record["margin"], seeds, summary["power_adaptive"])
        ratio = "-" if floor is None else f"{summary['runs_adaptive'] / floor:.2f}"
        print(f"{path.stem:<100} {summary['power_adaptive']:>6.3f} {summary['runs_adaptive']:>9.1f} "
              f"{floor if floor is not None else '-':>6} {ratio:>15}")  # fmt: skip


if __name__ == "__main__":
    main()

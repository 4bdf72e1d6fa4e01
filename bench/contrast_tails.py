"""How often does a look's one-sided bound miss the truth at the levels the looks test at, by seeds and size?

    python bench/contrast_tails.py --seeds 4 --studies 200 --failure-rates pooled

The adaptive design tests each comparison at local levels of 0.001-0.005 (``bench/adaptive_null_claims.py``
prints them), so its familywise error rests on the contrast's far lower tail, not on its 95% interval. This
takes the null studies of ``bench/adaptive_seeds.py`` (``null_at_margin(0.03)`` of ``blog_shaped()``, generator
seed ``NULL_OFFSET + study``), every cell cut to its first ``--seeds`` seeds, computes the task-level contrasts
as a look does (:func:`~freezestats.stats.items.task_level.task_level_contrasts`), and counts the contrasts whose
one-sided ``(1 - a)`` lower bound lies above the truth, at a = 0.001, 0.005 and 0.025, read two ways: with the
failure part's lower side at the level itself (the ladder, :mod:`~freezestats.stats.inference.tail_matched`) and
with the 95% side scaled (what the looks did before). A bound that is right misses in a share a of contrasts.
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import platform
import time
from dataclasses import replace
from pathlib import Path

import flops
import numpy as np
import pandas as pd

from freezestats.stats.inference.tail_matched import matched_lower
from freezestats.stats.items.task_level import task_level_contrasts
from freezestats.stats.simulation.realistic import blog_shaped, null_at_margin, realistic_task, simulate_realistic

_SPEC = importlib.util.spec_from_file_location("adaptive_seeds", Path(__file__).with_name("adaptive_seeds.py"))
seeds_bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(seeds_bench)  # the null studies and the failure flags of that bench, not a copy

MARGIN = 0.03
LEVELS = (0.001, 0.005, 0.025)
_STATE: dict = {}


def _start(seeds: int, rates: str) -> None:
    """A pool worker: the null scenario (24 seeds a cell simulated, as the adaptive bench's) and the settings."""
    _STATE.update(task=realistic_task(null_at_margin(MARGIN, replace(blog_shaped(), seeds=max(seeds, 24)))),
                  seeds=seeds, rates=rates)  # fmt: skip


def study_contrasts(index: int) -> pd.DataFrame:
    """Null study ``index``'s contrasts on every cell's first seeds, with the truth and each bound's miss."""
    study = simulate_realistic(_STATE["task"], rng=seeds_bench.NULL_OFFSET + index)
    runs = seeds_bench._flagged(study.results).sort_values(["train_size", "frozen_layers", "seed"])
    view = runs[runs.groupby(["train_size", "frozen_layers"]).cumcount() < _STATE["seeds"]]
    items = study.items[study.items["trial"].isin(view["trial"])]
    table = task_level_contrasts(view, items, response="heldout", metric="accuracy", reference=0,
                                 population="task", failure_rates=_STATE["rates"])  # fmt: skip
    cells = zip(table["train_size"], table["frozen_layers"], strict=True)
    truth = np.array([study.truth_task[(n, k)] for n, k in cells])
    out = table[["train_size", "frozen_layers", "method"]].assign(study=index)
    rows = table.to_dict("records")
    for a in LEVELS:
        out[f"ladder {a}"] = [_lower(r, a, ladder=True) > t for r, t in zip(rows, truth, strict=True)]
        out[f"scaled {a}"] = [_lower(r, a, ladder=False) > t for r, t in zip(rows, truth, strict=True)]
    return out


def _lower(row: dict, level: float, ladder: bool) -> float:
    """The contrast's one-sided ``(1 - level)`` lower bound, its failure part read at ``level`` or scaled."""
    rungs = row["lower_tail"] if ladder else None  # None without a failure part, as task_family reads it
    return matched_lower(row["estimate"], level, row["se_lower"], row["df_lower"], rungs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4, help="seeds a cell (the look's count)")
    parser.add_argument("--studies", type=int, default=200)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--failure-rates", default="pooled", choices=("pooled", "pooled_joint"))
    args = parser.parse_args()
    if args.seeds < 2:
        parser.error(f"--seeds must be at least 2 (a contrast's spread needs two), but got {args.seeds}")
    started = time.perf_counter()
    with multiprocessing.Pool(args.processes, initializer=_start, initargs=(args.seeds, args.failure_rates)) as pool:
        table = pd.concat(pool.map(study_contrasts, range(args.first, args.first + args.studies)), ignore_index=True)
    print(
        f"bench/contrast_tails.py: {args.seeds} seeds a cell, failure part {args.failure_rates}, null studies "
        f"{args.first}-{args.first + args.studies - 1} (truth -{MARGIN}); {flops.cpu_name()}, "
        f"python {platform.python_version()}, {args.processes} process(es), {time.perf_counter() - started:.0f} s"
    )
    print(
        "share of contrasts whose one-sided (1 - a) lower bound lies above the truth (right: a), failure part read "
        "at a (ladder) or its 95% side scaled:"
    )
    misses = [c for c in table.columns if c.startswith(("ladder", "scaled"))]
    by_size = table.groupby("train_size")[misses].mean()
    by_size.insert(0, "contrasts", table.groupby("train_size").size())
    by_size.insert(
        1, "all runs", table.groupby("train_size")["method"].apply(lambda m: float((m == "all runs").mean()))
    )
    print(by_size.round(4).to_string())
    print("n >= 100, by depth:")
    print(table[table["train_size"] >= 100].groupby("frozen_layers")[misses].mean().round(4).to_string())


if __name__ == "__main__":
    main()

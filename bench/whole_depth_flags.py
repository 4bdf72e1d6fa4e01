"""Where do the deep cells' biased estimates come from? Flags, collapses, failure rates and methods per cell.

    python bench/whole_depth_flags.py 0 16 > bench/results/whole_depth_flags.txt    # ~5 min on one core

For studies ``first`` .. ``last - 1`` of the realistic simulator (``blog_shaped``, 5 seeds), per (train size,
depth): the mean number of the depth's and the reference's 5 runs that the binomial rule flags (``flag_k``,
``flag_0``) against those the simulator collapsed (``coll_k``, ``coll_0``), the failure rates the task-level
contrast used (``p``, ``p0``: the depth's and the reference's, 0 where the depth enters whole), the estimate's mean
error against the task's truth (``err``), the share of studies whose interval missed on its lower side
(``miss_low``), and how the contrasts were estimated (``method``). Where a deep depth scores at the majority
rate, the rule flags most of its runs though few collapsed, and it enters whole (README, *Which side misses*).
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from freezestats.stats.items.task_level import task_level_contrasts
from freezestats.stats.simulation.realistic import blog_shaped, realistic_task, simulate_realistic

_BENCH = Path(__file__).with_name("coverage_task_level.py")
_spec = importlib.util.spec_from_file_location("coverage_task_level", _BENCH)
coverage_bench = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(coverage_bench)  # type: ignore[union-attr]


def cell_rows(index: int, task: object) -> list[dict]:
    """One study's contrasts with the flags, collapses and rates behind them."""
    study = simulate_realistic(task, rng=index)
    runs = coverage_bench._flagged(study.results)  # the analysis's flags; the simulator's in `collapsed`
    table = task_level_contrasts(runs, study.items, response="heldout", metric="accuracy")
    flagged = runs.groupby(["train_size", "frozen_layers"])["failed"].sum()
    collapsed = runs.groupby(["train_size", "frozen_layers"])["collapsed"].sum()
    rows = []
    for r in table.itertuples():
        n, k = int(r.train_size), int(r.frozen_layers)
        truth = study.truth_task[(n, k)]
        rows.append({"study": index, "n": n, "k": k, "method": r.method, "p": r.p_fail, "p0": r.p_fail_reference,
                     "flag_k": flagged[(n, k)], "flag_0": flagged[(n, 0)], "coll_k": collapsed[(n, k)],
                     "coll_0": collapsed[(n, 0)], "err": r.estimate - truth, "miss_low": r.ci_low > truth})  # fmt: skip
    return rows


def main() -> None:
    first, last = (int(a) for a in sys.argv[1:3]) if len(sys.argv) > 2 else (0, 16)
    task = realistic_task(replace(blog_shaped(), seeds=5))
    frame = pd.DataFrame([row for i in range(first, last) for row in cell_rows(i, task)])
    cells = frame.groupby(["n", "k"])
    table = cells.agg(p=("p", "mean"), p0=("p0", "mean"), flag_k=("flag_k", "mean"), flag_0=("flag_0", "mean"),
                      coll_k=("coll_k", "mean"), coll_0=("coll_0", "mean"), err=("err", "mean"),
                      miss_low=("miss_low", "mean"))  # fmt: skip
    table["method"] = cells["method"].agg(lambda m: ", ".join(f"{v} {c}" for v, c in m.value_counts().items()))
    print(f"bench/whole_depth_flags.py: studies {first}-{last - 1} of blog_shaped(), 5 seeds; counts of 5 runs")
    with pd.option_context("display.width", 220, "display.max_colwidth", 80):
        print(table.round(3).replace(np.nan, "-").to_string())


if __name__ == "__main__":
    main()

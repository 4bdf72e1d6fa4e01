"""Where the task-level interval's width comes from: its healthy part or its failure part, against the estimate's
spread over studies.

    python bench/task_level_interval_parts.py                     # 100 studies at 5 and at 10 seeds a cell
    python bench/task_level_interval_parts.py --studies 40 --seeds 5,20

``bench/coverage_task_level.py`` finds the default's 95% intervals covering the task's truth 98-100% at
n >= 200. This splits each contrast's lower side (the side a non-inferiority test reads) into what it is made of,
on the same simulator (``blog_shaped``, collapsed runs and the analysis's own failure flags), per (size, depth):

* ``sd``: the estimate's SD over the studies (what a well-sized interval needs: 1.96 sd a side);
* ``se_healthy``: the healthy runs' contrast SE (seeds and items, ``sqrt(se_seed^2 + se_item^2)``);
* ``se``: the whole contrast's delta-method SE (healthy part and failure part);
* ``low``: the mean lower half-width, estimate - ci_low (the failure part's Wilson-MOVER side joined in);
* ``low/1.96sd``: 1 where the lower side is as long as a normal estimate with that spread needs;
* ``low|none``, ``low|fail``: the mean lower half-width in studies without and with a failed run in the
  contrast (``fail``: that share);
* ``cover``: coverage of the task's truth (``truth``).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from freezestats.stats.items.task_level import task_level_contrasts
from freezestats.stats.simulation.realistic import blog_shaped, realistic_task, simulate_realistic

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: flops.py and the coverage bench
import coverage_task_level  # the analysis's failure flags on simulated runs, as the coverage bench sets them
import flops  # the CPU's name, as every bench gives it


def parts(n_studies: int, seeds: int) -> pd.DataFrame:
    """One row per (study, contrast): the estimate, its truth, its SEs and its lower half-width."""
    task = realistic_task(replace(blog_shaped(), seeds=seeds))
    rows = []
    for index in range(n_studies):
        study = simulate_realistic(task, rng=index)
        runs = coverage_task_level._flagged(study.results)
        table = task_level_contrasts(runs, study.items, response="heldout", metric="accuracy", failure_rates="pooled")
        failed = runs.groupby(["train_size", "frozen_layers"])["failed"].any()
        for row in table.itertuples():
            key = (int(row.train_size), int(row.frozen_layers))
            rows.append({"seeds": seeds, "n": key[0], "depth": key[1], "estimate": row.estimate,
                         "truth": study.truth_task[key], "se_healthy": np.hypot(row.se_seed, row.se_item),
                         "se": row.se, "low": row.estimate - row.ci_low,
                         "fail": bool(failed[key] or failed[(key[0], 0)]),
                         "cover": row.ci_low <= study.truth_task[key] <= row.ci_high})  # fmt: skip
    return pd.DataFrame(rows)


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (seeds, size, depth): the columns of the module docstring."""
    cell = frame.groupby(["seeds", "n", "depth"])
    out = cell.agg(truth=("truth", "mean"), sd=("estimate", "std"), se_healthy=("se_healthy", "mean"),
                   se=("se", "mean"), low=("low", "mean"), fail=("fail", "mean"), cover=("cover", "mean"))  # fmt: skip
    out["low/1.96sd"] = out["low"] / (1.96 * out["sd"])
    for name, rows in (("low|none", ~frame["fail"]), ("low|fail", frame["fail"])):
        out[name] = frame[rows].groupby(["seeds", "n", "depth"])["low"].mean()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=100)
    parser.add_argument("--seeds", default="5,10", help="seeds a cell, comma-separated")
    args = parser.parse_args()
    started = time.perf_counter()
    frames = [parts(args.studies, int(s)) for s in args.seeds.split(",")]
    table = summary(pd.concat(frames))
    print(f"bench/task_level_interval_parts.py: {args.studies} studies of blog_shaped() at {args.seeds} seeds a "
          f"cell, failure rates pooled, {time.perf_counter() - started:.0f} s")  # fmt: skip
    print(f"  vm: {flops.cpu_name()}, python {platform.python_version()}\n")
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(table.round(4).to_string())


if __name__ == "__main__":
    main()

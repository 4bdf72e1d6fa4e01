"""Does the task-level answer's seeds-needed table predict the power that more seeds really give?

    python bench/task_power_check.py                  # 60 studies per design, ~15 min on 2 shared cores
    python bench/task_power_check.py --studies 20

``freezestats analyze`` reads each depth's 5-seed contrast and simulates, with that contrast's per-seed SD
uncertain, its items' part and its failure part, the power that S seeds would give to show a depth with no
true cost non-inferior (``stats/inference/task_power.py``). This bench checks that against the realistic
simulator (``stats/simulation/realistic.py``: collapsed runs, depth x seed interaction, a finite evaluation
set, failure flagged by the analysis's binomial rule), which shares none of the power model's assumptions:

* **predicted**: the mean, over simulated 5-seed studies, of ``task_power``'s power at S seeds;
* **realised**: the share of simulated S-seed studies whose contrast passes the same test (lower bound at the
  level the graph first gives it, above -margin).

Only contrasts whose task-level truth is within 0.3 points of 0 are compared (the power model assumes no true
cost): frozen -1 at 100-1000 examples, frozen 1 and 2 at 1000.
"""

from __future__ import annotations

import argparse
import platform
import time
from dataclasses import replace

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.stats.failures.rates import flag_failures
from freezestats.stats.inference.graphical import depth_sequence_graph
from freezestats.stats.inference.sequence import depth_rank, order_by_depth
from freezestats.stats.inference.task_power import task_power
from freezestats.stats.items.task_level import task_level_contrasts
from freezestats.stats.simulation.realistic import blog_shaped, realistic_task, simulate_realistic

MARGIN = 0.01
SEEDS = (10, 20)
NEAR_ZERO = 0.003


def _contrasts(task, index: int) -> tuple[pd.DataFrame, dict]:
    study = simulate_realistic(task, rng=index)
    runs = study.results.assign(failed=lambda d: flag_failures(d, checkpoint="heldout", rule="binomial").to_numpy())
    return order_by_depth(
        task_level_contrasts(runs, study.items, response="heldout", metric="accuracy")
    ), study.truth_task


def _shown_at_first_level(table: pd.DataFrame) -> pd.Series:
    weights, _ = depth_sequence_graph(table["train_size"].to_numpy(), depth_rank(table["frozen_layers"].to_numpy()))
    level = 0.05 * weights
    lower = table["estimate"] - stats.t.ppf(1 - level, table["df_lower"]) * table["se_lower"]
    return pd.Series((lower > -MARGIN).to_numpy(), pd.MultiIndex.from_frame(table[["train_size", "frozen_layers"]]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=60)
    args = parser.parse_args()
    started = time.perf_counter()
    base = blog_shaped()
    truth = realistic_task(base).truth_task
    cells = [key for key, value in truth.items() if abs(value) <= NEAR_ZERO and key[0] >= 100]
    predicted = []
    five = realistic_task(base)
    for i in range(args.studies):
        table, _ = _contrasts(five, i)
        power = task_power(table, margin=MARGIN, n_seeds=SEEDS, n_sim=1000, rng=i)
        predicted.append(power.set_index(["train_size", "frozen_layers", "n_seeds"])["power"])
    predicted = pd.concat(predicted, axis=1).mean(axis=1)
    realised = {}
    for seeds in SEEDS:
        task = realistic_task(replace(base, seeds=seeds))
        shown = pd.concat([_shown_at_first_level(_contrasts(task, 10_000 * seeds + i)[0]) for i in range(args.studies)],
                          axis=1)  # fmt: skip
        realised[seeds] = shown.mean(axis=1)
    print(f"bench/task_power_check.py: {args.studies} studies per design of blog_shaped(), margin {MARGIN}; "
          f"{platform.processor() or platform.machine()}, {time.perf_counter() - started:.0f} s")  # fmt: skip
    band = 1.96 * np.sqrt(0.25 / args.studies)
    print(f"power to show a no-cost depth non-inferior at the graph's first level (MC half-width <= {band:.3f})")
    rows = []
    for size, depth in sorted(cells):
        row = {"n": size, "frozen": depth, "truth": round(truth[(size, depth)], 4)}
        for seeds in SEEDS:
            row[f"predicted@{seeds}"] = round(float(predicted[(size, depth, seeds)]), 3)
            row[f"realised@{seeds}"] = round(float(realised[seeds][(size, depth)]), 3)
        rows.append(row)
    print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()

"""Does a depth's task-level verdict move with which other depths the study ran?

    python bench/pooling_task_level.py                 # 100 studies of blog_shaped(), ~6 min on 2 cores
    python bench/pooling_task_level.py --studies 20
    python bench/pooling_task_level.py --pool-all-depths   # the rates from one GLMM of every depth, to compare

Each simulated study (``freezestats.stats.simulation.realistic.blog_shaped``: collapsed runs, depth x seed
interaction, a finite evaluation set; failure flagged by the analysis's binomial rule) is analysed twice per
depth k: with every depth (-1, 0, 1, 2, 4, 5, 6) and with depth k and the reference alone. It prints, per size,
how often the per-comparison verdict at one fixed level (the one-sided 97.5% bound above -margin, margin 1
point) differs between the two, and the largest change of the bound.

The healthy part of a contrast (its seed x item interval) comes from its own two cells, so without failed runs
nothing moves (``tests/test_stats_task_level.py`` checks that exactly). The failure part reads each cell's
failure rate from a GLMM that pools the task's cells (5 runs cannot estimate a rate of a few percent), so
removing depths moves a rate, and with it the bound, a little: this bench says how little. The family's
procedure splits alpha over the depths run, so the final verdicts under it necessarily depend on how many
hypotheses there are; that is the procedure, not the contrast, and is not measured here.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.stats.failures.rates import flag_failures
from freezestats.stats.items import task_level
from freezestats.stats.items.task_level import task_level_contrasts
from freezestats.stats.items.task_two_part import failure_parts
from freezestats.stats.simulation.realistic import blog_shaped, realistic_task, simulate_realistic

MARGIN = 0.01


def _bounds(runs: pd.DataFrame, items: pd.DataFrame) -> pd.Series:
    table = task_level_contrasts(runs, items, response="heldout", metric="accuracy")
    lower = table["estimate"] - stats.t.ppf(0.975, table["df_lower"]) * table["se_lower"]
    return pd.Series(lower.to_numpy(), pd.MultiIndex.from_frame(table[["train_size", "frozen_layers"]]))


def one_study(task, index: int) -> pd.DataFrame:
    study = simulate_realistic(task, rng=index)
    runs = study.results.assign(failed=lambda d: flag_failures(d, checkpoint="heldout", rule="binomial").to_numpy())
    full = _bounds(runs, study.items)
    rows = []
    for depth in sorted(set(runs["frozen_layers"]) - {0}):
        keep = runs["frozen_layers"].isin([0, depth])
        alone = _bounds(runs[keep], study.items[study.items["trial"].isin(runs.loc[keep, "trial"])])
        for size in alone.index.get_level_values(0).unique():
            a, b = full[(size, depth)], alone[(size, depth)]
            rows.append({"study": index, "train_size": size, "frozen_layers": depth, "change": b - a,
                         "flipped": (a > -MARGIN) != (b > -MARGIN), "failed": bool(runs["failed"].any())})  # fmt: skip
    return pd.DataFrame(rows)


class _AllDepths(task_level._FailureModels):
    """The alternative this bench compares with: every depth's failure rates from one GLMM of all the task's runs."""

    def __call__(self, depth: int) -> object:
        if not self._fitted:
            self._fitted[0] = failure_parts(self._runs, self._response)
        return self._fitted[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=100)
    parser.add_argument("--pool-all-depths", action="store_true", help="rates from one GLMM of every depth")
    args = parser.parse_args()
    if args.pool_all_depths:
        task_level._FailureModels = _AllDepths  # the library's per-depth models, swapped for the comparison
    started = time.perf_counter()
    task = realistic_task(blog_shaped())
    frame = pd.concat([one_study(task, i) for i in range(args.studies)], ignore_index=True)
    rates = "one GLMM of every depth" if args.pool_all_depths else "each depth's and the reference's runs (default)"
    print(f"failure rates from {rates}")
    print(f"bench/pooling_task_level.py: {args.studies} studies of blog_shaped(), 5 seeds, margin {MARGIN}; "
          f"{platform.processor() or platform.machine()}, {time.perf_counter() - started:.0f} s")  # fmt: skip
    print("per size: share of contrasts whose verdict at a fixed level (97.5% bound > -margin) differs between")
    print("'every depth' and 'this depth and the reference alone'; median and largest |change| of the bound")
    summary = frame.groupby("train_size").agg(
        contrasts=("flipped", "size"),
        flipped=("flipped", "mean"),
        median_change=("change", lambda c: float(np.median(np.abs(c)))),
        largest_change=("change", lambda c: float(np.max(np.abs(c)))),
    )
    print(summary.round(4).to_string())
    print(f"all sizes: {frame['flipped'].sum()} of {len(frame)} verdicts differ ({frame['flipped'].mean():.3%})")


if __name__ == "__main__":
    main()

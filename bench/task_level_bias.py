"""Is the default task-level contrast unbiased where many runs are flagged as failed, and does its bias or its SE
depend on the number of seeds?

Why: ``bench/adaptive_seeds.py`` at a 3-point margin found the fixed task-level test's familywise error at the
null growing with the seeds, all of it at n = 50 (0.083 at 10 seeds, 0.188 at 16, 0.292 at 20). Under
``null_at_margin(0.03)`` every depth's task-level truth is -0.03; this prints, at each size, the mean of the
default contrast (``task_level_contrasts``, two-part, pooled failure rates) over null studies of the realistic
simulator on each study's first 5 and first 20 seeds: its bias (MC SE = sd / sqrt(studies)), its mean SE beside
the estimates' spread, the share of studies whose 97.5% lower bound lies below the truth (``lower_ok``,
nominal 0.975), and how the contrasts were estimated. ``--level-sd estimated`` estimates the pair's failure-model
level SD, as the analysis did before it was given (``task_two_part.PAIR_LEVEL_SD``), on the same studies.

    python bench/task_level_bias.py --studies 40 > bench/results/task_level_bias.txt
    python bench/task_level_bias.py --studies 40 --level-sd estimated > bench/results/task_level_bias_estimated_sd.txt

``bench/results/task_level_bias_n50_before.txt`` is the first diagnosis (12 studies, n = 50), before the healthy part
used each cell's own healthy runs.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
from scipy import stats

from freezestats.stats.failures.rates import flag_failures
from freezestats.stats.items import task_two_part
from freezestats.stats.items.task_level import task_level_contrasts
from freezestats.stats.simulation.realistic import blog_shaped, null_at_margin, realistic_task, simulate_realistic

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/flops.py
import flops  # the CPU's name, as every bench gives it

NULL_OFFSET = 1_000_000  # bench/adaptive_seeds.py's null studies: study i draws rng=NULL_OFFSET + i
MARGIN = 0.03
SEEDS = (5, 20)


def one_study(task, index: int, sizes: tuple[int, ...]) -> list[dict]:
    """The contrasts at each of ``sizes`` on the study's first S seeds, for each S in :data:`SEEDS`."""
    study = simulate_realistic(task, rng=NULL_OFFSET + index)
    runs = study.results.assign(failed=flag_failures(study.results, checkpoint="heldout", rule="binomial").to_numpy())
    runs = runs.sort_values(["train_size", "frozen_layers", "seed"])
    rows = []
    for s in SEEDS:
        first = runs[runs.groupby(["train_size", "frozen_layers"]).cumcount() < s]
        items = study.items[study.items["trial"].isin(first["trial"])]
        contrasts = task_level_contrasts(first, items, response="heldout", metric="accuracy", population="task")
        for r in contrasts[contrasts["train_size"].isin(sizes)].itertuples():
            lower = r.estimate - stats.t.ppf(0.975, r.df_lower) * r.se_lower
            rows.append({"study": index, "size": r.train_size, "seeds": s, "depth": r.frozen_layers,
                         "estimate": r.estimate, "se": r.se, "lower_ok": lower <= -MARGIN,
                         "method": r.method})  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=40)
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 100])
    parser.add_argument("--level-sd", default="given", choices=["given", "estimated"])
    args = parser.parse_args()
    if args.level_sd == "estimated":
        task_two_part.PAIR_LEVEL_SD = None  # the analysis before the SD was given
    started = time.time()
    task = realistic_task(null_at_margin(MARGIN, replace(blog_shaped(), seeds=max(SEEDS))))
    table = pd.DataFrame([row for i in range(args.studies) for row in one_study(task, i, tuple(args.sizes))])
    print(f"bench/task_level_bias.py: null_at_margin({MARGIN}), every depth's task-level truth {-MARGIN}; "
          f"{args.studies} null studies; first {SEEDS} seeds; pair level SD {args.level_sd} "
          f"({task_two_part.PAIR_LEVEL_SD}); {time.time() - started:.0f} s")  # fmt: skip
    print(f"  vm: {flops.cpu_name()}, python {platform.python_version()}")
    summary = table.groupby(["size", "seeds", "depth"]).agg(
        mean_estimate=("estimate", "mean"), sd_estimate=("estimate", "std"), mean_se=("se", "mean"),
        lower_ok=("lower_ok", "mean"),
    )  # fmt: skip
    summary.insert(0, "bias", summary["mean_estimate"] + MARGIN)
    summary.insert(1, "bias_mc_se", summary["sd_estimate"] / args.studies**0.5)
    print(summary.round(4).to_string())
    print("\nhow the contrasts were estimated (counts)")
    print(table.groupby(["size", "seeds", "method"]).size().unstack(fill_value=0).to_string())


if __name__ == "__main__":
    main()

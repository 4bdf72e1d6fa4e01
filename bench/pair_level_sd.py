"""How much of the shallow contrasts' width is the pair's level SD? Widths with it given at 2.5, 1.0 and 0.5.

Why: the default's 95% intervals over-cover the shallow depths (0.975-0.988 at n = 50-1000,
``bench/results/coverage_task_level_joint800.txt``), also in studies where neither cell of the pair collapsed,
and a lower floor of the joint draws' cell SD did not narrow them (``coverage_task_level_grid005_paired.txt``).
The pair's failure GLMM gives the depth's level effect an SD of 2.5 on the logit
(:data:`~freezestats.stats.items.task_two_part.PAIR_LEVEL_SD`), which a pair with few failures cannot narrow.
This bench refits the shallow pairs (frozen -1 and 1 against 0) of the coverage bench's first studies with that
SD at 2.5, 1.0 and 0.5 and prints each contrast's mean width over the default's, split by whether the pair's
runs held a collapse, and the share covering the task's truth (too few studies to read as coverage: a guide to
what a study-by-study coverage run should test). A smaller SD pulls the depth's failure rate towards the
reference's, which is what biased the deep depths before 2.5 was chosen, so it is a measurement, not a fix.

    python bench/pair_level_sd.py --studies 20
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import pandas as pd

from freezestats.stats.items import task_two_part
from freezestats.stats.items.task_level import task_level_contrasts
from freezestats.stats.simulation.realistic import blog_shaped, realistic_task, simulate_realistic

sys.path.insert(0, str(Path(__file__).resolve().parent))
import flops  # the CPU's name, as every bench gives it

# bench/coverage_task_level.py, for the analysis's failure flags and the collapse split (loaded by path, as it
# loads bench/coverage.py)
_spec = importlib.util.spec_from_file_location(
    "bench_ctl", Path(__file__).resolve().with_name("coverage_task_level.py")
)
ctl = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(ctl)  # type: ignore[union-attr]

#: (label, the given SD, whether the draws integrate it out under a half-normal prior of that scale, whether they
#: keep only rates that do not rise with size: :mod:`freezestats.stats.failures.size_order`)
VARIANTS = (
    ("2.5", 2.5, False, False),
    ("1.0", 1.0, False, False),
    ("0.5", 0.5, False, False),
    ("hn(2.5)", 2.5, True, False),
    ("hn(2.5)+order", 2.5, True, True),
)


def widths(n_studies: int, depths: tuple[int, ...] = (-1, 1)) -> pd.DataFrame:
    """One row per (study, level SD, shallow contrast): its width, whether it covers, whether a run collapsed."""
    task = realistic_task(blog_shaped())
    rows = []
    default = task_two_part.PAIR_LEVEL_SD, task_two_part.PAIR_LEVEL_SD_PRIOR, task_two_part.PAIR_SIZE_ORDER
    try:
        for i in range(n_studies):
            study = simulate_realistic(task, rng=i)
            runs = ctl._flagged(study.results)
            pairs = runs[runs["frozen_layers"].isin([*depths, 0])]
            collapsed = ctl._collapsed(pairs)
            for label, *setting in VARIANTS:
                task_two_part.PAIR_LEVEL_SD, task_two_part.PAIR_LEVEL_SD_PRIOR, task_two_part.PAIR_SIZE_ORDER = setting
                table = task_level_contrasts(pairs, study.items, response="heldout", metric="accuracy",
                                             failure_rates="pooled_joint")  # fmt: skip
                for r in table.itertuples():
                    key = (int(r.train_size), int(r.frozen_layers))
                    rows.append({"study": i, "level_sd": label, "train_size": key[0], "frozen_layers": key[1],
                                 "collapse": collapsed[key], "width": r.ci_high - r.ci_low,
                                 "covers": r.ci_low <= study.truth_task[key] <= r.ci_high})  # fmt: skip
    finally:
        task_two_part.PAIR_LEVEL_SD, task_two_part.PAIR_LEVEL_SD_PRIOR, task_two_part.PAIR_SIZE_ORDER = default
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=20)
    parser.add_argument("--depths", default="-1,1", help="comma-separated depths contrasted with 0 (shallow: -1,1)")
    args = parser.parse_args()
    started = time.perf_counter()
    depths = tuple(int(d) for d in args.depths.split(","))
    rows = widths(args.studies, depths)
    index = ["train_size", "frozen_layers", "collapse"]
    width = rows.pivot_table(index=index, columns="level_sd", values="width", aggfunc="mean")
    covers = rows.pivot_table(index=index, columns="level_sd", values="covers", aggfunc="mean")
    studies = rows[rows["level_sd"] == VARIANTS[0][0]].groupby(index).size().rename("studies")
    print(f"bench/pair_level_sd.py: the first {args.studies} studies of blog_shaped(), depths {depths} against 0, "
          f"{time.perf_counter() - started:.0f} s; {flops.cpu_name()}")  # fmt: skip
    print("\nmean width over the default's (level SD 2.5):")
    print(pd.concat([studies, width.div(width["2.5"], axis=0)[[v[0] for v in VARIANTS]]], axis=1).round(3).to_string())
    print("\nshare covering the task's truth (few studies: not a coverage estimate):")
    print(covers[[v[0] for v in VARIANTS]].round(2).to_string())


if __name__ == "__main__":
    main()

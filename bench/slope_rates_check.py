"""How well does each failure-rate model of a depth pair cover the difference of the two cells' failure rates?

    python bench/slope_rates_check.py                        # 200 checked studies, truth from 2000 more
    python bench/slope_rates_check.py --studies 100 --truth-studies 1000

The task-level failure part (:mod:`freezestats.stats.items.task_two_part`) needs each depth's and the
reference's failure rate per train size. This bench isolates that step: on ``blog_shaped()`` studies of the
realistic simulator (5 seeds a cell), flagged by the analysis's own rule (``flag_failures``, binomial against the
majority rate on the scored half, as ``bench/coverage_task_level.py`` flags them), it fits each pair (depth vs
0) with

* ``pooled``: the binomial GLMM of the pair's runs, Wilson at the effective n, MOVER, delta-method floor
  (:func:`~freezestats.stats.failures.two_part.failure_sides`, today's default);
* ``slope-profile`` and ``slope-wald``: Firth's depth x log2-size fit
  (:mod:`freezestats.stats.failures.slope_rates`) with profile or logit-Wald intervals, MOVER;

and reports, per (size, depth), the share of studies whose interval of ``P_k - P_0`` covers the true flagged
rate difference (the flag rates of ``--truth-studies`` other studies) and the median width of that interval.
Pairs without any flagged run are left out (they get no failure part). It checks the rates only; the
contrasts' coverage is ``bench/coverage_task_level.py``'s.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import pandas as pd

from freezestats.stats.failures.pooled_rates import pooled_failure_probabilities
from freezestats.stats.failures.rates import flag_failures
from freezestats.stats.failures.slope_rates import slope_failure_probabilities, slope_failure_sides
from freezestats.stats.failures.two_part import failure_sides
from freezestats.stats.simulation.realistic import blog_shaped, realistic_task, simulate_realistic

MODELS = ("pooled", "slope-profile", "slope-wald")


def flags(first: int, count: int) -> pd.DataFrame:
    """The analysis's failure flags of ``count`` studies from generator seed ``first`` on, one row per run."""
    task = realistic_task(replace(blog_shaped(), seeds=5))
    frames = []
    for index in range(first, first + count):
        runs = simulate_realistic(task, rng=index).results
        failed = flag_failures(runs, checkpoint="heldout", rule="binomial").to_numpy()
        frames.append(runs[["train_size", "frozen_layers"]].assign(study=index, failed=failed))
    return pd.concat(frames, ignore_index=True)


def differences(model: str, pair: pd.DataFrame, depth: int) -> dict[int, tuple[float, float]]:
    """Per size, the interval of ``P_depth - P_0`` from ``model`` (gaps of 1: the failure part of a rate)."""
    failed = pair["failed"].to_numpy()
    if model == "pooled":
        p, rows = pooled_failure_probabilities(pair, failed)
    else:
        rates = slope_failure_probabilities(pair, failed, interval=model.removeprefix("slope-"))
        p = rates.p
    out = {}
    for size in sorted(set(pair["train_size"])):
        cells = ((depth, size), (0, size))
        if model == "pooled":
            _, below, above = failure_sides(tuple((p[c], rows[c]) for c in cells), (1.0, 1.0), 0.95)
        else:
            terms = tuple((p[c], rates.rows[c], rates.bounds[c]) for c in cells)
            _, below, above = slope_failure_sides(terms, (1.0, 1.0))
        estimate = p[cells[0]] - p[cells[1]]
        out[size] = (estimate - below, estimate + above)
    return out


def run(n_studies: int, truth_studies: int) -> pd.DataFrame:
    """Per (model, size, depth): coverage of the true rate difference and the median interval width."""
    truth = flags(n_studies, truth_studies).groupby(["frozen_layers", "train_size"])["failed"].mean()
    out = []
    for study, runs in flags(0, n_studies).groupby("study"):
        for depth in sorted(set(runs["frozen_layers"]) - {0}):
            pair = runs[runs["frozen_layers"].isin([0, depth])].reset_index(drop=True)
            if not pair["failed"].any():
                continue
            for model in MODELS:
                for size, (low, high) in differences(model, pair, depth).items():
                    target = truth[(depth, size)] - truth[(0, size)]
                    out.append({"model": model, "train_size": size, "frozen_layers": depth, "study": study,
                                "covers": low <= target <= high, "width": high - low})  # fmt: skip
    table = pd.DataFrame(out)
    return table.groupby(["model", "train_size", "frozen_layers"]).agg(
        coverage=("covers", "mean"), median_width=("width", "median"), n=("study", "size")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=200)
    parser.add_argument("--truth-studies", type=int, default=2000)
    args = parser.parse_args()
    started = time.perf_counter()
    table = run(args.studies, args.truth_studies)
    print(
        f"bench/slope_rates_check.py: {args.studies} studies of blog_shaped() (5 seeds), true flag rates from "
        f"{args.truth_studies} more, {time.perf_counter() - started:.0f} s\n"
        "coverage of the 95% interval of P_k - P_0 (flagged failure rates), and its median width"
    )
    for name in ("coverage", "median_width"):
        print(f"\n{name}")
        print(table[name].unstack("frozen_layers").round(3).to_string())


if __name__ == "__main__":
    main()

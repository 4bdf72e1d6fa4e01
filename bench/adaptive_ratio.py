"""The adaptive design's runs ratio with its Monte Carlo uncertainty: chunks of one plan merged, studies resampled.

    python bench/adaptive_ratio.py bench/results/adaptive_seeds_<plan>_s48.json \
        bench/results/adaptive_seeds_<plan>_s120_from1008.json --output bench/results/adaptive_ratio_<plan>.txt

Why: ``bench/adaptive_seeds.py`` compares the adaptive design's runs with the fixed design of the same power, and
both powers are Monte Carlo estimates from the same studies. On two sets of studies the same plan read 0.294 and
0.362 (the fixed designs read between the grid's), a spread that the printed point estimate does not show, and
the ≤ 1/3 target sits between them. This script pools the per-study rows of several runs of one plan (each run's
``<stem>_studies.parquet``; runs of different plans, margins, fixed designs or simulated seeds are refused) and
resamples whole studies (each alternative study with the null study of its index, as the bench draws them) to
give every ratio a percentile interval: the runs, both powers, the fixed designs' own familywise error (which
decides which designs may match) and the reading between them all move together in a resample.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/adaptive_seeds.py, also when a test loads this

import adaptive_seeds as seeds_bench  # the bench's records, its summary and its reading between

#: What must agree for two saved runs to be chunks of one experiment.
SAME_PLAN = ("plan", "margin", "fixed_seeds", "simulated_seeds", "failure_rates")


def load(paths: list[Path]) -> tuple[dict, pd.DataFrame]:
    """The first record's settings and the per-study rows of every run, after checking they are one plan and
    share no study. Raises ``ValueError`` with one line where they are not."""
    records, frames = [], []
    for path in paths:
        record = json.loads(path.read_text())
        rows = seeds_bench.coverage.studies_path(path)
        if not rows.exists():
            raise ValueError(f"{path} has no per-study rows beside it ({rows.name}); rerun it with this bench")
        records.append(record)
        frames.append(pd.read_parquet(rows))
    for path, record in zip(paths[1:], records[1:], strict=True):
        differs = [key for key in SAME_PLAN if record.get(key) != records[0].get(key)]
        if differs:
            raise ValueError(f"{path} is not a chunk of {paths[0]}'s plan: {', '.join(differs)} differ")
    indices = [set(frame["study"]) for frame in frames]
    if sum(map(len, indices)) != len(set().union(*indices)):
        raise ValueError("the runs share studies: a study appears in more than one of them")
    return records[0], pd.concat(frames, ignore_index=True)


def per_study(studies: pd.DataFrame, margin: float, fixed_seeds: list[int]) -> pd.DataFrame:
    """One row per study: its runs, its mean power over the comparisons whose truth is above ``-margin`` (the
    adaptive design's and each fixed design's), and whether each fixed design and the adaptive one made any
    claim in its null study. The bench's pooled numbers are these rows' means."""
    alt = studies[studies["scenario"] == "alternative"]
    null = studies[(studies["scenario"] == "null") & (studies["frozen_layers"] != 0)]
    compared = alt[alt["frozen_layers"] != 0]
    truth = compared.groupby(["train_size", "frozen_layers"])["truth"].transform("mean")
    target = compared[truth > -margin]
    claims = target.assign(adaptive=target["decision"] == "noninferior")
    columns = ["adaptive", *(f"fixed_{s}" for s in fixed_seeds)]
    power = claims.groupby("study")[columns].mean().add_prefix("power_")
    wrong = null.assign(adaptive=null["decision"] == "noninferior").groupby("study")[columns].any().add_prefix("fwer_")
    runs = alt.groupby("study")["seeds"].sum().rename("runs")
    return pd.concat([runs, power.astype(float), wrong.astype(float)], axis=1)


def ratios(means: pd.Series, fixed_seeds: list[int], alpha: float, cells: int) -> dict[str, float]:
    """The grid's and the read-between ratio from a set of per-study means (NaN where no design matches)."""
    power = float(means["power_adaptive"])
    fixed_power = {s: float(means[f"power_fixed_{s}"]) for s in fixed_seeds}
    fwer = {s: float(means[f"fwer_fixed_{s}"]) for s in fixed_seeds}
    matched = seeds_bench.matched_design(power, fixed_power, fwer, alpha)
    between = seeds_bench.interpolated_seeds(power, fixed_power, fwer, alpha)
    runs = float(means["runs"])
    return {
        "runs": runs, "power": power, "fwer": float(means["fwer_adaptive"]),
        "grid": runs / (cells * matched) if matched else float("nan"),
        "between_seeds": between[0] if between else float("nan"),
        "between": runs / (cells * between[0]) if between else float("nan"),
    }  # fmt: skip


def bootstrap(table: pd.DataFrame, fixed_seeds: list[int], alpha: float, cells: int, resamples: int,
              seed: int = 0) -> pd.DataFrame:  # fmt: skip
    """The ratios of ``resamples`` resamples of whole studies (rows of :func:`per_study`)."""
    rng = np.random.default_rng(seed)
    values = table.to_numpy()
    draws = rng.integers(0, len(table), size=(resamples, len(table)))
    means = values[draws].mean(axis=1)
    return pd.DataFrame([ratios(pd.Series(m, index=table.columns), fixed_seeds, alpha, cells) for m in means])


def report(paths: list[Path], resamples: int) -> str:
    record, studies = load(paths)
    margin, fixed_seeds, alpha = record["margin"], [int(s) for s in record["fixed_seeds"]], record["plan"]["alpha"]
    table = per_study(studies, margin, fixed_seeds)
    cells = int(studies[studies["scenario"] == "alternative"].groupby("study").size().iloc[0])
    point = ratios(table.mean(), fixed_seeds, alpha, cells)
    boot = bootstrap(table, fixed_seeds, alpha, cells, resamples)
    first, last = int(table.index.min()), int(table.index.max())
    lines = [
        f"bench/adaptive_ratio.py: {len(table)} studies (indices {first}-{last}) from {len(paths)} run(s) of one "
        f"plan, {resamples} resamples of whole studies; percentile 95% intervals",
        *(f"  {path.name}" for path in paths),
        f"  plan: margin {margin}, {record['plan']['spending']} spending, first test at {record['plan']['min_seeds']}"
        f" seeds, at most {record['plan']['max_seeds']}; fixed designs at {fixed_seeds} seeds",
    ]
    for name, label in [("runs", "runs a study"), ("power", "adaptive power"), ("fwer", "familywise error"),
                        ("grid", "ratio (grid's match)"), ("between_seeds", "equal-power seeds read between"),
                        ("between", "ratio (read between)")]:  # fmt: skip
        values = boot[name].dropna()
        low, high = np.quantile(values, [0.025, 0.975]) if len(values) else (np.nan, np.nan)
        missing = "" if len(values) == resamples else f"  (no match in {resamples - len(values)} resamples)"
        lines.append(f"  {label:>31}: {point[name]:.3f} [{low:.3f}, {high:.3f}]{missing}")
    share = float((boot["between"] <= 1 / 3).mean())
    lines.append(f"  share of resamples with the read-between ratio <= 1/3: {share:.3f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, nargs="+", help="saved bench/adaptive_seeds.py runs of one plan")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples of studies (default 2000)")
    parser.add_argument("--output", type=Path, help="also write the report here")
    args = parser.parse_args()
    try:
        text = report(args.records, args.resamples)
    except (ValueError, OSError) as error:
        sys.exit(f"adaptive_ratio.py: {error}")
    print(text)
    if args.output:
        args.output.write_text(text + "\n")


if __name__ == "__main__":
    main()

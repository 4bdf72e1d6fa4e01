"""Two runs of ``bench/coverage_task_level.py`` on the same studies, compared study by study.

Why: each run's table gives coverage with a Monte Carlo SE of ~0.02 at 120 studies, too coarse to see what a
change of method does. On the same studies (study i draws rng=i in every run) the change shows directly: per
contrast, the studies whose interval stopped covering (``lost``) or started to (``gained``), and the mean SE and
width of the second run over the first's.

    python bench/paired_coverage.py --first bench/results/coverage_task_level_joint800_0_studies.parquet \\
        --second bench/results/coverage_task_level_joint_grid005_0_studies.parquet   # a run's chunks: several files
"""

from __future__ import annotations

import argparse

import pandas as pd

KEY = ["study", "train_size", "frozen_layers"]


def paired(first: pd.DataFrame, second: pd.DataFrame) -> pd.DataFrame:
    """Per contrast, over the studies both runs hold: each run's task-level coverage, the studies lost and gained
    by the second, and its mean SE and mean width over the first's (a tidy frame, one row per contrast)."""
    alt = [frame[frame["kind"] == "alternative"] for frame in (first, second)]
    both = alt[0].merge(alt[1], on=KEY, suffixes=("_a", "_b"))
    both = both[both["task_a"].notna() & both["task_b"].notna()]
    a, b = both["task_a"].astype(bool), both["task_b"].astype(bool)
    both = both.assign(cover_a=a, cover_b=b, lost=a & ~b, gained=~a & b)
    cell = both.groupby(["train_size", "frozen_layers"])
    out = cell.agg(studies=("study", "size"), cover_a=("cover_a", "mean"), cover_b=("cover_b", "mean"),
                   lost=("lost", "sum"), gained=("gained", "sum"), se_a=("se_a", "mean"), se_b=("se_b", "mean"),
                   width_a=("width_a", "mean"), width_b=("width_b", "mean"))  # fmt: skip
    out["se_ratio"] = out.pop("se_b") / out.pop("se_a")
    out["width_ratio"] = out.pop("width_b") / out.pop("width_a")
    return out.reset_index()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first", nargs="+", required=True, help="the baseline's _studies.parquet (or its chunks)")
    parser.add_argument("--second", nargs="+", required=True, help="the second run's _studies.parquet (or chunks)")
    args = parser.parse_args()
    first, second = (
        pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True) for paths in (args.first, args.second)
    )
    table = paired(first, second)
    print(
        f"{' + '.join(args.second)} against {' + '.join(args.first)}, on the {table['studies'].max()} studies both hold"
    )
    print(table.round(3).to_string(index=False))
    print(
        f"all contrasts: coverage {table['cover_a'].mean():.4f} -> {table['cover_b'].mean():.4f}, "
        f"{int(table['lost'].sum())} lost, {int(table['gained'].sum())} gained; width ratio "
        f"{table['width_ratio'].min():.3f}-{table['width_ratio'].max():.3f}"
    )


if __name__ == "__main__":
    main()

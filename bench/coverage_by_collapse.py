"""Task-level coverage and median width of contrasts with and without a collapsed run, from saved coverage runs.

Why: the shallow depths' excess coverage in ``coverage_task_level.py``'s default scenario sits in the contrasts
whose pair showed a collapse at that size (coverage 1.0 at widths near 18 points, README *Where the default's
shallow over-coverage comes from*), which the bench's per-cell table mixes with the rest. This sets runs side by
side on the same studies, split that way, at n >= 100 (at 50 examples nearly every pair shows one).

    python bench/coverage_by_collapse.py default bench/results/A_studies.parquet paired bench/results/B_studies.parquet
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pandas as pd

# the coverage bench's record (per-depth coverage, familywise error), loaded by path as coverage_task_level.py does
_spec = importlib.util.spec_from_file_location(
    "bench_coverage_task_level_record", Path(__file__).resolve().with_name("coverage_task_level_record.py")
)
saved = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(saved)  # type: ignore[union-attr]


def split(runs: dict[str, pd.DataFrame], studies: int, depths: list[int]) -> pd.DataFrame:
    """Per run, depth and whether the contrast had a collapsed run: contrasts, coverage, median width and the
    estimate's error SD (points), on the first ``studies`` studies every run shares."""
    rows = []
    for label, frame in runs.items():
        alt = frame[(frame["kind"] == "alternative") & (frame["study"] < studies) & (frame["train_size"] >= 100)]
        for (depth, shown), cell in alt[alt["frozen_layers"].isin(depths)].groupby(["frozen_layers", "collapse"]):
            rows.append({"run": label, "depth": depth, "collapse": bool(shown), "contrasts": len(cell),
                         "cover": cell["task"].mean(), "width": 100 * cell["width"].median(),
                         "error_sd": 100 * cell["error"].std()})  # fmt: skip
    return pd.DataFrame(rows)


def over_sizes(runs: dict[str, pd.DataFrame], studies: int) -> pd.DataFrame:
    """Per run: every depth's task-level coverage over all its sizes and the familywise error (the share of null
    studies naming any depth at any size non-inferior), on the first ``studies`` studies, as the coverage bench's
    record reads them."""
    rows = []
    for label, frame in runs.items():
        shared = frame[frame["study"] < studies]
        alt, null = shared[shared["kind"] == "alternative"], shared[shared["kind"] == "null"]
        depths = {f"frozen {d['frozen_layers']}": d["task"] for d in saved.depth_coverage(alt)}
        rows.append({"run": label, **depths, "familywise error": saved.familywise_error(null)["any"]})
    return pd.DataFrame(rows).set_index("run")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="label path pairs: a name, then a run's _studies.parquet")
    parser.add_argument("--studies", type=int, default=60, help="the first this many studies of each run")
    parser.add_argument("--depths", default="-1,1,2")
    args = parser.parse_args()
    if len(args.runs) % 2:
        raise SystemExit("error: give the runs as label path pairs")
    runs = {label: pd.read_parquet(path) for label, path in zip(args.runs[::2], args.runs[1::2], strict=True)}
    table = split(runs, args.studies, [int(d) for d in args.depths.split(",")])
    wide = table.pivot_table(
        index=["depth", "collapse"], columns="run", values=["contrasts", "cover", "width", "error_sd"]
    )
    print(f"studies 0-{args.studies - 1}, n >= 100: coverage, median width and error SD (points) by collapse shown")
    print(wide.round(3).to_string())
    print(f"\nstudies 0-{args.studies - 1}, every size: coverage per depth, and the familywise error at the margin")
    print(over_sizes(runs, args.studies).round(3).to_string())


if __name__ == "__main__":
    main()

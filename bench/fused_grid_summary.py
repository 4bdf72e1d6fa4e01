"""Summarise the whole-grid GPU runs of ``bench/gpu_fused_grid.sh``: wall time, runs/hour, GPU utilisation and
memory per configuration, and whether fused runs score as unfused ones do.

Why the second part: on CUDA a fused run draws its dropout masks differently from the lone run (see
``freezestats.training.fused``), so it is another draw, not the same run; the issue asks that its scores be
distributed as unfused runs' are. Each fused run is paired with the unfused run of the same cell and seed (the
same initialisation and data order), so the paired difference's mean is the systematic effect of fusion, with
a t interval over the pairs (runs of one cell share its data, so pairs are not fully independent: the interval
is a guide, the per-size table shows where a difference sits). Equivalence is read against a margin of 1 point
(the blog example's non-inferiority margin): the 90% interval inside +-1 point (TOST at 5%).

A run's dropout stream is fixed by its seed on both sides (the fused run's generator starts from the state the
lone run's global one would have), so every cell of one seed meets the same pair of streams: the second
interval takes each seed's mean difference as the unit (5 seeds, t with 4 df), the honest one if the streams,
not the cells, carry the difference.

    python bench/fused_grid_summary.py bench/results/fused-h100 > bench/results/fused-h100/summary.txt
    python bench/fused_grid_summary.py bench/results/fused-h100-fp32-attention \
        --unfused bench/results/fused-h100/grid-10-off-mps.csv > bench/results/fused-h100-fp32-attention/summary.txt
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

KEYS = ["task", "train_size", "frozen_layers", "seed"]
MARGIN = 0.01
COMMITTED = Path(__file__).resolve().parents[1] / "examples" / "blog2020-minilm" / "results.csv"


def _wall(log: Path) -> float:
    return float(re.search(r"grid wall: ([\d.]+) s", log.read_text()).group(1))


def _dmon(path: Path) -> tuple[float, float]:
    """Mean SM busy % (nvidia-smi's "sm": time with a kernel running, not FLOP use) and the most memory used."""
    rows = [line.split() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    rows = [r for r in rows if r[0].isdigit() and r[1].isdigit()]
    busy = [int(r[1]) for r in rows]
    memory = [int(r[7]) for r in rows if r[7].isdigit()]
    return float(np.mean(busy)), max(memory) / 1024


def _table(path: Path) -> pd.DataFrame:
    return pd.read_csv(path).set_index(KEYS).sort_index()


def _interval(values: pd.Series) -> tuple[float, float, float]:
    """Mean and 90% t interval of ``values`` taken as independent units."""
    n, mean = len(values), values.mean()
    half = stats.t.ppf(0.95, n - 1) * values.std(ddof=1) / np.sqrt(n)
    return mean, mean - half, mean + half


def _paired(a: pd.Series, b: pd.Series) -> str:
    d = (a - b).dropna()
    mean, low, high = _interval(d)
    _, seed_low, seed_high = _interval(d.groupby(level="seed").mean())
    verdict = "equivalent within 1 point" if low > -MARGIN and high < MARGIN else "not shown equivalent"
    return (
        f"n={len(d):3d}  mean {100 * mean:+.2f} pts  90% CI [{100 * low:+.2f}, {100 * high:+.2f}]"
        f"  by seed [{100 * seed_low:+.2f}, {100 * seed_high:+.2f}]  SD {100 * d.std(ddof=1):.2f}"
        f"  identical {np.mean(d == 0):.2f}  ({verdict}; CI excludes 0: {low > 0 or high < 0})"
    )


def _grids(folder: Path, device: str) -> None:
    """One line per grid log: wall time, the runs it finished (a run cut at its time limit finishes fewer), runs
    an hour, SM busy and the most GPU memory."""
    print(f"whole-grid runs (bench/gpu_fused_grid.sh, bf16 autocast), {device}")
    print(f"{'configuration':42s} {'wall s':>7s} {'runs':>9s} {'runs/h':>7s} {'SM busy %':>9s} {'GPU GiB':>8s}")
    for log in sorted(folder.glob("grid-*.log")):
        name = log.stem.removeprefix("grid-")
        done, total = map(int, re.search(r"(\d+)/(\d+) cells complete", log.read_text()).groups())
        busy, memory = _dmon(folder / f"dmon-{name}.txt")
        wall = _wall(log)
        runs = f"{done}/{total}"
        print(f"{name:42s} {wall:7.1f} {runs:>9s} {3600 * done / wall:7.0f} {busy:9.1f} {memory:8.1f}")


def _seed_means(fused: pd.DataFrame, unfused: pd.DataFrame, task: str, column: str) -> pd.Series:
    return (fused.loc[task, column] - unfused.loc[task, column]).dropna().groupby(level="seed").mean()


def _pooled(pairs: list[tuple[pd.DataFrame, pd.DataFrame]], labels: list[str]) -> None:
    """Each seed's mean difference (the unit that carries a dropout stream pair) from every grid pair, pooled:
    one t interval over all seeds, and a Welch test of whether the grids' seed means differ."""
    print("\npooled over grids, each seed's mean fused - unfused difference the unit (points):")
    for task in sorted(set.intersection(*(set(f.index.get_level_values("task")) for f, _ in pairs))):
        for column in ("best_dev", "heldout"):
            groups = [100 * _seed_means(f, u, task, column) for f, u in pairs]
            seeds = pd.concat(groups)
            mean, low, high = _interval(seeds)
            each = zip(labels, groups, strict=True)
            parts = ", ".join(f"{name}: {g.mean():+.2f} ({len(g)} seeds)" for name, g in each)
            welch = stats.ttest_ind(groups[0], groups[1], equal_var=False).pvalue if len(groups) == 2 else float("nan")
            print(
                f"  {column:8s} {task}: {len(seeds)} seeds, mean {mean:+.2f}  90% CI [{low:+.2f}, {high:+.2f}]"
                f"  t test p {stats.ttest_1samp(seeds, 0).pvalue:.3f}; {parts}; grids differ: Welch p {welch:.3f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--unfused", type=Path, help="the unfused grid (default: FOLDER's grid-*off-mps.csv)")
    parser.add_argument("--device", default="one lent H100", help="the machine, for the header")
    parser.add_argument("--pool", nargs=2, metavar=("FUSED", "UNFUSED"), help="another grid pair to pool by seed")
    args = parser.parse_args()
    folder = args.folder
    _grids(folder, args.device)
    unfused_path = args.unfused or next(iter(sorted(folder.glob("grid-*off-mps.csv"))))
    unfused = _table(unfused_path)
    tasks = sorted(set(unfused.index.get_level_values("task")))
    for path in sorted(folder.glob("grid-*auto-mps*.csv")):
        fused = _table(path)
        print(f"\nfused ({path.stem}) - unfused ({unfused_path.stem}), paired by cell and seed:")
        for column in ("best_dev", "heldout"):
            for task in tasks:
                print(f"  {column:8s} {task}: {_paired(fused.loc[task, column], unfused.loc[task, column])}")
        print(f"  collapsed runs: fused {fused['failed'].mean():.3f}, unfused {unfused['failed'].mean():.3f}")
    per_size = (100 * (fused["best_dev"] - unfused["best_dev"])).groupby(level=["task", "train_size"])
    print(f"\n  best_dev difference per size (points), {path.stem} - {unfused_path.stem}:")
    print(per_size.agg(["mean", "std", "count"]).round(2).to_string().replace("\n", "\n    "))
    committed = _table(COMMITTED) if COMMITTED.exists() else None
    if committed is not None and fused.index.isin(committed.index).any():
        print("\nthe same against the committed unfused H100 run of 2026-11-22 (full fp32 weights, no MPS):")
        for name, table in ((unfused_path.stem, unfused), (path.stem, fused)):
            for task in tasks:
                print(f"  {name:30s} {task}: {_paired(table.loc[task, 'best_dev'], committed.loc[task, 'best_dev'])}")
    if args.pool:
        _pooled([(fused, unfused), (_table(Path(args.pool[0])), _table(Path(args.pool[1])))], ["here", "pooled grid"])
    again = [_table(path)["best_dev"] for path in sorted(folder.glob("grid-*auto*.csv"))]
    if len(again) > 1:
        same = [float(np.mean(again[0] == other)) for other in again[1:]]
        print(f"\nfused runs repeated in other grids: share of identical best_dev {[round(s, 2) for s in same]}")


if __name__ == "__main__":
    main()

"""Does ``frozen_dropout = "off"`` change the science? The same sst2 grid run both ways, paired by seed.

``off`` runs the frozen layers without dropout, so their outputs can be cached during training too (a
large speed-up at deep freezing); the blog's protocol keeps their dropout on. This runs one grid of the
packaged MiniLM on real SST-2 with each setting (same cells, same seeds, same subsets), and tests whether
the best_dev (and heldout) differences are within ±1 point: a paired two one-sided tests (statsmodels
``ttost_paired``), overall and per frozen level, next to the time each setting took.

    FREEZESTATS_DATA=../shared/data/glue python bench/frozen_dropout.py            # ~15 min on 2 CPU cores
    FREEZESTATS_DATA=../shared/data/glue python bench/frozen_dropout.py --sizes 50,200,1000 --seeds 1,2,3
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]


def run_grid(frozen_dropout: str, args: argparse.Namespace, folder: Path) -> tuple[pd.DataFrame, float]:
    from freezestats.results.export import results_table
    from freezestats.runner import run_study
    from freezestats.spec import load_spec
    from freezestats.study.trials import load_study, open_storage

    spec = load_spec(REPO / "study" / "blog2020-minilm.toml")
    spec = replace(
        spec,
        name=f"frozen-dropout-{frozen_dropout}",
        tasks=("sst2",),
        grid=replace(
            spec.grid,
            frozen_layers=tuple(int(k) for k in args.frozen.split(",")),
            train_sizes=tuple(int(n) for n in args.sizes.split(",")),
            seeds=tuple(int(s) for s in args.seeds.split(",")),
        ),
        training=replace(spec.training, frozen_dropout=frozen_dropout),
    )
    storage = f"sqlite:///{folder / f'{frozen_dropout}.db'}"
    started = time.perf_counter()
    run_study(spec, storage, data_dir=args.data_dir, show_progress=False)
    wall = time.perf_counter() - started
    return results_table(load_study(open_storage(storage), spec.name)), wall


def tost(diffs: np.ndarray, margin: float) -> tuple[float, float, float, float]:
    """Mean difference, its 90% interval (the TOST interval at alpha 0.05) and the TOST p value."""
    from scipy import stats
    from statsmodels.stats.weightstats import ttost_paired

    n = len(diffs)
    mean = float(diffs.mean())
    half = stats.t.ppf(0.95, n - 1) * diffs.std(ddof=1) / np.sqrt(n)
    p_value = ttost_paired(diffs, np.zeros(n), -margin, margin)[0]
    return mean, mean - half, mean + half, float(p_value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frozen", default="2,4,6")
    parser.add_argument("--sizes", default="50,200")
    parser.add_argument("--seeds", default="1,2,3,4")
    parser.add_argument("--margin", type=float, default=1.0, help="equivalence margin in points (default 1)")
    parser.add_argument("--data-dir", default=os.environ.get("FREEZESTATS_DATA"))
    parser.add_argument("--out", default=None, help="write both results tables here (CSV)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        on, wall_on = run_grid("on", args, Path(tmp))
        off, wall_off = run_grid("off", args, Path(tmp))
    keys = ["frozen_layers", "train_size", "seed"]
    both = on.merge(off, on=keys, suffixes=("_on", "_off"))
    print(f"sst2 grid: frozen {args.frozen}, sizes {args.sizes}, seeds {args.seeds}: {len(both)} paired runs")
    print(f"wall time: frozen_dropout on {wall_on:.0f} s, off {wall_off:.0f} s ({wall_on / wall_off:.2f}x)")
    print(f"paired difference off - on, in points; equivalent if the 90% interval lies within ±{args.margin:g}")
    for metric in ("best_dev", "heldout"):
        diffs = 100 * (both[f"{metric}_off"] - both[f"{metric}_on"]).to_numpy(float)
        groups = [("all", diffs)] + [
            (f"frozen {k}", diffs[both["frozen_layers"].to_numpy() == k])
            for k in sorted(both["frozen_layers"].unique())
        ]
        for label, values in groups:
            mean, low, high, p_value = tost(values, args.margin)
            verdict = "equivalent" if p_value < 0.05 else "not shown equivalent"
            print(
                f"  {metric:8s} {label:9s} mean {mean:+.2f}  90% CI {low:+.2f} .. {high:+.2f}  "
                f"TOST p {p_value:.3f}  -> {verdict} (n={len(values)})"
            )
    if args.out:
        both.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()

"""Worker layouts on real blog-grid cells: cells per hour for 1 worker x 2 threads vs 2 workers x 1 thread.

``bench/workers.py`` measures scaling and storage overhead with a tiny random model on PostgreSQL; this
measures the question a CPU user has: on the same cores, is one worker with all the threads or one
single-threaded worker per core faster, on the real thing? Each layout drains the same fixed sample of
``study/blog2020-minilm.toml`` cells (MiniLM-L6, real SST-2/CoLA; by default ``bench/speed.py``'s 10 cells,
seed 1) from a fresh SQLite study, with ``N`` ``freezestats worker`` processes started together, each
with ``OMP_NUM_THREADS=T`` (and ``MKL_NUM_THREADS``), which is how ``freezestats run --workers N`` sets a
worker's threads (it sets ``OMP_NUM_THREADS = cores // N`` unless already set; torch reads it at start-up).

Layouts: ``1x2`` and ``2x1``, and ``4x1`` where ``os.cpu_count() >= 4``. Each layout is timed from the
workers' start to the last one's exit (every worker pays its own start-up, data loading and frozen-prefix
cache builds, as it would), and printed as cells/hour, its ratio to the first layout, the cells' summed
trial time and the tail (the time between the first and the last worker's exit: with 10 cells of unequal
cost, part of a multi-worker layout's time is one worker finishing alone). ``--repeats 2`` runs the
layouts twice, interleaved (ABAB), to see the drift of a shared machine.

    FREEZESTATS_DATA=../shared/data/glue python bench/layouts.py --out layouts.json   # ~10 min, 2-core bf16 CPU
    FREEZESTATS_DATA=../shared/data/glue python bench/layouts.py --repeats 2 --precision fp32  # ~40 min
    python bench/layouts.py --from-json layouts.json
    FREEZESTATS_DATA=../shared/data/glue python bench/layouts.py --smoke --cells sst2:6:50,sst2:4:50  # ~2 min

``--smoke`` checks the plumbing only (1 epoch, the first 64 validation examples); its numbers mean nothing.
The precision is the spec's (bf16) unless ``--precision`` pins it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import flops
import speed

REPO = Path(__file__).resolve().parents[1]


def parse_layouts(text: str | None) -> list[tuple[int, int]]:
    if not text:
        text = "1x2,2x1" + (",4x1" if (os.cpu_count() or 1) >= 4 else "")
    layouts = []
    for item in text.split(","):
        workers, _, threads = item.strip().partition("x")
        layouts.append((int(workers), int(threads)))
    return layouts


def run_layout(workers: int, threads: int, args: argparse.Namespace, cells: list[speed.Cell], folder: Path) -> dict:
    """A fresh SQLite study of ``cells``, drained by ``workers`` worker processes of ``threads`` threads."""
    import optuna

    storage = f"sqlite:///{folder / 'layout.db'}"
    name = f"bench-layout-{workers}x{threads}"
    extra: dict = {"frozen_dropout": args.frozen_dropout, "precision": args.precision}
    if args.smoke:
        extra.update(epochs=1.0, warmup_epochs=0.0)
    enqueued = speed.enqueue_sample(speed.SPEC, name, storage, cells, args.seed, args.data_dir, **extra)
    worker_args = ["worker", "--storage", storage, "--study-name", name, "--no-progress"]
    worker_args += ["--artifacts", str(folder / "artifacts")]
    if args.data_dir:
        worker_args += ["--data-dir", args.data_dir]
    if args.smoke:  # the same worker, but with every validation split cut short in its process
        command = [sys.executable, __file__, "--_smoke-worker", *worker_args]
    else:
        command = [sys.executable, "-m", "freezestats", *worker_args]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    logs = [folder / f"worker{i}.log" for i in range(workers)]
    started = time.perf_counter()
    procs = []
    for log in logs:
        with log.open("w") as sink:
            procs.append(subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=REPO))
    exits = [0.0] * workers
    while any(e == 0.0 for e in exits):
        for i, p in enumerate(procs):
            if exits[i] == 0.0 and p.poll() is not None:
                exits[i] = time.perf_counter() - started
        time.sleep(0.2)
    wall = max(exits)
    for p, log in zip(procs, logs, strict=True):
        if p.returncode not in (0, 1):
            raise SystemExit(f"a worker exited with {p.returncode}:\n{log.read_text()[-3000:]}")
    trials = optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False)
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    return {
        "workers": workers,
        "threads": threads,
        "enqueued": enqueued,
        "complete": len(complete),
        "wall": wall,
        "exits": sorted(exits),
        "cells_per_hour": 3600 * len(complete) / wall,
        "trial_seconds": sum((t.datetime_complete - t.datetime_start).total_seconds() for t in complete),
        "trials": [
            {
                "task": t.params["task"],
                "frozen_layers": t.params["frozen_layers"],
                "train_size": t.params["train_size"],
                "wall": (t.datetime_complete - t.datetime_start).total_seconds(),
                "best_dev": t.user_attrs.get("best_dev"),
                "precision": t.user_attrs.get("precision"),
            }
            for t in complete
        ],
    }


def report(raw: dict) -> dict:
    if raw.get("machine"):
        print(flops.describe(raw["machine"]))
    if raw.get("smoke"):
        print("SMOKE RUN (1 epoch, 64 validation examples): the numbers below mean nothing")
    runs = raw["runs"]
    precisions = sorted({t["precision"] for r in runs for t in r["trials"] if t.get("precision")})
    print(f"{len(raw['cells'])} cells, seed {raw['seed']}, precision {'/'.join(precisions) or '?'}")
    print(f"  {'layout':>6s} {'run':>3s} {'cells':>5s} {'wall s':>8s} {'cells/h':>8s} {'trial s':>8s} {'tail s':>7s}")
    for run in runs:
        tail = run["exits"][-1] - run["exits"][0]
        print(
            f"  {run['workers']}x{run['threads']:<4d} {run.get('repeat', 0) + 1:3d} {run['complete']:5d}"
            f" {run['wall']:8.1f} {run['cells_per_hour']:8.1f} {run['trial_seconds']:8.1f} {tail:7.1f}"
        )
    by_layout: dict[str, list[float]] = {}
    for run in runs:
        by_layout.setdefault(f"{run['workers']}x{run['threads']}", []).append(run["cells_per_hour"])
    means = {layout: sum(v) / len(v) for layout, v in by_layout.items()}
    first = next(iter(means))
    print("cells per hour (mean over repeats), and the ratio to the first layout")
    for layout, rate in means.items():
        print(f"  {layout:>6s} workers x threads: {rate:7.1f} cells/h  ({rate / means[first]:.2f}x {first})")
    return {"cells_per_hour": means, "ratio_to_first": {k: v / means[first] for k, v in means.items()}}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--_smoke-worker":
        from freezestats.cli.main import main as freezestats_main

        speed.smoke_validation(speed.SMOKE_EVAL)
        sys.exit(freezestats_main(sys.argv[2:]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default=None, help="task:frozen:size,... (default: bench/speed.py's 10 cells)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--layouts", default=None, help="WORKERSxTHREADS,... (default 1x2,2x1, and 4x1 on >= 4 CPUs)")
    parser.add_argument("--repeats", type=int, default=1, help="run the layouts this many times, interleaved")
    parser.add_argument("--precision", default=None, choices=("fp32", "bf16"), help="default: the spec's")
    parser.add_argument("--frozen-dropout", default="on", choices=("on", "off"))
    parser.add_argument("--data-dir", default=os.environ.get("FREEZESTATS_DATA"))
    parser.add_argument("--out", default=None, help="write the raw numbers here (JSON)")
    parser.add_argument("--from-json", default=None, help="print the report of an earlier --out file; run nothing")
    parser.add_argument("--smoke", action="store_true", help="plumbing check: 1 epoch, 64 validation examples")
    args = parser.parse_args()
    if args.from_json:
        report(json.loads(Path(args.from_json).read_text()))
        return
    cells = speed.parse_cells(args.cells)
    layouts = parse_layouts(args.layouts)
    raw: dict = {"cells": cells, "seed": args.seed, "smoke": args.smoke, "machine": flops.cpu_description(), "runs": []}
    print(f"bench/layouts.py: {len(cells)} cells, layouts {', '.join(f'{w}x{t}' for w, t in layouts)}")
    print(flops.describe(raw["machine"]))
    for repeat in range(args.repeats):
        for workers, threads in layouts:
            with tempfile.TemporaryDirectory() as tmp:
                run = run_layout(workers, threads, args, cells, Path(tmp))
            run["repeat"] = repeat
            raw["runs"].append(run)
            print(
                f"  {workers}x{threads}: {run['complete']}/{run['enqueued']} cells in {run['wall']:.1f} s,"
                f" {run['cells_per_hour']:.1f} cells/h"
            )
    raw["summary"] = report(raw)
    if args.out:
        Path(args.out).write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()

"""How throughput scales with local workers on a real PostgreSQL study, and what the storage costs per trial.

Runs one 40-cell study of a tiny randomly initialised BERT (2 layers, MiniLM's vocabulary) on real SST-2
subsets three times, with 1, 2 and 4 ``freezestats worker`` processes against a private PostgreSQL server
(Debian's binaries, started here), and prints cells/minute for each, the speed-up over one worker, and the
storage overhead per trial: the trial's wall time in the database minus the fine-tuning time it reports.

    FREEZESTATS_DATA=../shared/data/glue python bench/workers.py

For the real model on real blog-grid cells (1 worker x 2 threads vs 2 workers x 1 thread, cells/hour on
SQLite), see ``bench/layouts.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna
from optuna.trial import TrialState

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from _factories import build_tiny_model, simple_spec, write_spec  # noqa: E402
from _postgres import PostgresServer, find_bin_dir  # noqa: E402


def run(workers: int, url: str, spec: Path, env: dict[str, str], folder: Path) -> dict[str, float]:
    subprocess.run(
        [sys.executable, "-m", "freezestats", "run", "--study", str(spec), "--storage", url, "--enqueue-only"],
        check=True,
        env=env,
        capture_output=True,
    )
    command = [
        sys.executable,
        "-m",
        "freezestats",
        "worker",
        "--storage",
        url,
        "--no-progress",
        "--artifacts",
        str(folder / "artifacts"),
    ]
    started = time.perf_counter()
    env = {**env, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // workers))}  # as `run --workers` does
    procs = [subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL) for _ in range(workers)]
    for p in procs:
        p.wait()
    wall = time.perf_counter() - started
    trials = optuna.load_study(study_name="bench", storage=url).get_trials(states=(TrialState.COMPLETE,))
    overhead = [(t.datetime_complete - t.datetime_start).total_seconds() - t.user_attrs["wall_seconds"] for t in trials]
    return {
        "cells": len(trials),
        "wall": wall,
        "per_min": 60 * len(trials) / wall,
        "overhead_ms": 1000 * sum(overhead) / len(overhead),
    }


def main() -> None:
    bin_dir = find_bin_dir()
    if bin_dir is None:
        sys.exit("PostgreSQL binaries not found: apt-get install postgresql")
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "FREEZESTATS_DATA": os.environ.get("FREEZESTATS_DATA", str(REPO.parent / "shared" / "data" / "glue")),
    }
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        model = build_tiny_model(folder / "model")
        raw = simple_spec(
            model=str(model),
            grid={"frozen_layers": [0, 1, 2, -1], "train_sizes": [32, 64], "seeds": [1, 2, 3, 4, 5]},
            training={"epochs": 1, "eval_every_epochs": 1, "max_length": 64},
        )
        raw["name"] = "bench"
        spec = write_spec(folder, raw)
        results = {}
        for workers in (1, 2, 4):
            server = PostgresServer(bin_dir, folder / f"pg{workers}")
            server.start()
            try:
                results[workers] = run(workers, server.url, spec, env, folder)
            finally:
                server.stop()
    base = results[1]["per_min"]
    print(f"{'workers':>7} {'cells':>5} {'wall s':>8} {'cells/min':>9} {'speed-up':>8} {'storage ms/trial':>16}")
    for workers, r in results.items():
        print(
            f"{workers:>7} {r['cells']:>5} {r['wall']:>8.1f} {r['per_min']:>9.1f} {r['per_min'] / base:>8.2f} "
            f"{r['overhead_ms']:>16.0f}"
        )
    print(f"(machine: {os.cpu_count()} CPU cores; each worker also pays its own start-up: imports, data, tokenizer)")


if __name__ == "__main__":
    main()

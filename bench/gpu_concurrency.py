"""Cells per hour on one GPU with 1, 2, 4 and 8 concurrent trials (``freezestats run --workers N``).

A small encoder at batch 16 leaves most of a large GPU idle: each step is a few dozen short kernels, so one
trial is bound by Python and kernel launches, not by the GPU's arithmetic. Running several trials at once
(one worker process each, all on the same GPU) fills the gaps. This bench measures how far that goes, on
real blog-grid cells of ``study/blog2020-minilm.toml``: for each N it runs the same cells into a fresh
SQLite study with N workers and prints cells/hour, the speed-up over one worker, the mean time per trial
(from the trials' own ``wall_seconds``) and the GPU utilisation sampled by ``nvidia-smi`` every 0.5 s while
the workers ran.

    FREEZESTATS_DATA=../shared/data/glue python bench/gpu_concurrency.py --out gpu_concurrency.json

Default cells: sst2 and cola x frozen {0, 4} x size {200, 1000} x seeds {1, 2} (16 trials per N). Needs a
CUDA GPU and ``nvidia-smi``; on a machine without one it says so and exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASE_SPEC = REPO / "study" / "blog2020-minilm.toml"


def subset_spec(folder: Path, frozen: list[int], sizes: list[int], seeds: list[int]) -> Path:
    """The blog spec with a smaller grid: same protocol, only the grid lines and the name change."""
    text = BASE_SPEC.read_text()
    replacements = {
        r"^name = .*$": 'name = "gpu-concurrency"',
        r"^frozen_layers = .*$": f"frozen_layers = {frozen}",
        r"^train_sizes = .*$": f"train_sizes = {sizes}",
        r"^seeds = .*$": f"seeds = {seeds}",
    }
    for pattern, new in replacements.items():
        # count=1: the first match is the top-level key ([model] has a `name` too, further down)
        text, count = re.subn(pattern, new, text, count=1, flags=re.MULTILINE)
        if count != 1:
            raise SystemExit(f"{BASE_SPEC} has no line matching {pattern!r}")
    path = folder / "gpu-concurrency.toml"
    path.write_text(text)
    return path


def sample_utilisation(log: Path) -> subprocess.Popen:
    """``nvidia-smi`` writing GPU utilisation (%) and memory used (MiB) every 500 ms until it is stopped."""
    query = ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits", "-lms", "500"]
    return subprocess.Popen(query, stdout=log.open("w"), stderr=subprocess.DEVNULL)


def read_utilisation(log: Path) -> dict[str, float]:
    rows = [line.split(",") for line in log.read_text().splitlines() if line.strip()]
    util = [float(r[0]) for r in rows]
    mem = [float(r[1]) for r in rows]
    return {
        "gpu_util_mean": sum(util) / len(util) if util else float("nan"),
        "gpu_mem_max_mib": max(mem) if mem else float("nan"),
        "samples": len(util),
    }


def trial_seconds(storage: str) -> list[float]:
    import optuna

    study = optuna.load_study(study_name="gpu-concurrency", storage=storage)
    return [t.user_attrs["wall_seconds"] for t in study.trials if "wall_seconds" in t.user_attrs]


def run_once(n: int, spec: Path, data_dir: str, folder: Path) -> dict:
    storage = f"sqlite:///{folder / f'workers{n}.db'}"
    log = folder / f"util{n}.csv"
    sampler = sample_utilisation(log)
    started = time.perf_counter()
    command = [
        sys.executable,
        "-m",
        "freezestats",
        "run",
        "--study",
        str(spec),
        "--storage",
        storage,
        "--data-dir",
        data_dir,
        "--no-progress",
        "--workers",
        str(n),
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    sampler.terminate()
    sampler.wait()
    if done.returncode != 0:
        raise SystemExit(f"--workers {n} failed: {done.stderr.strip()[-800:]}")
    seconds = trial_seconds(storage)
    return {
        "workers": n,
        "cells": len(seconds),
        "wall_s": wall,
        "cells_per_hour": 3600 * len(seconds) / wall,
        "mean_trial_s": sum(seconds) / len(seconds),
        **read_utilisation(log),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,2,4,8", help="worker counts to measure (default 1,2,4,8)")
    parser.add_argument("--frozen", default="0,4")
    parser.add_argument("--sizes", default="200,1000")
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--data-dir", default=os.environ.get("FREEZESTATS_DATA"))
    parser.add_argument("--out", default=None, help="write the rows as JSON here")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available() or shutil.which("nvidia-smi") is None:
        print("No CUDA GPU (or no nvidia-smi) on this machine: nothing to measure.", file=sys.stderr)
        sys.exit(2)
    if not args.data_dir:
        raise SystemExit("Give --data-dir or set FREEZESTATS_DATA (the GLUE parquet folder).")

    def ints(text: str) -> list[int]:
        return [int(x) for x in text.split(",")]

    gpu = torch.cuda.get_device_name(0)
    print(f"GPU: {gpu}; precision and protocol: {BASE_SPEC.name}; cpu cores: {os.cpu_count()}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        spec = subset_spec(folder, ints(args.frozen), ints(args.sizes), ints(args.seeds))
        for n in ints(args.concurrency):
            row = run_once(n, spec, args.data_dir, folder)
            rows.append(row)
            print(json.dumps(row), flush=True)
    base = rows[0]["cells_per_hour"]
    print(f"\n{'workers':>7} {'cells/h':>8} {'speed-up':>8} {'s/trial':>8} {'GPU util %':>10} {'GPU MiB':>8}")
    for r in rows:
        print(
            f"{r['workers']:>7} {r['cells_per_hour']:>8.0f} {r['cells_per_hour'] / base:>8.2f} "
            f"{r['mean_trial_s']:>8.1f} {r['gpu_util_mean']:>10.1f} {r['gpu_mem_max_mib']:>8.0f}"
        )
    if args.out:
        Path(args.out).write_text(json.dumps({"gpu": gpu, "cpu_cores": os.cpu_count(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

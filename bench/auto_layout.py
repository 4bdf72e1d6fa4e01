"""``run --workers auto`` against fixed layouts and against the layout ``auto`` chose before it followed the work left.

Side by side in one run on one machine, each layout runs the same study from a fresh SQLite file with the real
``freezestats run`` command (its start-up, data preparation and workers included), timed from start to exit:

* a 1-cell study: the blog protocol's SST-2, n = 100, frozen 4, seed 1 (MiniLM-L6, 10 epochs, 20 evaluations);
* the 12-cell quick study (``study/quick.toml``).

Layouts: ``auto`` (this tree), ``--workers 1`` (1 worker x all threads), ``--workers 2`` (2 x 1, with the thread
hand-over of this tree), and ``auto@BASE``: ``auto`` as the package at ``--base`` ran it (default ``dd65c75``, before
this change: 2 workers x 1 thread whatever the study held), from a ``git worktree`` of that commit. ``--repeats 2``
interleaves the layouts (ABCD ABCD) to show the drift of a shared machine. The precision is pinned (``--precision``,
default bf16 where the CPU has AVX512-BF16, else fp32) so every layout runs the same arithmetic.

    FREEZESTATS_DATA=../shared/data/glue python bench/auto_layout.py --repeats 2 --out auto_layout.json  # ~25 min
    python bench/auto_layout.py --from-json auto_layout.json
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

import tomllib

sys.path.insert(0, str(Path(__file__).resolve().parent))

import flops

REPO = Path(__file__).resolve().parents[1]
LAYOUTS = {"auto": ["--workers", "auto"], "1x2": ["--workers", "1"], "2x1": ["--workers", "2"]}


def _toml_value(value: object) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return repr(value)


def write_study(source: Path, target: Path, name: str, precision: str, tasks: list[str], **tables: dict) -> Path:
    """A copy of the spec at ``source`` under another name and ``tasks``, with ``tables`` merged in and the
    precision pinned."""
    spec = tomllib.loads(source.read_text())
    spec["name"], spec["tasks"] = name, tasks
    primary = spec.get("metrics", {}).get("primary", {})
    spec.get("metrics", {})["primary"] = {task: metric for task, metric in primary.items() if task in tasks}
    for table, values in tables.items():
        spec.setdefault(table, {}).update(values)
    spec["training"]["precision"] = precision
    lines = [f"{k} = {_toml_value(v)}" for k, v in spec.items() if not isinstance(v, dict)]
    for table, values in spec.items():
        if isinstance(values, dict):
            lines += ["", f"[{table}]", *(f"{k} = {_toml_value(v)}" for k, v in values.items())]
    target.write_text("\n".join(lines) + "\n")
    return target


def studies(folder: Path, precision: str) -> dict[str, Path]:
    one_cell = {"frozen_layers": [4], "train_sizes": [100], "seeds": [1]}
    return {
        "1 cell": write_study(
            REPO / "study/blog2020-minilm.toml",
            folder / "one.toml",
            "bench-one-cell",
            precision,
            ["sst2"],
            grid=one_cell,
        ),
        "12 cells": write_study(
            REPO / "study/quick.toml", folder / "quick.toml", "bench-quick", precision, ["agreement"]
        ),
    }


def base_tree(rev: str, folder: Path) -> Path:
    """A worktree of ``rev``: its package is imported first (``PYTHONPATH``) for the ``auto@BASE`` layout."""
    tree = folder / "base"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), rev], check=True, capture_output=True
    )
    return tree


def run_layout(spec: Path, layout: str, args: argparse.Namespace, folder: Path, base: Path | None) -> dict:
    import optuna

    storage = f"sqlite:///{folder / f'{spec.stem}-{layout}.db'}"
    env = {key: value for key, value in os.environ.items() if key not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env.pop("FREEZESTATS_WORKERS", None)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    flags = LAYOUTS.get(layout, ["--workers", "auto"])
    env["PYTHONPATH"] = str(base or REPO)  # this bench's tree, not whatever the venv installed
    command = [sys.executable, "-m", "freezestats", "run", "--study", str(spec), "--storage", storage, "--no-progress"]
    command += [*flags, "--artifacts", str(folder / "artifacts")]
    if args.data_dir:
        command += ["--data-dir", args.data_dir]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=folder)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{layout} on {spec.name} exited with {done.returncode}:\n{done.stdout}\n{done.stderr}")
    study = optuna.load_study(study_name=None, storage=storage)
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    said = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("Workers:")]
    return {
        "layout": layout,
        "wall": wall,
        "complete": len(complete),
        "precision": sorted({t.user_attrs.get("precision") for t in complete}),
        "threads_at_end": [t.user_attrs.get("torch_threads") for t in complete],
        "said": said,
    }


def report(raw: dict) -> None:
    print(flops.describe(raw["machine"]))
    print(f"precision {raw['precision']}; base {raw['base']}; {raw['repeats']} repeat(s), layouts interleaved")
    for name, runs in raw["studies"].items():
        cells = {run["complete"] for run in runs}
        if cells != {int(name.split()[0])}:
            print(
                f"NOTE: the '{name}' study ran {sorted(cells)} cells, not {name.split()[0]}: its spec was not as named"
            )
    for name, runs in raw["studies"].items():
        print(f"{name}:")
        walls: dict[str, list[float]] = {}
        for run in runs:
            walls.setdefault(run["layout"], []).append(run["wall"])
            ends = run.get("threads_at_end") or []
            print(f"  {run['layout']:>12s} {run['wall']:7.1f} s  {run['complete']:2d} cells  threads at end {ends}")
            for line in run["said"]:
                print(f"  {'':>12s} {line}")
        means = {layout: sum(w) / len(w) for layout, w in walls.items()}
        base = f"auto@{raw['base']}"
        print("  mean wall: " + ", ".join(f"{k} {v:.1f} s" for k, v in means.items()))
        print("  " + "   ".join(f"auto / {k} = {means['auto'] / v:.3f}" for k, v in means.items() if k != "auto"))
        if base in walls and len(walls[base]) == len(walls["auto"]):
            ratios = [a / b for a, b in zip(walls["auto"], walls[base], strict=True)]
            print(f"  auto / {base} run by run (interleaved pairs): " + ", ".join(f"{r:.3f}" for r in ratios))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="dd65c75", help="the commit whose auto layout is compared (default dd65c75)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--precision", default=None, choices=("fp32", "bf16"))
    parser.add_argument("--only", default=None, help="'1 cell' or '12 cells': run one study only")
    parser.add_argument("--layouts", default="auto,1x2,2x1,base", help="which layouts, of auto,1x2,2x1,base")
    parser.add_argument("--data-dir", default=os.environ.get("FREEZESTATS_DATA"))
    parser.add_argument("--out", default=None, help="write the raw numbers here (JSON)")
    parser.add_argument("--from-json", default=None, help="print the report of an earlier --out file; run nothing")
    args = parser.parse_args()
    if args.from_json:
        report(json.loads(Path(args.from_json).read_text()))
        return
    machine = flops.cpu_description()
    precision = args.precision or ("bf16" if "avx512_bf16" in Path("/proc/cpuinfo").read_text() else "fp32")
    raw: dict = {"machine": machine, "precision": precision, "base": args.base, "repeats": args.repeats, "studies": {}}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        base = base_tree(args.base, folder)
        try:
            for name, spec in studies(folder, precision).items():
                if args.only and name != args.only:
                    continue
                runs = raw["studies"].setdefault(name, [])
                for _ in range(args.repeats):
                    for layout in [f"auto@{args.base}" if x == "base" else x for x in args.layouts.split(",")]:
                        with tempfile.TemporaryDirectory(dir=folder) as each:
                            tree = base if layout.startswith("auto@") else None
                            runs.append(run_layout(spec, layout, args, Path(each), tree))
                        print(f"{name} {layout}: {runs[-1]['wall']:.1f} s", flush=True)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], capture_output=True)
    report(raw)
    if args.out:
        Path(args.out).write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()

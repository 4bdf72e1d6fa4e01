"""Side by side on this machine: the HF Trainer reference vs freezestats, on the same cells of blog2020-minilm.

One invocation runs, one after the other on the same machine:

1. the reference (``bench/reference_trainer.py``): one process per cell, as the blog's recipe does (fp32,
   Trainer's default);
2. freezestats parts, each one ``freezestats`` worker process for all the cells, timed from process start
   to exit. A part is named ``<frozen_dropout>[-<precision>]``: ``on`` is the study's defaults (frozen
   layers keep dropout, as in the blog; ``precision = "auto"``, which is bf16 autocast on a CPU with bf16
   instructions), ``off`` the opt-in experiment whose frozen layers' training outputs are cached too, and
   ``-fp32`` / ``-bf16`` pin the precision.

It prints each cell's wall time and best_dev under each, the total throughput ratios, the ratio on cells
with frozen >= 4, the paired best_dev differences against the reference (mean, 95% t interval, mean |Δ|)
and, when both precisions ran, bf16 against fp32 on the same cells; and how cost grows with train size and
with frozen layers. Raw numbers go to ``--out`` (JSON); ``--from-json`` prints the report again from them.

    FREEZESTATS_DATA=../shared/data/glue python bench/speed.py             # ~40 min on a 2-core CPU
    FREEZESTATS_DATA=../shared/data/glue python bench/speed.py --parts reference,on-fp32,off-fp32,on-bf16,off-bf16
    FREEZESTATS_DATA=../shared/data/glue python bench/speed.py --cells sst2:4:50,cola:0:50 --seed 2

The default sample (10 of the 30 cells task x frozen {-1,0,2,4,6} x size {50,200,1000}, seed 1) gives
every frozen level two sizes, every size three or four frozen levels and both tasks, and keeps the
reference part under ~45 minutes here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "study" / "blog2020-minilm.toml"
SAMPLE = (
    ("sst2", -1, 50),
    ("sst2", 0, 200),
    ("sst2", 2, 1000),
    ("sst2", 4, 50),
    ("sst2", 6, 200),
    ("cola", -1, 200),
    ("cola", 0, 1000),
    ("cola", 2, 50),
    ("cola", 4, 1000),
    ("cola", 6, 50),
)
Cell = tuple[str, int, int]


def parse_cells(text: str | None) -> list[Cell]:
    if not text:
        return list(SAMPLE)
    cells = []
    for item in text.split(","):
        task, frozen, size = item.split(":")
        cells.append((task, int(frozen), int(size)))
    return cells


# -- the parts -----------------------------------------------------------------------------------------


def run_timed(command: list[str], data_dir: str | None, what: str) -> tuple[str, float]:
    """Run one process to its end; its wall time includes start-up and imports, as a user waits for them."""
    if data_dir:
        command = [*command, "--data-dir", data_dir]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{what} failed:\n{done.stderr[-3000:]}")
    return done.stdout, wall


def run_reference(cells: list[Cell], seed: int, data_dir: str | None) -> list[dict]:
    rows = []
    for task, frozen, size in cells:
        command = [sys.executable, str(REPO / "bench" / "reference_trainer.py"), "--task", task]
        command += ["--size", str(size), "--frozen", str(frozen), "--seed", str(seed), "--spec", str(SPEC)]
        stdout, wall = run_timed(command, data_dir, f"reference cell {task}:{frozen}:{size}")
        result = json.loads(stdout.strip().splitlines()[-1])
        rows.append({**result, "wall": wall})
        print(f"  reference {task:5s} frozen {frozen:2d} n={size:5d}: {wall:7.1f} s  best_dev {result['best_dev']:.4f}")
    return rows


def run_freezestats(cells: list[Cell], seed: int, data_dir: str | None, frozen_dropout: str) -> dict:
    """One worker process for all cells, timed from its start to its exit (imports, loading, everything)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "trials.json"
        command = [sys.executable, __file__, "--_worker", frozen_dropout, "--_db", str(Path(tmp) / "bench.db")]
        command += ["--cells", ",".join(f"{t}:{k}:{n}" for t, k, n in cells), "--seed", str(seed)]
        command += ["--_trials-out", str(out)]
        _, wall = run_timed(command, data_dir, f"freezestats ({frozen_dropout})")
        trials = json.loads(out.read_text())
    for row in trials:
        print(
            f"  freezestats[{frozen_dropout:3s}] {row['task']:5s} frozen {row['frozen_layers']:2d} "
            f"n={row['train_size']:5d}: {row['wall']:7.1f} s  best_dev {row['best_dev']:.4f}"
        )
    return {"process_wall": wall, "trials": trials}


def worker_part(args: argparse.Namespace) -> None:
    """Inside the timed freezestats process: a study of exactly the sampled cells, drained by one worker."""
    from freezestats.runner import prepare_study, work_study
    from freezestats.spec import load_spec
    from freezestats.trials import create_or_load_study, enqueue_cells, load_study, open_storage

    wanted = set(parse_cells(args.cells))
    spec = load_spec(SPEC)
    frozen_dropout, _, precision = args._worker.partition("-")
    spec = replace(
        spec,
        name=f"bench-speed-{args._worker}",
        grid=replace(spec.grid, seeds=(args.seed,)),
        training=replace(spec.training, frozen_dropout=frozen_dropout, precision=precision or spec.training.precision),
    )
    storage = f"sqlite:///{args._db}"
    prepared = prepare_study(spec, args.data_dir)
    study = create_or_load_study(open_storage(storage), spec)
    cells = [c for c in prepared.cells()[1] if (c.task, c.frozen_layers, c.train_size) in wanted]
    cells.sort(key=lambda c: (c.task, c.frozen_layers, c.train_size))  # deeper caches derive from shallower
    enqueue_cells(study, cells, spec.execution.max_retries)
    work_study(storage, spec.name, data_dir=args.data_dir, show_progress=False)
    rows = []
    for trial in load_study(open_storage(storage), spec.name).get_trials(deepcopy=False):
        attrs = trial.user_attrs
        rows.append(
            {
                "task": trial.params["task"],
                "frozen_layers": trial.params["frozen_layers"],
                "train_size": trial.params["train_size"],
                "state": trial.state.name,
                "best_dev": attrs.get("best_dev"),
                "wall": (trial.datetime_complete - trial.datetime_start).total_seconds(),
                "fit_seconds": attrs.get("wall_seconds"),
                "eval_prefix_cached": attrs.get("eval_prefix_cached"),
                "train_prefix_cached": attrs.get("train_prefix_cached"),
                "precision": attrs.get("precision"),
            }
        )
    Path(args._trials_out).write_text(json.dumps(rows))


# -- the report ----------------------------------------------------------------------------------------


def _key(row: dict) -> Cell:
    return (row["task"], int(row["frozen_layers"]), int(row["train_size"]))


def paired_summary(name: str, ours: dict[Cell, dict], reference: dict[Cell, dict]) -> dict:
    from scipy import stats

    shared = sorted(set(ours) & set(reference))
    diffs = [100 * (ours[c]["best_dev"] - reference[c]["best_dev"]) for c in shared]
    n = len(diffs)
    mean = sum(diffs) / n
    if n > 1:
        sd = (sum((d - mean) ** 2 for d in diffs) / (n - 1)) ** 0.5
        half = stats.t.ppf(0.975, n - 1) * sd / n**0.5
    else:
        sd, half = float("nan"), float("nan")
    summary = {"n": n, "mean_diff_points": mean, "ci95": [mean - half, mean + half], "sd_points": sd}
    summary["mean_abs_diff_points"] = sum(abs(d) for d in diffs) / n
    print(
        f"  {name}, best_dev in points: mean {mean:+.2f} (95% CI {mean - half:+.2f} .. {mean + half:+.2f}),"
        f" sd {sd:.2f}, mean |Δ| {summary['mean_abs_diff_points']:.2f}, n={n}"
    )
    return summary


def cost_growth(label: str, rows: dict[Cell, float]) -> None:
    for axis, position in (("train size", 2), ("frozen layers", 1)):
        groups: dict[int, list[float]] = {}
        for cell, wall in rows.items():
            groups.setdefault(cell[position], []).append(wall)
        text = ", ".join(f"{k}: {sum(v) / len(v):.0f} s" for k, v in sorted(groups.items()))
        print(f"  {label:22s} mean s/cell by {axis:13s} {text}")


def report(cells: list[Cell], reference: list[dict], parts: dict[str, dict]) -> dict:
    ref = {_key(r): r for r in reference}
    ref_total = sum(r["wall"] for r in reference)
    print("\nper cell (wall s; best_dev)")
    header = f"  {'task':5s} {'frozen':>6s} {'n':>5s} | {'reference':>17s}"
    for mode in parts:
        header += f" | {'freezestats ' + mode:>21s}"
    print(header)
    by_mode = {mode: {_key(t): t for t in part["trials"]} for mode, part in parts.items()}
    for cell in cells:
        line = f"  {cell[0]:5s} {cell[1]:6d} {cell[2]:5d} |"
        line += f" {ref[cell]['wall']:7.1f} {ref[cell]['best_dev']:.4f}" if cell in ref else f" {'-':>17s}"
        for mode in parts:
            trial = by_mode[mode].get(cell)
            line += f" | {trial['wall']:7.1f} {trial['best_dev']:.4f}     " if trial else f" | {'-':>21s}"
        print(line)
    summary: dict = {"reference_total_s": ref_total, "modes": {}}
    print("\ntotals")
    print(
        f"  reference: {ref_total:.0f} s for {len(reference)} cells ({ref_total / max(len(reference), 1):.0f} s/cell)"
    )
    for mode, part in parts.items():
        wall = part["process_wall"]
        trials = by_mode[mode]
        overhead = wall - sum(t["wall"] for t in trials.values())
        entry = {"process_wall_s": wall, "overhead_s": overhead}
        line = f"  freezestats[{mode}]: {wall:.0f} s in one process (of which {overhead:.0f} s outside trials)"
        if reference:
            entry["throughput_ratio"] = ref_total / wall
            line += f"  ->  throughput {ref_total / wall:.2f}x the reference"
        print(line)
        deep = [c for c in trials if c[1] >= 4 and c in ref]
        if deep and reference:
            share = overhead / len(trials)  # process start-up and loading, spread evenly over the cells
            ours = sum(trials[c]["wall"] + share for c in deep)
            entry["ratio_frozen_ge_4"] = sum(ref[c]["wall"] for c in deep) / ours
            print(f"    on cells with frozen >= 4 ({len(deep)}): {entry['ratio_frozen_ge_4']:.2f}x")
        summary["modes"][mode] = entry
    if reference:
        print("\nsame science? (paired by cell; dropout and data-order streams differ between implementations)")
        for mode in parts:
            summary["modes"][mode]["paired"] = paired_summary(f"freezestats[{mode}] - reference", by_mode[mode], ref)
    mixed = [m for m in parts if m.endswith("-bf16") and m.replace("-bf16", "-fp32") in parts]
    if mixed:
        print("\nbf16 vs fp32 autocast (paired by cell; same seed, same data order and dropout stream)")
        for mode in mixed:
            full = mode.replace("-bf16", "-fp32")
            summary["modes"][mode]["paired_vs_fp32"] = paired_summary(
                f"freezestats[{mode}] - [{full}]", by_mode[mode], by_mode[full]
            )
    print("\nhow cost grows (mean wall per cell)")
    if reference:
        cost_growth("reference", {c: r["wall"] for c, r in ref.items()})
    for mode in parts:
        cost_growth(f"freezestats[{mode}]", {c: t["wall"] for c, t in by_mode[mode].items()})
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default=None, help="task:frozen:size,... (default: the 10-cell sample)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--parts",
        default="reference,on,off",
        help="reference, and freezestats parts named frozen_dropout[-precision]: on, off, on-fp32, off-bf16, ...",
    )
    parser.add_argument("--data-dir", default=os.environ.get("FREEZESTATS_DATA"))
    parser.add_argument("--out", default=None, help="write the raw numbers and the summary here (JSON)")
    parser.add_argument("--from-json", default=None, help="print the report of an earlier --out file; run nothing")
    parser.add_argument("--_worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--_db", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--_trials-out", dest="_trials_out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._worker:
        worker_part(args)
        return
    if args.from_json:
        raw = json.loads(Path(args.from_json).read_text())
        report([tuple(c) for c in raw["cells"]], raw["reference"], raw["freezestats"])
        return
    import platform

    import torch

    cells = parse_cells(args.cells)
    parts = args.parts.split(",")
    print(
        f"bench/speed.py on {platform.node()}: {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"{'CUDA ' + torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}; "
        f"{len(cells)} cells, seed {args.seed}"
    )
    reference = []
    if "reference" in parts:
        print("reference (HF Trainer, one process per cell)")
        reference = run_reference(cells, args.seed, args.data_dir)
    results = {}
    for mode in parts:
        if mode != "reference":
            frozen_dropout, _, precision = mode.partition("-")
            print(f"freezestats, frozen_dropout={frozen_dropout!r}, precision={precision or 'auto'} (one worker)")
            results[mode] = run_freezestats(cells, args.seed, args.data_dir, mode)
    summary = report(cells, reference, results)
    if args.out:
        raw = {"cells": cells, "reference": reference, "freezestats": results, "summary": summary}
        Path(args.out).write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()

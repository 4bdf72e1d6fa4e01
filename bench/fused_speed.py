"""Fused against unfused on this machine: K seeds of a cell trained one by one (``fine_tune`` per seed) and
together (``freezestats.training.fused.fine_tune_many``), side by side in one invocation, at one precision.

Each (cell, side) runs in a process of its own (so each side's peak resident memory is its own), and the
sides alternate in order from cell to cell (unfused first on the first cell, fused first on the next), so a
change in this shared machine's load does not fall on one side only; the load average is printed before and
after every part. Each side gets a fresh frozen-prefix cache per cell (both build it once, as one worker does).

It prints the CPU and precision, then per cell and side: the wall time of the K runs (training and evaluation,
from the first model load to the last outcome, data loading excluded) and their CPU time (less sensitive to the
other jobs on a shared machine), runs/hour, the ratio, peak RSS, achieved
FLOP/s and its share of the ``torch.matmul`` peak measured in the same invocation (``bench/flops.py``: the
useful FLOPs of the K runs, counted from the unfused runs' own padded batches; the fused side pads each step's
K batches to their longest, so it computes more than it is credited with), and whether the fused runs' results
equal the lone runs' (best_dev, every point's training loss; on CPU they should, to float tolerance).
With ``--reference`` it also runs HF Trainer (``bench/reference_trainer.py``, fp32, one process per seed, its
own recipe: evaluation batches of 8, a checkpoint per evaluation) on the same cells, for ``--reference-seeds``
seeds; with ``--epochs`` it stops Trainer after as many steps (``--max-steps``: the same warm-up and decay).

    FREEZESTATS_DATA=../shared/data/glue python bench/fused_speed.py --cells sst2:4:200,sst2:0:200 --seeds 5 \\
        --out bench/results/fused-cpu.json > bench/results/fused-cpu.txt
    python bench/fused_speed.py --cells sst2:4:50 --seeds 2 --epochs 1 --n-val 64   # plumbing only, ~1 min
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import flops  # noqa: E402


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def _cpu_seconds() -> float:
    """This process's CPU time (user + system, all threads): on a machine shared with other jobs, the wall time
    of a part depends on their load, its CPU time much less (it still grows with cache contention)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _inputs(args: argparse.Namespace, task_name: str, size: int, frozen: int) -> list[dict]:
    """``fine_tune``'s inputs for the cell's seeds, as the runner makes them (the blog spec's subset draw)."""
    import numpy as np

    from freezestats.encoder.backbone import load_tokenizer
    from freezestats.encoder.prefix_cache import PrefixCache
    from freezestats.spec.study import load_spec
    from freezestats.tasks import get_task
    from freezestats.tasks.data import load_task_data
    from freezestats.tasks.subsets import nested_subsets, validation_halves
    from freezestats.training import encode_split

    spec = load_spec(REPO / "study" / "blog2020-minilm.toml")
    task = get_task(task_name)
    data = load_task_data(task, os.environ.get("FREEZESTATS_DATA"))
    sizes = sorted({*(s for s in spec.grid.train_sizes if isinstance(s, int)), size})
    rows = nested_subsets(data.train_labels, sizes, draw_seed=0, regression=task.is_regression)[size]
    train = data.train.iloc[rows]
    val = data.validation.iloc[: args.n_val] if args.n_val else data.validation
    model_name = args.model or spec.model.name
    tokenizer = load_tokenizer(model_name)
    cols, length = task.text_columns, spec.training.max_length
    enc_train = encode_split([train[c].tolist() for c in cols], train["label"].to_numpy(), tokenizer, length)
    enc_val = encode_split([val[c].tolist() for c in cols], np.asarray(val["label"]), tokenizer, length)
    enc_train = replace(enc_train, name=f"{task_name}/train", ids=np.asarray(rows))
    enc_val = replace(enc_val, name=f"{task_name}/validation")
    select, score = validation_halves(enc_val.labels, regression=task.is_regression)
    training = replace(spec.training, precision=args.precision, device=args.device)
    if args.epochs:
        training = replace(training, epochs=args.epochs)
    shared = {
        "model_name": model_name,
        "task": task,
        "metric": task.metrics[0],
        "validation": enc_val,
        "select_idx": select,
        "score_idx": score,
        "frozen_layers": frozen,
        "learning_rate": training.learning_rate,
        "training": training,
        "tokenizer": tokenizer,
        "prefix_cache": PrefixCache(),
        "train": enc_train,
    }
    return [{**shared, "seed": seed} for seed in range(1, args.seeds + 1)]


def _counting() -> tuple[dict, dict]:
    """Count the padded tokens of every training and evaluation batch the unfused runs make."""
    from freezestats.training import _encoding

    train, evaluation = flops.empty_counts(), flops.empty_counts()
    inside_eval = [False]
    collate, eval_batches = _encoding.collate, _encoding.eval_batches

    def counted_collate(tokenizer, features, device):
        batch = collate(tokenizer, features, device)
        if not inside_eval[0]:
            flops.add_inputs(train, batch)
        return batch

    def counted_eval_batches(tokenizer, split, batch_size, device):
        inside_eval[0] = True
        try:
            batches = eval_batches(tokenizer, split, batch_size, device)
        finally:
            inside_eval[0] = False
        for batch in batches:
            flops.add_inputs(evaluation, batch.inputs)
        return batches

    _encoding.collate, _encoding.eval_batches = counted_collate, counted_eval_batches
    return train, evaluation


def worker(args: argparse.Namespace) -> None:
    """One side of one cell; prints one JSON line."""
    import torch

    from freezestats.exceptions import TrialFailed
    from freezestats.training import fine_tune
    from freezestats.training.fused import fine_tune_many

    task_name, frozen, size = args.worker_cell.split(":")
    if args.dropout is not None:
        _set_dropout(args.dropout)
    runs = _inputs(args, task_name, int(size), int(frozen))
    train_counts, eval_counts = _counting() if args.side == "unfused" else (None, None)
    started, cpu_started = time.perf_counter(), _cpu_seconds()
    if args.side == "unfused":
        outcomes = []
        for run in runs:
            try:
                outcomes.append(fine_tune(**run))
            except TrialFailed as failed:
                outcomes.append(failed)
    else:
        outcomes = fine_tune_many(runs)
    wall, cpu_seconds = time.perf_counter() - started, _cpu_seconds() - cpu_started
    rows = [
        {"failed": str(o)}
        if isinstance(o, Exception)
        else {
            "best_dev": o.summary.best_dev,
            "losses": [p["train_loss"] for p in o.curve],
            "n_evals": len(o.curve),
            "fusion": o.extra.get("fusion", "unfused"),
        }
        for o in outcomes
    ]
    print(
        json.dumps(
            {
                "wall": wall,
                "cpu_seconds": cpu_seconds,
                "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "peak_gpu": torch.cuda.max_memory_allocated() if torch.cuda.is_available() else None,
                "runs": rows,
                "train_counts": train_counts,
                "eval_counts": eval_counts,
                "threads": torch.get_num_threads(),
            }
        )
    )


def _set_dropout(p: float) -> None:
    """Every classifier loaded in this process gets dropout ``p`` (hidden, attention, classifier): with 0 the
    fused and lone runs differ only in their kernels' rounding, which separates a numeric difference between the
    two sides from one in how their dropout masks are drawn."""
    import transformers

    auto = transformers.AutoModelForSequenceClassification
    load = auto.from_pretrained.__func__

    def with_dropout(cls, *args, **kwargs):
        kwargs.update(hidden_dropout_prob=p, attention_probs_dropout_prob=p, classifier_dropout=p)
        return load(cls, *args, **kwargs)

    auto.from_pretrained = classmethod(with_dropout)


def _part(args: argparse.Namespace, cell: str, side: str) -> dict:
    command = [sys.executable, __file__, "--worker-cell", cell, "--side", side, "--seeds", str(args.seeds)]
    command += ["--precision", args.precision, "--n-val", str(args.n_val), "--epochs", str(args.epochs)]
    command += ["--device", args.device]
    if args.model:
        command += ["--model", args.model]
    if args.dropout is not None:
        command += ["--dropout", str(args.dropout)]
    before = _load()
    started = time.perf_counter()
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result.update(process_wall=time.perf_counter() - started, load_before=before, load_after=_load())
    cpu = f", CPU {result['cpu_seconds']:.1f} s" if "cpu_seconds" in result else ""
    print(f"  {cell} {side:8s}: {result['wall']:7.1f} s{cpu}  ({before} -> {result['load_after']})", flush=True)
    return result


def _reference(args: argparse.Namespace, cell: str) -> dict:
    task_name, frozen, size = cell.split(":")
    walls, best = [], []
    for seed in range(1, args.reference_seeds + 1):
        command = [sys.executable, str(REPO / "bench" / "reference_trainer.py"), "--task", task_name]
        command += ["--size", size, "--frozen", frozen, "--seed", str(seed), "--precision", "fp32"]
        if args.epochs:  # the same number of steps (and so the same schedule and evaluations) as the other sides
            command += ["--max-steps", str(max(1, round(args.epochs * math.ceil(int(size) / 16))))]
        if args.n_val:
            command += ["--max-eval", str(args.n_val)]
        command += ["--data-dir", os.environ.get("FREEZESTATS_DATA", "")] if os.environ.get("FREEZESTATS_DATA") else []
        started = time.perf_counter()
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        walls.append(time.perf_counter() - started)
        best.append(json.loads(done.stdout.strip().splitlines()[-1])["best_dev"])
        print(f"  {cell} Trainer seed {seed}: {walls[-1]:7.1f} s  ({_load()})", flush=True)
    return {"walls": walls, "best_dev": best}


def _useful_flops(unfused: dict, cell: str, model: str | None) -> tuple[float, float]:
    """The K unfused runs' matmul FLOPs, (training, evaluation): training steps through every layer (frozen
    layers keep dropout, so nothing of theirs is cached in training) and evaluations from the cached frozen
    prefix."""
    task_name, frozen, _ = cell.split(":")
    from freezestats.spec.study import load_spec
    from freezestats.tasks import get_task

    spec = load_spec(REPO / "study" / "blog2020-minilm.toml")
    dims = flops.Dims.of_model(model or spec.model.name, get_task(task_name).num_labels)
    n_evals = sum(run.get("n_evals", 0) for run in unfused["runs"])
    # eval_batches is made once per cell (the prefix cache keeps it): scale to every evaluation of every run
    evaluation = {k: v * n_evals for k, v in unfused["eval_counts"].items()}
    start = max(int(frozen), 0)
    return flops.train_flops(unfused["train_counts"], dims, int(frozen)), flops.forward_flops(evaluation, dims, start)


def _report(args: argparse.Namespace, cell: str, parts: dict, peak: float | None) -> None:
    train, evaluation = _useful_flops(parts["unfused"], cell, args.model)
    work = train + evaluation
    share = 100 * train / work
    print(f"\n{cell} ({args.seeds} seeds, {args.precision}): {work / 1e12:.1f} TFLOP, {share:.0f}% of it training")
    for side in ("unfused", "fused"):
        part = parts[side]
        rate = work / part["wall"]
        share = f", {100 * rate / (peak * 1e9):.0f}% of the matmul peak" if peak else ""
        print(
            f"  {side:8s} {part['wall']:7.1f} s  {3600 * args.seeds / part['wall']:6.1f} runs/h"
            f"  peak RSS {part['peak_rss'] / 2**30:.2f} GiB{_gpu_memory(part)}  {rate / 1e9:.1f} GFLOP/s useful{share}"
        )
    print(f"  fused / unfused speed-up: {parts['unfused']['wall'] / parts['fused']['wall']:.2f}x in wall time", end="")
    if "cpu_seconds" in parts["fused"]:
        print(f", {parts['unfused']['cpu_seconds'] / parts['fused']['cpu_seconds']:.2f}x in CPU time", end="")
    print()
    if "reference" in parts:
        per_run = sum(parts["reference"]["walls"]) / len(parts["reference"]["walls"])
        print(
            f"  Trainer (fp32, {len(parts['reference']['walls'])} seed(s)): {per_run:.1f} s a run,"
            f" {3600 / per_run:.1f} runs/h; fused is {per_run * args.seeds / parts['fused']['wall']:.2f}x Trainer,"
            f" unfused {per_run * args.seeds / parts['unfused']['wall']:.2f}x"
        )
    _agreement(parts)


def _gpu_memory(part: dict) -> str:
    peak = part.get("peak_gpu")
    return f", GPU {peak / 2**30:.2f} GiB" if peak else ""


def _agreement(parts: dict) -> None:
    deltas, loss_rel = [], []
    for lone, fused in zip(parts["unfused"]["runs"], parts["fused"]["runs"], strict=True):
        if "failed" in lone or "failed" in fused:
            print(f"  failed: alone {lone.get('failed')!r}, fused {fused.get('failed')!r}")
            continue
        deltas.append(abs(lone["best_dev"] - fused["best_dev"]))
        loss_rel += [abs(a - b) / abs(a) for a, b in zip(lone["losses"], fused["losses"], strict=True)]
    if deltas:
        print(
            f"  fused vs alone, same seeds: max |delta best_dev| {max(deltas):.2e},"
            f" max relative loss difference {max(loss_rel):.2e} over {len(loss_rel)} curve points"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default="sst2:4:200,sst2:0:200", help="task:frozen:size, comma-separated")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16"))
    parser.add_argument("--epochs", type=float, default=0, help="0: the spec's (10)")
    parser.add_argument("--n-val", type=int, default=0, help="0: the whole validation set")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (a GPU's peak is measured on 8192^3)")
    parser.add_argument("--reference", action="store_true", help="also HF Trainer (fp32), --reference-seeds seeds")
    parser.add_argument("--reference-seeds", type=int, default=1)
    parser.add_argument("--model", default=None, help="a model id or path in place of the blog spec's MiniLM")
    parser.add_argument("--dropout", type=float, default=None, help="every dropout probability (default: the model's)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--report", default=None, help="print the report of a saved --out JSON (a run cut short)")
    parser.add_argument("--worker-cell", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--side", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker_cell:
        worker(args)
        return
    if args.report:
        _report_saved(Path(args.report), args.model)
        return
    import torch

    cpu = flops.cpu_description()
    print(f"{flops.describe(cpu)}; precision {args.precision} on every side; {time.strftime('%Y-%m-%d %H:%M UTC')}")
    dropout = "the model's" if args.dropout is None else args.dropout
    print(f"epochs {args.epochs or 'spec (10)'}, validation {args.n_val or 'all'}, dropout {dropout}; {_load()}")
    gpu = args.device.startswith("cuda")
    peak_of = {"shapes": [(8192, 8192, 8192)], "device": args.device} if gpu else {}
    if gpu:
        print(f"GPU {torch.cuda.get_device_name(args.device)}; torch {torch.__version__}")
    peaks = [flops.matmul_peak(torch.get_num_threads(), (args.precision,), **peak_of)]
    results: dict[str, dict] = {}
    for i, cell in enumerate(args.cells.split(",")):
        order = ("unfused", "fused") if i % 2 == 0 else ("fused", "unfused")
        results[cell] = {}
        for side in order:
            results[cell][side] = _part(args, cell, side)
            _save(args, cpu, peaks, results)  # after every part: a run cut short keeps what it measured
        if args.reference:
            results[cell]["reference"] = _reference(args, cell)
    peaks.append(flops.matmul_peak(torch.get_num_threads(), (args.precision,), **peak_of))
    peak = flops.best_peak(peaks, args.precision)
    measured = [round(p["precisions"][args.precision]["gflops"]) for p in peaks]
    print(f"\nmatmul peak ({args.precision}): {peak:.0f} GFLOP/s (best of before and after the parts: {measured})")
    for cell, parts in results.items():
        _report(args, cell, parts, peak)
    total = {side: sum(parts[side]["wall"] for parts in results.values()) for side in ("unfused", "fused")}
    ratio = total["unfused"] / total["fused"]
    print(f"\nall cells: unfused {total['unfused']:.1f} s, fused {total['fused']:.1f} s, {ratio:.2f}x")
    print(f"finished: {_load()}")
    _save(args, cpu, peaks, results)


def _report_saved(path: Path, model: str | None) -> None:
    """The report of a saved run, from its cells that have both sides (``model``: where the model's config is
    now, if not where it was measured). Why: a device command cut at its time limit saves every part it finished
    but prints no report."""
    raw = json.loads(path.read_text())
    args = argparse.Namespace(**{**raw["args"], "model": model or raw["args"]["model"]})
    print(f"{flops.describe(raw['cpu'])}; precision {args.precision} on every side (report of {path.name})")
    peak = flops.best_peak(raw["peaks"], args.precision)
    print(f"matmul peak ({args.precision}): {peak:.0f} GFLOP/s")
    for cell, parts in raw["cells"].items():
        if {"unfused", "fused"} <= set(parts):
            _report(args, cell, parts, peak)


def _save(args: argparse.Namespace, cpu: dict, peaks: list[dict], results: dict) -> None:
    if args.out:
        raw = {"cpu": cpu, "args": vars(args), "peaks": peaks, "cells": results}
        Path(args.out).write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()

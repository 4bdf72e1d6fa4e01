"""Side by side on this machine: the HF Trainer reference vs freezestats, on the same cells of blog2020-minilm.

One invocation runs, one after the other on the same machine:

1. reference parts (``bench/reference_trainer.py``), one process per cell as the blog's recipe does:
   ``reference-fp32`` (Trainer's default; ``reference`` is an alias, as in older JSON files) and
   ``reference-bf16`` (``TrainingArguments(bf16=True)``: bf16 autocast on CPU through Accelerate, the same
   autocast as freezestats' ``precision = "bf16"``);
2. freezestats parts, each one ``freezestats`` worker process for all the cells, timed from process start
   to exit. A part is named ``<frozen_dropout>[-<precision>]``: ``on`` is the study's defaults (frozen
   layers keep dropout, as in the blog; the spec's precision), ``off`` the opt-in experiment whose frozen
   layers' training outputs are cached too, and ``-fp32`` / ``-bf16`` pin the precision;
3. ``torch.matmul`` at each precision, before and after the parts, with the parts' thread count: the
   machine's matmul peak (``bench/flops.py``).

Default parts: ``reference-bf16,reference-fp32,on-bf16,on-fp32`` on a CPU with bf16 instructions (AVX512-BF16
or AMX; ``freezestats.training.cpu_has_native_bf16``), ``reference-fp32,on-fp32`` elsewhere.

It prints the CPU (name, bf16 instructions, threads), each cell's wall time and best_dev under each part,
and then:

* like against like: every freezestats part against the reference at its own precision (fp32 vs fp32
  always, bf16 vs bf16 when both ran), per frozen depth and in total; the mixed-precision comparison with
  the fp32 reference (the README's earlier headline) is kept, labelled as such;
* distance to the limit: model FLOPs per token per frozen depth (formula in ``bench/flops.py``), and per
  part and frozen depth the FLOPs that ran (padded tokens counted batch by batch: Trainer's from a forward
  hook, freezestats' from its collation, in the runs themselves), the time in training steps and in
  evaluations (timed apart: Trainer's step callbacks and ``eval_runtime``; freezestats' ``_predict`` and
  prefix-cache builds, wrapped inside the timed worker, training = the rest of ``fine_tune``, so it holds
  the batches' collation, which Trainer's step time leaves to its data loader), achieved GFLOP/s and
  utilisation = achieved / matmul peak at the part's precision (the best of the two peak measurements), and
  the same over each cell's whole wall time;
* the Amdahl bound: shallow cells (frozen -1..2) do the reference's training work, so at equal
  precision their speed-up is what utilisation allows; the total ratio is bounded by
  ``total_ref / (sum_shallow ref / s_shallow + sum_deep freezestats)``, printed with the measured shallow
  ratio, with deep cells at ~0 s, and with shallow cells at the matmul peak, the shallow ratio a 3x total
  would need, and the training-step utilisation of both on the shallow cells;
* the paired best_dev differences (mean, 95% t interval, mean |Δ|) and how cost grows with train size and
  with frozen layers.

Raw numbers go to ``--out`` (JSON); ``--from-json`` prints the report again from them (older files, with
one ``reference`` list and no counts, print what they hold).

    FREEZESTATS_DATA=../shared/data/glue python bench/speed.py --out speed.json   # ~50 min, 2-core bf16 CPU
    FREEZESTATS_DATA=../shared/data/glue python bench/speed.py --parts reference-fp32,on-fp32   # ~30 min
    FREEZESTATS_DATA=../shared/data/glue python bench/speed.py --parts reference-bf16,on-bf16,off-bf16
    FREEZESTATS_DATA=../shared/data/glue python bench/speed.py --cells sst2:4:50,cola:0:50 --seed 2
    python bench/speed.py --from-json speed.json
    FREEZESTATS_DATA=../shared/data/glue python bench/speed.py --smoke --cells sst2:6:50,sst2:0:50  # ~3 min

The default sample (10 of the 30 cells task x frozen {-1,0,2,4,6} x size {50,200,1000}, seed 1) gives
every frozen level two sizes, every size three or four frozen levels and both tasks. On this project's
2-core CPU (2026-11-22) the fp32 reference took ~19 min, the bf16 default ~4 min and fp32 freezestats
~10 min; the bf16 reference is new (expect ~8-12 min), the peaks ~1 min. ``--smoke`` checks the
plumbing only: 1 epoch (reference: 4 steps), the first 64 validation examples, small matmuls; its numbers
mean nothing. The reference parts need Accelerate (``pip install accelerate``), as Trainer does.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/flops.py, also when imported from elsewhere

import flops

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
SHALLOW_MAX = 2  # frozen -1, 0, 1, 2: the reference's forward and backward work; deeper cells skip most of it
SMOKE_EVAL = 64  # --smoke: validation examples
SMOKE_SHAPES = ((256, 256, 256), (512, 384, 1536))
Cell = tuple[str, int, int]


def parse_cells(text: str | None) -> list[Cell]:
    if not text:
        return list(SAMPLE)
    cells = []
    for item in text.split(","):
        task, frozen, size = item.split(":")
        cells.append((task, int(frozen), int(size)))
    return cells


def default_parts() -> str:
    from freezestats.training import cpu_has_native_bf16

    if cpu_has_native_bf16():
        return "reference-bf16,reference-fp32,on-bf16,on-fp32"
    return "reference-fp32,on-fp32"


def normalise_parts(text: str) -> list[str]:
    parts = []
    for part in text.split(","):
        part = part.strip()
        part = "reference-fp32" if part == "reference" else part
        if part.startswith("reference-") and part.removeprefix("reference-") not in ("fp32", "bf16"):
            raise SystemExit(f"unknown reference part {part!r}: reference-fp32 or reference-bf16")
        if part and part not in parts:
            parts.append(part)
    return parts


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


def run_reference(cells: list[Cell], seed: int, data_dir: str | None, precision: str, smoke: bool) -> list[dict]:
    rows = []
    for task, frozen, size in cells:
        command = [sys.executable, str(REPO / "bench" / "reference_trainer.py"), "--task", task]
        command += ["--size", str(size), "--frozen", str(frozen), "--seed", str(seed), "--spec", str(SPEC)]
        command += ["--precision", precision]
        if smoke:
            command += ["--max-steps", "4", "--max-eval", str(SMOKE_EVAL)]
        stdout, wall = run_timed(command, data_dir, f"reference-{precision} cell {task}:{frozen}:{size}")
        result = json.loads(stdout.strip().splitlines()[-1])
        rows.append({**result, "wall": wall})
        print(
            f"  reference-{precision} {task:5s} frozen {frozen:2d} n={size:5d}: {wall:7.1f} s"
            f"  best_dev {result['best_dev']:.4f}"
        )
    return rows


def run_freezestats(cells: list[Cell], seed: int, data_dir: str | None, mode: str, smoke: bool) -> dict:
    """One worker process for all cells, timed from its start to its exit (imports, loading, everything)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "trials.json"
        command = [sys.executable, __file__, "--_worker", mode, "--_db", str(Path(tmp) / "bench.db")]
        command += ["--cells", ",".join(f"{t}:{k}:{n}" for t, k, n in cells), "--seed", str(seed)]
        command += ["--_trials-out", str(out)] + (["--smoke"] if smoke else [])
        _, wall = run_timed(command, data_dir, f"freezestats ({mode})")
        trials = json.loads(out.read_text())
    for row in trials:
        print(
            f"  freezestats[{mode}] {row['task']:5s} frozen {row['frozen_layers']:2d} "
            f"n={row['train_size']:5d}: {row['wall']:7.1f} s  best_dev {row['best_dev']:.4f}  ({row['precision']})"
        )
    return {"process_wall": wall, "trials": trials}


def enqueue_sample(
    spec_path: Path, name: str, storage: str, cells: list[Cell], seed: int, data_dir: str | None, **training: object
) -> int:
    """A study of exactly ``cells`` (seed ``seed``) in ``storage``, cells enqueued in the order a worker runs
    them best (per task, shallow to deep: deeper prefix caches derive from shallower ones). Returns the count."""
    from freezestats.runner import prepare_study
    from freezestats.spec import load_spec
    from freezestats.study.queue import enqueue_cells
    from freezestats.study.trials import create_or_load_study, open_storage

    wanted = set(cells)
    spec = load_spec(spec_path)
    spec = replace(
        spec,
        name=name,
        grid=replace(spec.grid, seeds=(seed,)),
        training=replace(spec.training, **{k: v for k, v in training.items() if v is not None}),
    )
    prepared = prepare_study(spec, data_dir)
    study = create_or_load_study(open_storage(storage), spec)
    chosen = [c for c in prepared.cells()[1] if (c.task, c.frozen_layers, c.train_size) in wanted]
    chosen.sort(key=lambda c: (c.task, c.frozen_layers, c.train_size))
    enqueue_cells(study, chosen, spec.execution.max_retries)
    return len(chosen)


def _patch(candidates: tuple[tuple[str, str], ...], make: Callable[[Callable], Callable]) -> None:
    """Replace the first ``module.name`` of ``candidates`` that exists with ``make(original)``.

    freezestats' helpers are looked up at call time as module attributes, which is what lets a bench watch
    them; the candidates name them in the package layout (``freezestats.training._loop`` ...) and in the
    older single-module one, so the bench runs against either."""
    import importlib

    for module_name, name in candidates:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, name):
            setattr(module, name, make(getattr(module, name)))
            return
    raise SystemExit(f"bench/speed.py: none of {candidates} exists; freezestats changed, update the bench")


def smoke_validation(n: int) -> None:
    """--smoke only: every task's validation split cut to its first ``n`` examples, in this process."""

    def make(original: Callable) -> Callable:
        def load_task_data(*args: object, **kwargs: object) -> object:
            data = original(*args, **kwargs)
            return replace(data, validation=data.validation.iloc[:n].reset_index(drop=True))

        return load_task_data

    _patch((("freezestats.runner._prepare", "load_task_data"), ("freezestats.runner", "load_task_data")), make)


def instrument(records: list[dict]) -> None:
    """Inside the timed worker: time evaluation, prefix-cache builds and set-up apart, and count the padded
    tokens of every batch, by wrapping freezestats' training helpers (this process only; nothing else changes).

    Training batches are counted in ``collate`` when neither the evaluation batches nor the training
    examples' prefix states are being made; evaluations per ``_predict`` call (from the cached depth when
    the prefix cache served it); prefix builds as the layer ranges they computed. ``train_seconds`` is the
    rest of ``fine_tune``'s wall time: the training steps with their collation, the optimizer and the loop's
    bookkeeping."""
    from freezestats.encoder.prefix_cache import PrefixCache

    state: dict = {"record": None, "mode": "train", "segment": None}

    @contextmanager
    def timing(bucket: str, mode: str | None = None) -> Iterator[None]:
        previous, started = state["mode"], time.perf_counter()
        state["mode"] = mode or previous
        try:
            yield
        finally:
            state["mode"] = previous
            if state["record"] is not None:
                state["record"][bucket] += time.perf_counter() - started

    def make_fine_tune(original: Callable) -> Callable:
        def fine_tune(*args: object, **kwargs: object) -> object:
            record = {
                "task": kwargs["task"].name,
                "frozen_layers": kwargs["frozen_layers"],
                "train_size": len(kwargs["train"]),
                "seed": kwargs["seed"],
                "setup_seconds": 0.0,
                "prefix_seconds": 0.0,
                "eval_seconds": 0.0,
                "train_counts": flops.empty_counts(),
                "eval_counts": flops.empty_counts(),
                "eval_from": 0,
                "prefix_segments": [],
            }
            state["record"] = record
            try:
                outcome = original(*args, **kwargs)
            finally:
                state["record"] = None
            record["fit_seconds"] = outcome.wall_seconds
            record["train_seconds"] = outcome.wall_seconds - sum(
                record[k] for k in ("setup_seconds", "prefix_seconds", "eval_seconds")
            )
            depth = outcome.extra.get("prefix_depth")
            record["train_from"] = depth if outcome.extra.get("train_prefix_cached") else 0
            records.append(record)
            return outcome

        return fine_tune

    def make_collate(original: Callable) -> Callable:
        def collate(*args: object, **kwargs: object) -> dict:
            batch = original(*args, **kwargs)
            if state["record"] is not None and state["mode"] == "train":
                flops.add_inputs(state["record"]["train_counts"], batch)
            elif state["record"] is not None and state["mode"] == "train_prefix" and state["segment"] is not None:
                flops.add_inputs(state["segment"]["counts"], batch)
            return batch

        return collate

    def make_load(original: Callable) -> Callable:
        def load_classifier(*args: object, **kwargs: object) -> object:
            with timing("setup_seconds"):
                return original(*args, **kwargs)

        return load_classifier

    def make_eval_batches(original: Callable) -> Callable:
        def eval_batches(*args: object, **kwargs: object) -> object:
            with timing("setup_seconds", "eval_batches"):
                return original(*args, **kwargs)

        return eval_batches

    def make_train_states(original: Callable) -> Callable:
        def train_states(*args: object, **kwargs: object) -> object:
            depth = kwargs["depth"] if "depth" in kwargs else args[6]  # (cache, model, parts, train, tok, dev, depth)
            state["segment"] = {"from": 0, "to": depth, "head": False, "counts": flops.empty_counts()}
            try:
                with timing("prefix_seconds", "train_prefix"):
                    return original(*args, **kwargs)
            finally:
                if state["record"] is not None and state["segment"]["counts"]["batches"]:
                    state["record"]["prefix_segments"].append(state["segment"])
                state["segment"] = None

        return train_states

    def make_predict(original: Callable) -> Callable:
        def predict(
            model: object, parts: object, batches: list, n_examples: int, depth: object, hidden: object
        ) -> object:
            with timing("eval_seconds"):
                result = original(model, parts, batches, n_examples, depth, hidden)
            record = state["record"]
            if record is not None:
                for batch in batches:
                    flops.add_inputs(record["eval_counts"], batch.inputs)
                record["eval_from"] = depth if hidden is not None else 0
            return result

        return predict

    original_eval_hidden = PrefixCache.eval_hidden

    def eval_hidden(
        self: PrefixCache, model: object, parts: Any, split_key: tuple, batches: list, depth: int
    ) -> object:
        key = ("eval", *split_key, depth)
        hit = key in self._entries or key in self._refused
        below = [k[-1] for k in self._entries if k[:-1] == key[:-1] and k[-1] < depth]
        with timing("prefix_seconds"):
            result = original_eval_hidden(self, model, parts, split_key, batches, depth)
        record = state["record"]
        if record is not None and not hit:
            every = flops.empty_counts()
            for batch in batches:
                flops.add_inputs(every, batch.inputs)
            first = flops.add_inputs(flops.empty_counts(), batches[0].inputs)
            n_layers = len(parts.layers)
            record["prefix_segments"] += [
                {"from": max(below, default=0), "to": depth, "head": False, "counts": every},
                {"from": depth, "to": n_layers, "head": True, "counts": first},  # the exactness check: cut path
                {"from": 0, "to": n_layers, "head": True, "counts": first},  # and the whole model
            ]
        return result

    _patch((("freezestats.training", "fine_tune"),), make_fine_tune)
    _patch((("freezestats.training._encoding", "collate"), ("freezestats.training", "_collate")), make_collate)
    _patch((("freezestats.training", "load_classifier"),), make_load)
    _patch(
        (("freezestats.training._encoding", "eval_batches"), ("freezestats.training", "_eval_batches")),
        make_eval_batches,
    )
    _patch(
        (("freezestats.training._prefix", "_train_states"), ("freezestats.training", "_cached_train_states")),
        make_train_states,
    )
    _patch((("freezestats.training._evaluator", "_predict"), ("freezestats.training", "_predict")), make_predict)
    PrefixCache.eval_hidden = eval_hidden


def worker_part(args: argparse.Namespace) -> None:
    """Inside the timed freezestats process: a study of exactly the sampled cells, drained by one worker."""
    from freezestats.runner import work_study
    from freezestats.study.trials import load_study, open_storage

    frozen_dropout, _, precision = args._worker.partition("-")
    extra: dict = {"frozen_dropout": frozen_dropout, "precision": precision or None}
    if args.smoke:
        smoke_validation(SMOKE_EVAL)
        extra.update(epochs=1.0, warmup_epochs=0.0)
    records: list[dict] = []
    instrument(records)
    storage = f"sqlite:///{args._db}"
    name = f"bench-speed-{args._worker}"
    enqueue_sample(SPEC, name, storage, parse_cells(args.cells), args.seed, args.data_dir, **extra)
    work_study(storage, name, data_dir=args.data_dir, show_progress=False)
    measured = {(r["task"], r["frozen_layers"], r["train_size"]): r for r in records}  # a retry's record wins
    rows = []
    for trial in load_study(open_storage(storage), name).get_trials(deepcopy=False):
        attrs = trial.user_attrs
        key = (trial.params["task"], trial.params["frozen_layers"], trial.params["train_size"])
        row = {
            "task": key[0],
            "frozen_layers": key[1],
            "train_size": key[2],
            "state": trial.state.name,
            "best_dev": attrs.get("best_dev"),
            "wall": (trial.datetime_complete - trial.datetime_start).total_seconds(),
            "fit_seconds": attrs.get("wall_seconds"),
            "eval_prefix_cached": attrs.get("eval_prefix_cached"),
            "train_prefix_cached": attrs.get("train_prefix_cached"),
            "precision": attrs.get("precision"),
            "n_steps": attrs.get("n_steps"),
            "n_evals": len(attrs.get("curve") or []),
        }
        record = measured.get(key, {})
        row.update({k: v for k, v in record.items() if k not in row})
        rows.append(row)
    Path(args._trials_out).write_text(json.dumps(rows))


# -- the report ----------------------------------------------------------------------------------------


def _key(row: dict) -> Cell:
    return (row["task"], int(row["frozen_layers"]), int(row["train_size"]))


def paired_summary(name: str, ours: dict[Cell, dict], reference: dict[Cell, dict]) -> dict | None:
    from scipy import stats

    shared = sorted(set(ours) & set(reference))
    diffs = [100 * (ours[c]["best_dev"] - reference[c]["best_dev"]) for c in shared]
    n = len(diffs)
    if n == 0:
        return None
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
        print(f"  {label:24s} mean s/cell by {axis:13s} {text}")


def cell_times(part: dict) -> dict[Cell, float]:
    """Each cell's share of a freezestats part: its trial's wall time plus an even share of the process's
    time outside trials (start-up, imports, loading), so that the cells add up to the process's wall time."""
    trials = {_key(t): t for t in part["trials"]}
    overhead = part["process_wall"] - sum(t["wall"] for t in trials.values())
    return {c: t["wall"] + overhead / len(trials) for c, t in trials.items()}


def part_precision(part: dict) -> str:
    found = {t.get("precision") for t in part["trials"]} - {None}
    return found.pop() if len(found) == 1 else "mixed" if found else "?"


def _dims(raw: dict, task: str) -> flops.Dims | None:
    dims = raw.get("dims")
    if not dims:
        return None
    return flops.Dims(dims["layers"], dims["hidden"], dims["intermediate"], dims.get("num_labels", {}).get(task, 2))


def run_flops(raw: dict, row: dict, kind: str) -> dict | None:
    """FLOPs and seconds of one run's training steps, evaluations and (freezestats) prefix-cache builds."""
    dims = _dims(raw, row["task"])
    frozen = int(row["frozen_layers"])
    if dims is None:
        return None
    if kind == "reference":
        counts = row.get("counts")
        if not counts or "train_step_seconds" not in row:
            return None
        return {
            "train": (flops.train_flops(counts["train"], dims, frozen), row["train_step_seconds"]),
            "eval": (flops.forward_flops(counts["eval"], dims), row["eval_seconds"]),
            "prefix": (0.0, 0.0),
            "tokens": counts["train"]["tokens"] + counts["eval"]["tokens"],
            "real_tokens": counts["train"]["real_tokens"] + counts["eval"]["real_tokens"],
            "train_tokens": counts["train"]["tokens"],
            "train_seqs": counts["train"]["seqs"],
        }
    if "train_counts" not in row:
        return None
    prefix = sum(
        flops.forward_flops(s["counts"], dims, s["from"], s["to"], head=s["head"]) for s in row["prefix_segments"]
    )
    return {
        "train": (flops.train_flops(row["train_counts"], dims, frozen, row["train_from"]), row["train_seconds"]),
        "eval": (flops.forward_flops(row["eval_counts"], dims, row["eval_from"]), row["eval_seconds"]),
        "prefix": (prefix, row["prefix_seconds"]),
        "tokens": row["train_counts"]["tokens"] + row["eval_counts"]["tokens"],
        "real_tokens": row["train_counts"]["real_tokens"] + row["eval_counts"]["real_tokens"],
        "train_tokens": row["train_counts"]["tokens"],
        "train_seqs": row["train_counts"]["seqs"],
    }


def _rate(work: float, seconds: float, peak: float | None) -> str:
    if seconds <= 0:
        return f"{'-':>7s} {'-':>5s}"
    gflops = work / seconds / 1e9
    util = f"{100 * gflops / peak:4.0f}%" if peak else "    ?"
    return f"{gflops:7.1f} {util}"


def limit_report(raw: dict, label: str, rows: list[dict], kind: str, precision: str, times: dict[Cell, float]) -> dict:
    """Achieved GFLOP/s and utilisation per frozen depth, for training steps, evaluations and whole cells."""
    peak = flops.best_peak(raw.get("peaks", []), precision)
    measured = {_key(r): run_flops(raw, r, kind) for r in rows}
    if not all(measured.values()):
        print(f"  {label}: no token counts or split timings in this JSON")
        return {}
    depths = sorted({c[1] for c in measured})
    print(
        f"  {label} ({precision}, peak {peak or float('nan'):.0f} GFLOP/s)\n"
        f"    {'frozen':>6s} | {'train TF':>8s} {'s':>7s} {'GFLOP/s':>7s} {'util':>5s} | {'eval TF':>8s} {'s':>7s}"
        f" {'GFLOP/s':>7s} {'util':>5s} | {'prefix s':>8s} | {'cell s':>7s} {'GFLOP/s':>7s} {'util':>5s}"
    )
    summary: dict = {"peak_gflops": peak, "by_frozen": {}}
    for depth in [*depths, None]:
        chosen = [c for c in measured if depth is None or c[1] == depth]
        tr_f = sum(measured[c]["train"][0] for c in chosen)
        tr_s = sum(measured[c]["train"][1] for c in chosen)
        ev_f = sum(measured[c]["eval"][0] for c in chosen)
        ev_s = sum(measured[c]["eval"][1] for c in chosen)
        pf_f = sum(measured[c]["prefix"][0] for c in chosen)
        pf_s = sum(measured[c]["prefix"][1] for c in chosen)
        wall = sum(times[c] for c in chosen)
        name = "all" if depth is None else str(depth)
        print(
            f"    {name:>6s} | {tr_f / 1e12:8.2f} {tr_s:7.1f} {_rate(tr_f, tr_s, peak)}"
            f" | {ev_f / 1e12:8.2f} {ev_s:7.1f} {_rate(ev_f, ev_s, peak)}"
            f" | {pf_s:8.1f} | {wall:7.1f} {_rate(tr_f + ev_f + pf_f, wall, peak)}"
        )
        summary["by_frozen"][name] = {
            "train_flops": tr_f,
            "train_seconds": tr_s,
            "eval_flops": ev_f,
            "eval_seconds": ev_s,
            "prefix_flops": pf_f,
            "prefix_seconds": pf_s,
            "cell_seconds": wall,
            "train_utilisation": tr_f / tr_s / 1e9 / peak if peak and tr_s > 0 else None,
            "eval_utilisation": ev_f / ev_s / 1e9 / peak if peak and ev_s > 0 else None,
            "cell_utilisation": (tr_f + ev_f + pf_f) / wall / 1e9 / peak if peak and wall > 0 else None,
        }
    tokens = sum(m["tokens"] for m in measured.values())
    real = sum(m["real_tokens"] for m in measured.values())
    summary["padding_share"] = 1 - real / tokens if tokens else None
    summary["mean_train_length"] = sum(m["train_tokens"] for m in measured.values()) / max(
        sum(m["train_seqs"] for m in measured.values()), 1
    )
    print(f"    padded tokens: {tokens:,} ({100 * summary['padding_share']:.0f}% padding), all computed")
    return summary


def amdahl(
    label: str, ref_times: dict[Cell, float], our_times: dict[Cell, float], shallow_floor: float | None
) -> dict | None:
    """The total ratio that shallow cells allow: they do the reference's training work at a speed-up bounded
    by utilisation, so however cheap the deep cells become, shallow cells keep their time."""
    cells = sorted(set(ref_times) & set(our_times))
    shallow = [c for c in cells if c[1] <= SHALLOW_MAX]
    deep = [c for c in cells if c[1] > SHALLOW_MAX]
    if not shallow:
        return None
    total_ref = sum(ref_times[c] for c in cells)
    ref_shallow = sum(ref_times[c] for c in shallow)
    ours_shallow = sum(our_times[c] for c in shallow)
    ours_deep = sum(our_times[c] for c in deep)
    s_shallow = ref_shallow / ours_shallow
    out = {
        "s_shallow": s_shallow,
        "bound_measured": total_ref / (ref_shallow / s_shallow + ours_deep),
        "bound_deep_free": total_ref / (ref_shallow / s_shallow),
    }
    print(f"  {label}: shallow cells (frozen <= {SHALLOW_MAX}, {len(shallow)}) {s_shallow:.2f}x, deep ({len(deep)})")
    print(
        f"    total bound, shallow at {s_shallow:.2f}x and deep as measured: {out['bound_measured']:.2f}x"
        f" (= the measured total); deep cells at ~0 s: {out['bound_deep_free']:.2f}x"
    )
    target = 3.0
    needed_free = target * ref_shallow / total_ref
    rest = total_ref / target - ours_deep
    needed_measured = ref_shallow / rest if rest > 0 else float("inf")
    out.update(needed_shallow_deep_free=needed_free, needed_shallow_deep_measured=needed_measured)
    if shallow_floor:
        s_peak = ref_shallow / shallow_floor
        out.update(s_shallow_at_peak=s_peak, bound_peak=total_ref / (shallow_floor + ours_deep))
        out["bound_peak_deep_free"] = total_ref / shallow_floor
        print(
            f"    shallow cells at the matmul peak ({shallow_floor:.0f} s of FLOPs, {s_peak:.1f}x): total"
            f" {out['bound_peak']:.2f}x with deep as measured, {out['bound_peak_deep_free']:.2f}x with deep at ~0 s"
        )
    verdict = "reachable" if out["bound_deep_free"] >= target else "out of reach"
    print(
        f"    {target:.0f}x total at the measured shallow ratio: {verdict} (at most {out['bound_deep_free']:.2f}x,"
        f" with deep cells at ~0 s); {target:.0f}x needs shallow cells at {needed_free:.2f}x if deep cells"
        f" cost ~0 s, at {needed_measured:.2f}x with deep cells as measured"
    )
    out["target_3x_reachable_at_measured_shallow"] = out["bound_deep_free"] >= target
    return out


def report(raw: dict) -> dict:
    cells: list[Cell] = [tuple(c) for c in raw["cells"]]
    references: dict[str, list[dict]] = raw.get("references") or (
        {"fp32": raw["reference"]} if raw.get("reference") else {}
    )
    parts: dict[str, dict] = raw.get("freezestats", {})
    if raw.get("machine"):
        print(flops.describe(raw["machine"]))
    if raw.get("smoke"):
        print("SMOKE RUN (1 epoch, 64 validation examples, small matmuls): the numbers below mean nothing")
    for peak in raw.get("peaks", []):
        rates = ", ".join(
            f"{p} {v['gflops']:.0f} GFLOP/s ({v['best_shape']})" for p, v in peak.get("precisions", {}).items()
        )
        print(f"matmul peak ({peak.get('when', '?')}, {peak['threads']} threads): {rates}")
    refs = {p: {_key(r): r for r in rows} for p, rows in references.items()}
    by_mode = {mode: {_key(t): t for t in part["trials"]} for mode, part in parts.items()}
    ours_times = {mode: cell_times(part) for mode, part in parts.items()}
    precisions = {mode: part_precision(part) for mode, part in parts.items()}

    print("\nper cell (wall s; best_dev)")
    header = f"  {'task':5s} {'frozen':>6s} {'n':>5s}"
    for precision in refs:
        header += f" | {'reference-' + precision:>17s}"
    for mode in parts:
        header += f" | {'freezestats ' + mode:>21s}"
    print(header)
    for cell in cells:
        line = f"  {cell[0]:5s} {cell[1]:6d} {cell[2]:5d}"
        for ref in refs.values():
            line += f" | {ref[cell]['wall']:7.1f} {ref[cell]['best_dev']:.4f}" if cell in ref else f" | {'-':>17s}"
        for mode in parts:
            trial = by_mode[mode].get(cell)
            line += f" | {trial['wall']:7.1f} {trial['best_dev']:.4f}     " if trial else f" | {'-':>21s}"
        print(line)

    summary: dict = {"references": {}, "modes": {}}
    print("\ntotals")
    for precision, rows in references.items():
        total = sum(r["wall"] for r in rows)
        summary["references"][precision] = {"total_s": total}
        print(f"  reference-{precision}: {total:.0f} s for {len(rows)} cells ({total / max(len(rows), 1):.0f} s/cell)")
    if "fp32" in summary["references"]:
        summary["reference_total_s"] = summary["references"]["fp32"]["total_s"]  # as older files had it
    if "fp32" in refs and "bf16" in refs:
        ratio = summary["references"]["fp32"]["total_s"] / summary["references"]["bf16"]["total_s"]
        summary["reference_bf16_speedup"] = ratio
        print(f"  Trainer's own bf16 autocast: {ratio:.2f}x its fp32")
    for mode, part in parts.items():
        wall = part["process_wall"]
        trials = by_mode[mode]
        overhead = wall - sum(t["wall"] for t in trials.values())
        entry: dict = {"process_wall_s": wall, "overhead_s": overhead, "precision": precisions[mode]}
        print(
            f"  freezestats[{mode}] ({precisions[mode]}): {wall:.0f} s in one process"
            f" (of which {overhead:.0f} s outside trials)"
        )
        for precision, ref in refs.items():
            shared = [c for c in trials if c in ref]
            if not shared:
                continue
            ratio = sum(ref[c]["wall"] for c in shared) / sum(ours_times[mode][c] for c in shared)
            same = precision == precisions[mode]
            entry[f"ratio_vs_{precision}"] = ratio
            if precision == "fp32":
                entry["throughput_ratio"] = ratio  # the older files' headline
            print(
                f"    vs reference-{precision}: {ratio:.2f}x"
                + ("  (same precision)" if same else "  (mixed precisions: not like against like)")
            )
        summary["modes"][mode] = entry

    print("\nlike against like: freezestats / reference at the same precision, per frozen depth (wall s)")
    for mode in parts:
        precision = precisions[mode]
        ref = refs.get(precision)
        if ref is None:
            print(f"  freezestats[{mode}] ({precision}): no reference-{precision} in this run")
            continue
        shared = [c for c in by_mode[mode] if c in ref]
        print(f"  freezestats[{mode}] vs reference-{precision}")
        print(f"    {'frozen':>6s} {'cells':>5s} {'reference s':>11s} {'freezestats s':>13s} {'ratio':>6s}")
        by_depth = {}
        for depth in [*sorted({c[1] for c in shared}), None]:
            chosen = [c for c in shared if depth is None or c[1] == depth]
            r = sum(ref[c]["wall"] for c in chosen)
            o = sum(ours_times[mode][c] for c in chosen)
            name = "all" if depth is None else str(depth)
            by_depth[name] = {"reference_s": r, "freezestats_s": o, "ratio": r / o}
            print(f"    {name:>6s} {len(chosen):5d} {r:11.1f} {o:13.1f} {r / o:5.2f}x")
        summary["modes"][mode]["same_precision"] = {"reference": precision, "by_frozen": by_depth}

    if raw.get("dims"):
        dims = _dims(raw, cells[0][0]) if cells else None
        lengths = [m for rows in references.values() for r in rows if (m := run_flops(raw, r, "reference"))] + [
            m for part in parts.values() for t in part["trials"] if (m := run_flops(raw, t, "freezestats"))
        ]
        length = sum(m["train_tokens"] for m in lengths) / max(sum(m["train_seqs"] for m in lengths), 1)
        if dims and lengths:
            print(
                f"\ndistance to the limit: model MFLOP per padded token (L={dims.layers}, d={dims.hidden},"
                f" f={dims.intermediate}; at the runs' mean padded training length s={length:.0f}; bench/flops.py)"
            )
            print(
                f"    {'frozen':>6s} {'forward':>8s} {'backward':>8s} {'train':>8s} {'eval':>8s} {'eval cached':>11s}"
            )
            frozen_levels = sorted({c[1] for c in cells})
            for row in flops.per_token_table(dims, frozen_levels, length):
                print(
                    f"    {row['frozen']:6d} {row['forward']:8.1f} {row['backward']:8.1f} {row['train_step']:8.1f}"
                    f" {row['eval_full']:8.1f} {row['eval_cached']:11.1f}"
                )
            print(
                "  achieved: TF = 1e12 FLOPs that ran; train = inside training steps, eval = evaluations,"
                " prefix = frozen-prefix cache builds; cell = all of it over the cell's wall time"
            )
            summary["limit"] = {}
            for precision, rows in references.items():
                summary["limit"][f"reference-{precision}"] = limit_report(
                    raw,
                    f"reference-{precision}",
                    rows,
                    "reference",
                    precision,
                    {_key(r): r["wall"] for r in rows},
                )
            for mode, part in parts.items():
                summary["limit"][mode] = limit_report(
                    raw, f"freezestats[{mode}]", part["trials"], "freezestats", precisions[mode], ours_times[mode]
                )

    print("\nAmdahl: the total ratio that the shallow cells allow (same precision)")
    for mode in parts:
        precision = precisions[mode]
        ref = refs.get(precision)
        if ref is None:
            continue
        floor = None
        peak = flops.best_peak(raw.get("peaks", []), precision)
        shared = [c for c in by_mode[mode] if c in ref and c[1] <= SHALLOW_MAX]
        measured = [run_flops(raw, by_mode[mode][c], "freezestats") for c in shared]
        ref_measured = [run_flops(raw, ref[c], "reference") for c in shared]
        if peak and measured and all(measured):
            floor = sum(m["train"][0] + m["eval"][0] + m["prefix"][0] for m in measured) / (peak * 1e9)
        found = amdahl(
            f"freezestats[{mode}] vs reference-{precision}",
            {c: r["wall"] for c, r in ref.items()},
            ours_times[mode],
            floor,
        )
        if found and peak and measured and all(measured) and all(ref_measured):
            # the same training work on both sides: the training-time ratio is the utilisation ratio
            ours_util = sum(m["train"][0] for m in measured) / sum(m["train"][1] for m in measured) / 1e9 / peak
            ref_util = sum(m["train"][0] for m in ref_measured) / sum(m["train"][1] for m in ref_measured) / 1e9 / peak
            found.update(shallow_train_utilisation=ours_util, reference_shallow_train_utilisation=ref_util)
            print(
                f"    training steps on shallow cells: {100 * ours_util:.0f}% of the matmul peak, the reference"
                f" {100 * ref_util:.0f}% ({ours_util / ref_util:.2f}x: the same FLOPs, so the training-step speed-up)"
            )
        if found:
            summary["modes"][mode]["amdahl"] = found

    if references:
        print("\nsame science? (paired by cell; dropout and data-order streams differ between implementations)")
        for mode in parts:
            for precision, ref in refs.items():
                if precision not in (precisions[mode], "fp32"):
                    continue  # like against like, and the fp32 reference of the older files
                found = paired_summary(f"freezestats[{mode}] - reference-{precision}", by_mode[mode], ref)
                summary["modes"][mode][f"paired_vs_{precision}"] = found
                if precision == "fp32":
                    summary["modes"][mode]["paired"] = found  # the older files' key
        if "fp32" in refs and "bf16" in refs:
            summary["reference_bf16_vs_fp32"] = paired_summary(
                "reference-bf16 - reference-fp32", refs["bf16"], refs["fp32"]
            )
    mixed = [m for m in parts if m.endswith("-bf16") and m.replace("-bf16", "-fp32") in parts]
    if mixed:
        print("\nbf16 vs fp32 autocast (paired by cell; same seed, same data order and dropout stream)")
        for mode in mixed:
            full = mode.replace("-bf16", "-fp32")
            summary["modes"][mode]["paired_vs_fp32_part"] = paired_summary(
                f"freezestats[{mode}] - [{full}]", by_mode[mode], by_mode[full]
            )
    print("\nhow cost grows (mean wall per cell)")
    for precision, ref in refs.items():
        cost_growth(f"reference-{precision}", {c: r["wall"] for c, r in ref.items()})
    for mode in parts:
        cost_growth(f"freezestats[{mode}]", {c: t["wall"] for c, t in by_mode[mode].items()})
    return summary


def measure_peak(when: str, threads: int, precisions: list[str], smoke: bool) -> dict:
    shapes = SMOKE_SHAPES if smoke else flops.PEAK_SHAPES
    peak = flops.matmul_peak(threads, precisions, shapes, min_seconds=0.05 if smoke else 1.0)
    peak["when"] = when
    rates = ", ".join(f"{p} {v['gflops']:.0f} GFLOP/s" for p, v in peak["precisions"].items())
    print(f"matmul peak {when} ({threads} threads): {rates}")
    return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default=None, help="task:frozen:size,... (default: the 10-cell sample)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--parts",
        default=None,
        help="reference-fp32 (alias reference), reference-bf16, and freezestats parts named"
        " frozen_dropout[-precision]: on, off, on-fp32, off-bf16, ... (default: the bf16 and fp32 pairs on a"
        " CPU with bf16 instructions, the fp32 pair elsewhere)",
    )
    parser.add_argument("--data-dir", default=os.environ.get("FREEZESTATS_DATA"))
    parser.add_argument("--out", default=None, help="write the raw numbers and the summary here (JSON)")
    parser.add_argument("--from-json", default=None, help="print the report of an earlier --out file; run nothing")
    parser.add_argument("--no-peak", action="store_true", help="skip the matmul peak measurements")
    parser.add_argument("--smoke", action="store_true", help="plumbing check: 1 epoch, 64 dev examples, tiny peaks")
    parser.add_argument("--_worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--_db", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--_trials-out", dest="_trials_out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._worker:
        worker_part(args)
        return
    if args.from_json:
        report(json.loads(Path(args.from_json).read_text()))
        return
    import torch

    from freezestats.spec import load_spec
    from freezestats.tasks import get_task

    cells = parse_cells(args.cells)
    parts = normalise_parts(args.parts or default_parts())
    machine = flops.cpu_description()
    spec = load_spec(SPEC)
    dims = flops.Dims.of_model(spec.model.name)
    raw: dict = {
        "cells": cells,
        "seed": args.seed,
        "parts": parts,
        "smoke": args.smoke,
        "machine": machine,
        "dims": {
            **{k: v for k, v in dims.as_dict().items() if k != "num_labels"},
            "num_labels": {t: get_task(t).num_labels for t in {c[0] for c in cells}},
        },
        "peaks": [],
        "references": {},
        "freezestats": {},
    }
    print(f"bench/speed.py: {len(cells)} cells, seed {args.seed}, parts {','.join(parts)}")
    print(flops.describe(machine))
    threads = torch.get_num_threads()  # what the parts' processes get too: same environment
    bf16_runs = machine["native_bf16"] or spec.training.precision == "bf16" or any(p.endswith("-bf16") for p in parts)
    peak_precisions = ["fp32", "bf16"] if bf16_runs else ["fp32"]
    if not args.no_peak:
        raw["peaks"].append(measure_peak("before the parts", threads, peak_precisions, args.smoke))
    for part in parts:
        if part.startswith("reference-"):
            precision = part.removeprefix("reference-")
            print(f"{part} (HF Trainer, one process per cell)")
            raw["references"][precision] = run_reference(cells, args.seed, args.data_dir, precision, args.smoke)
        else:
            frozen_dropout, _, precision = part.partition("-")
            print(f"freezestats, frozen_dropout={frozen_dropout!r}, precision={precision or 'the spec'} (one worker)")
            raw["freezestats"][part] = run_freezestats(cells, args.seed, args.data_dir, part, args.smoke)
    if not args.no_peak:
        raw["peaks"].append(measure_peak("after the parts", threads, peak_precisions, args.smoke))
    if "fp32" in raw["references"]:
        raw["reference"] = raw["references"]["fp32"]  # older readers
    raw["summary"] = report(raw)
    if args.out:
        Path(args.out).write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()

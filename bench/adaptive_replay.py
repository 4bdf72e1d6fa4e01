"""The committed blog example replayed as if it had run adaptively: which cells would have stopped when, and the
runs saved.

    python bench/adaptive_replay.py            # writes bench/results/adaptive_replay.txt
    python bench/adaptive_replay.py --example examples/sst2-20seeds-minilm --tasks sst2 --min-seeds 4 \
        --max-seeds 20 --seeds-per-round 2 --futility 0.1 --seek noninferiority --futility-seeds 2 \
        --output bench/results/adaptive_replay_20seeds.txt

``examples/blog2020-minilm`` ran 5 seeds in every cell (7 depths x 5 sizes x 2 tasks, 350 runs, trial number =
the order they ran: cell after cell, seeds 1-5 in a row). The replay (``freezestats.stats.sequential.replay``,
``order="trial"``) gives every cell its first 2 runs, decides, and gives the next run only to the cells whose
comparison is still open (and to their size's reference), up to the 5 stored: plan min_seeds 2, max_seeds 5, one
seed a round, O'Brien-Fleming-type spending, familywise alpha 0.05 over the task, as ``freezestats analyze``
judges each task: SST-2 on held-out accuracy with a margin of 1 point, CoLA on MCC re-scored from the stored
predictions at the last checkpoint (``--task-metric cola=mcc``) with a margin of 2 points, failed runs flagged by
the analysis's rule, task-level contrasts (seeds x items). The fixed design is ``task_noninferiority`` on all 5
seeds, the example's answer. ``--example`` replays another example folder with ``results.csv`` and
``predictions.parquet`` (``examples/sst2-20seeds-minilm``: 20 seeds a cell, run in rounds of 5 seeds), with the
plan's seeds set by ``--min-seeds``, ``--max-seeds`` and ``--seeds-per-round``; the fixed design is then all
``--max-seeds`` seeds.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import pandas as pd

from freezestats.analysis.task import metric_failures
from freezestats.analysis.task_metrics import apply_task_metrics
from freezestats.results.item_predictions import read_item_predictions
from freezestats.stats.design.input_table import normalize_results
from freezestats.stats.inference.noninferiority import default_margin
from freezestats.stats.sequential import SequentialPlan, fixed_design, replay, replay_summary

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/adaptive_plan_flags.py, also when a test loads this

from adaptive_plan_flags import add_plan_flags, plan_options  # the plan's flags, shared with the other adaptive bench

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "blog2020-minilm"
TASK_METRICS = {"cola": "mcc"}


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def replay_task(
    data: pd.DataFrame, items: pd.DataFrame, task: str, settings: dict, plan_options: dict | None = None
) -> tuple[str, dict]:
    """One task's replay with the plan's ``plan_options`` (:class:`SequentialPlan`'s keywords; default min 2,
    max 5, one seed a round; the margin, where not given, the task metric's default): the per-cell table as
    text, and its numbers."""
    response = settings["response_of"].get(task, "heldout")
    metric = settings["metric_of"].get(task) or "accuracy"
    runs = data[data["task"] == task].reset_index(drop=True)
    runs = runs.assign(failed=metric_failures(runs, response)[0].to_numpy())
    own = items[items["task"] == task].reset_index(drop=True)
    options = {"margin": default_margin(metric), "alpha": 0.05, "min_seeds": 2, "max_seeds": 5,
               "seeds_per_round": 1, **{k: v for k, v in (plan_options or {}).items() if v is not None}}  # fmt: skip
    plan = SequentialPlan(**options)
    high = plan.max_seeds
    played = replay(runs, own, plan, order="trial", response=response, metric=metric)
    summary = replay_summary(played, plan)
    fixed = fixed_design(runs, own, plan, response=response, metric=metric).set_index(["train_size", "frozen_layers"])
    last = played.sort_values("round").groupby(["train_size", "frozen_layers"]).last()
    lines = [
        f"\n{task}: {metric} on {response}, margin {plan.margin}, looks at {plan.looks()} seeds"
        f"{'' if plan.futility_seeds is None else ' (the first futility only)'}, futility stop "
        f"{'one SE' if plan.futility is None else f'below {plan.futility_power} power {plan.futility:g}'}"
        f"{', the failure part held' if plan.futility_failures == 'hold' else ''}, seeking {plan.seek}"
        f"{'' if plan.spending == 'obrien_fleming' else f', {plan.spending} spending'}",
        f"     n  depth  fixed({high} seeds): shown  lower  |  adaptive: decision  round  seeds  lower   upper"
        "   at trial",
    ]
    same = []
    for (n, k), row in last.iterrows():
        if k == 0:
            lines.append(f"{n:>6}  {k:>5}  {'reference':>28}  |  {'':>18}  {'':>5}  {int(row['seeds']):>5}"
                         f"  {'':>6}  {'':>6}  {int(row['at_trial']):>8}")  # fmt: skip
            continue
        f = fixed.loc[(n, k)]
        same.append(bool(f["noninferior"]) == (row["decision"] == "noninferior"))
        decided = "-" if pd.isna(row["decided_round"]) else int(row["decided_round"])
        lines.append(f"{n:>6}  {k:>5}  {bool(f['noninferior'])!s:>21}  {f['lower']:+.3f}  |  {row['decision']:>18}"
                     f"  {decided:>5}  {int(row['seeds']):>5}  {row['lower']:+.3f}  {row['upper']:+.3f}"
                     f"  {int(row['at_trial']):>8}")  # fmt: skip
    total = summary.set_index("train_size").loc[-1]
    lines.append("\n" + summary.to_string(index=False))
    claims = {cell for cell, row in last.iterrows() if row["decision"] == "noninferior"}
    lines += _fixed_by_seeds(runs, own, plan, claims, response, metric, int(total["runs_adaptive"]))
    numbers = {"runs_adaptive": int(total["runs_adaptive"]), "runs_fixed": int(total["runs_fixed"]),
               "shown_fixed": int(fixed["noninferior"].sum()), "shown_adaptive": int(total["noninferior"]),
               "same_claims": int(sum(same)), "comparisons": len(same)}  # fmt: skip
    lines.append(
        f"{task}: runs {numbers['runs_adaptive']} of {numbers['runs_fixed']} "
        f"({numbers['runs_adaptive'] / numbers['runs_fixed']:.3f}); non-inferior: fixed {numbers['shown_fixed']}, "
        f"adaptive {numbers['shown_adaptive']}; the same claim in {numbers['same_claims']} of {len(same)} comparisons"
    )
    return "\n".join(lines), numbers


def _fixed_by_seeds(
    runs: pd.DataFrame, own: pd.DataFrame, plan: SequentialPlan, claims: set, response: str, metric: str, used: int
) -> list[str]:
    """The fixed design on each look's first seeds (seeds 1..S of every cell): its non-inferiority claims, and
    whether they are the adaptive replay's. Why: "the same decisions as a fixed design of equal power" has no
    power to read on one real study, but the smallest fixed design that makes the adaptive replay's claims is
    the one it saved runs against."""
    cells = runs[["train_size", "frozen_layers"]].drop_duplicates()
    lines = ["\nthe fixed design on the first S seeds of every cell:", "     S   runs  claims  same as adaptive  ratio"]
    for seeds in [look for look in plan.looks() if look >= plan.min_seeds]:
        fixed = fixed_design(runs, own, plan, seeds=seeds, response=response, metric=metric)
        shown = set(map(tuple, fixed.loc[fixed["noninferior"], ["train_size", "frozen_layers"]].to_numpy()))
        n_runs = seeds * len(cells)
        lines.append(f"{seeds:>6}  {n_runs:>5}  {len(shown):>6}  {shown == claims!s:>16}  {used / n_runs:5.2f}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="bench/results/adaptive_replay.txt")
    parser.add_argument("--example", type=Path, default=EXAMPLE, help="a folder with results.csv, predictions.parquet")
    parser.add_argument("--tasks", default="sst2,cola", help="the tasks to replay, comma-separated")
    parser.add_argument("--margin", type=float, default=None, help="default: the task metric's (1 or 2 points)")
    add_plan_flags(parser, min_seeds=2, max_seeds=5, seeds_per_round=1)
    args = parser.parse_args()
    plan = plan_options(parser, args)
    started = time.perf_counter()
    results = pd.read_csv(args.example / "results.csv")
    items = read_item_predictions(args.example / "predictions.parquet")
    tasks = args.tasks.split(",")
    metrics = {task: metric for task, metric in TASK_METRICS.items() if task in tasks}  # only the replayed tasks'
    data, settings = apply_task_metrics(normalize_results(results), items, metrics, "heldout", False)
    parts, totals = [], {"runs_adaptive": 0, "runs_fixed": 0, "same_claims": 0, "comparisons": 0}
    for task in tasks:
        options = {"margin": args.margin, **plan}
        text, numbers = replay_task(data, items, task, settings, options)
        parts.append(text)
        totals = {key: totals[key] + numbers[key] for key in totals}
    seconds = time.perf_counter() - started
    root = EXAMPLE.parents[1]
    where = args.example.resolve().relative_to(root) if args.example.resolve().is_relative_to(root) else args.example
    head = f"bench/adaptive_replay.py: {where} replayed adaptively, {seconds:.0f} s\n  {_cpu()}"
    tail = (
        f"\n{' and '.join(tasks)}: runs {totals['runs_adaptive']} of {totals['runs_fixed']} "
        f"({totals['runs_adaptive'] / totals['runs_fixed']:.3f}, target <= 0.333); the fixed design's "
        f"non-inferiority claim kept in {totals['same_claims']} of {totals['comparisons']} comparisons"
    )
    text = "\n".join([head, *parts, tail]) + "\n"
    Path(args.output).write_text(text)
    print(text)


if __name__ == "__main__":
    main()

"""Does the adaptive design keep the task's familywise error at the margin, and how many runs does it save?

    python bench/adaptive_seeds.py                      # 100 studies of each scenario (one process)
    python bench/adaptive_seeds.py --margin 0.03 --output bench/results/adaptive_seeds_m003.json
    python bench/adaptive_seeds.py --studies 20 --output /tmp/a.json
    python bench/adaptive_seeds.py --from-json bench/results/adaptive_seeds.json   # reprint a run

Each study is one simulated SST-2 grid of ``freezestats.stats.simulation.realistic`` with 10 seeds a cell
(collapsed runs, depth x seed correlation from 0.99 to -0.3, a finite evaluation set of 872 items, runs that
lean towards a class; ``bench/coverage_task_level.py`` describes it), failed runs flagged by the analysis's
binomial rule. The adaptive design (``freezestats.stats.sequential``: margin 0.01, familywise alpha 0.05,
cells first decided at 2 seeds then every 2 seeds up to 10, O'Brien-Fleming-type spending, task-level
contrasts with the items' part) is played on the study's runs with ``replay``: a cell gets its next seeds only
while its comparison is open, so the runs it uses are the ones an adaptive study would have run.

* ``null_at_margin(0.01)``: every depth's true cost is exactly -0.01. The familywise error is the share of
  studies naming any depth at any size non-inferior (nominal <= 0.05), and per size. The fixed design
  (``task_noninferiority`` on all 10 seeds) is measured on the same studies, for comparison.
* ``blog_shaped()``: per cell, the share of studies naming the depth non-inferior (power where its truth is
  above -0.01), the share naming it inferior (an error where the truth is above -0.01), the mean seeds it got;
  the same for the fixed design at S = 2, 4, 6, 8, 10 seeds (``--fixed-seeds``: up to 20 or more, the studies
  then simulate that many seeds a cell, the adaptive design still stops at 10), on each study's first S seeds.
  The fixed design "of the same power" is the smallest S whose mean power over the cells with truth above
  -0.01 reaches the adaptive design's *and* whose own familywise error at the null (measured on the same null
  studies) is at most alpha: a fixed test over its level would otherwise buy its power with its excess error
  (the 2-seed test does: 0.086 at a 1-point margin); the runs ratio is the adaptive design's mean runs over
  that design's (35 cells x S), and
  the agreement the share of (study, cell) whose non-inferiority claim is the same in both.

Monte Carlo SEs are binomial, sqrt(p (1 - p) / studies); a familywise error also gets its exact (Clopper-Pearson)
one-sided 95% upper bound, which still says something where no study erred (SE 0).
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import multiprocessing
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from freezestats.stats.failures.rates import flag_failures
from freezestats.stats.sequential import SequentialPlan, decisions, fixed_design, replay
from freezestats.stats.simulation.realistic import (
    RealisticTask,
    blog_shaped,
    null_at_margin,
    realistic_task,
    simulate_realistic,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/adaptive_plan_flags.py, also when a test loads this

from adaptive_plan_flags import add_plan_flags, plan_options  # the plan's flags, shared with the other adaptive bench
from allocation_floor import allocation_floor  # the fewest runs any per-cell allocation needs for a power

# bench/coverage.py, for the saved record and the command line every coverage bench shares (loaded by path:
# `import coverage` would find the PyPI package of pytest-cov first)
_spec = importlib.util.spec_from_file_location("bench_coverage", Path(__file__).resolve().with_name("coverage.py"))
coverage = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(coverage)  # type: ignore[union-attr]

PLAN = SequentialPlan(margin=0.01, alpha=0.05, min_seeds=2, max_seeds=10, seeds_per_round=2)
FIXED_SEEDS: tuple[int, ...] = (2, 4, 6, 8, 10)
NULL_OFFSET = 1_000_000  # the null studies' generator seeds: study i draws rng=NULL_OFFSET + i
_TASKS: dict[str, RealisticTask] = {}


def _flagged(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with the analysis's failure flags (the binomial rule on the scored half) in ``failed``."""
    return runs.assign(failed=flag_failures(runs, checkpoint="heldout", rule="binomial").to_numpy())


def _adaptive(runs: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """The adaptive design's last state per cell (the reference too) on a study's runs."""
    played = replay(runs, items, PLAN)
    return played.sort_values("round").groupby(["train_size", "frozen_layers"], as_index=False).last()


def one_study(index: int) -> tuple[list[dict], list[dict]]:
    """One study of each scenario: per comparison, the adaptive and the fixed designs' decisions and seeds."""
    study = simulate_realistic(_TASKS["alternative"], rng=index)
    runs = _flagged(study.results)
    last = _adaptive(runs, study.items).set_index(["train_size", "frozen_layers"])
    fixed = {s: fixed_design(runs, study.items, PLAN, seeds=s).set_index(["train_size", "frozen_layers"])
             for s in FIXED_SEEDS}  # fmt: skip
    alt = []
    for (n, k), row in last.iterrows():
        entry = {"study": index, "train_size": n, "frozen_layers": k, "seeds": int(row["seeds"])}
        if k != 0:
            entry.update(truth=study.truth_task[(n, k)], decision=row["decision"], round=int(row["round"]),
                         **{f"fixed_{s}": bool(fixed[s].loc[(n, k), "noninferior"]) for s in FIXED_SEEDS})  # fmt: skip
        alt.append(entry)
    null_study = simulate_realistic(_TASKS["null"], rng=NULL_OFFSET + index)
    null_runs = _flagged(null_study.results)
    last = _adaptive(null_runs, null_study.items)
    fixed_null = {s: fixed_design(null_runs, null_study.items, PLAN, seeds=s).set_index(["train_size", "frozen_layers"])
                  for s in FIXED_SEEDS}  # fmt: skip
    null = [_null_row(index, r, fixed_null) for r in last.itertuples()]
    return alt, null


def _null_row(index: int, r: Any, fixed_null: dict[int, pd.DataFrame]) -> dict:
    """One null comparison: the adaptive decision, and each fixed design's claim on the same study."""
    claims = {
        f"fixed_{s}": bool(r.frozen_layers != 0 and table.loc[(r.train_size, r.frozen_layers), "noninferior"])
        for s, table in fixed_null.items()
    }
    return {"study": index, "train_size": int(r.train_size), "frozen_layers": int(r.frozen_layers),
            "seeds": int(r.seeds), "decision": r.decision, "fixed": claims.get(f"fixed_{PLAN.max_seeds}", False),
            **claims}  # fmt: skip


def _start(alternative: RealisticTask, null: RealisticTask, plan: SequentialPlan, fixed: tuple[int, ...],
           failure_rates: str = "pooled") -> None:  # fmt: skip
    global PLAN, FIXED_SEEDS  # the plan of this run (its margin) and its fixed designs, in every worker of the pool
    _TASKS.update(alternative=alternative, null=null)
    PLAN, FIXED_SEEDS = plan, fixed
    decisions.SEQUENTIAL_FAILURE_RATES = failure_rates  # the looks' and the fixed designs' failure part


def run(
    n_studies: int,
    plan: SequentialPlan,
    fixed: tuple[int, ...] = FIXED_SEEDS,
    processes: int = 1,
    first: int = 0,
    failure_rates: str = "pooled",
) -> dict:
    """``n_studies`` studies of each scenario under ``plan`` (its margin, looks, futility stop and screen) and
    fixed designs on ``fixed`` seeds (a cell simulates the most of those and the plan's ``max_seeds``);
    ``processes`` > 1 runs a pool. The null scenario sits at the plan's margin. ``first``: the first study's
    index (studies ``first .. first + n_studies - 1``), so that a setting chosen on some studies is checked on
    others. ``failure_rates``: the looks' failure part (``pooled``, Wilson-MOVER, as shipped; ``pooled_joint``)."""
    margin = plan.margin
    base = replace(blog_shaped(), seeds=max(plan.max_seeds, *fixed))
    tasks = (realistic_task(base), realistic_task(null_at_margin(margin, base)), plan, tuple(fixed), failure_rates)
    started = time.perf_counter()
    _start(*tasks)  # here too: summarise reads the fixed designs
    if processes > 1:
        with multiprocessing.Pool(processes, initializer=_start, initargs=tasks) as pool:
            outcomes = pool.map(one_study, range(first, first + n_studies), chunksize=2)
    else:
        outcomes = [one_study(i) for i in range(first, first + n_studies)]
    alt = pd.DataFrame([row for rows, _ in outcomes for row in rows])
    null = pd.DataFrame([row for _, rows in outcomes for row in rows])
    rows = summarise(alt, null, n_studies, margin)
    record = coverage.result_record(n_studies, started, {}, rows, margin=margin, processes=processes,
                                    plan=plan.__dict__, looks=list(plan.looks()), fixed_seeds=list(fixed),
                                    simulated_seeds=base.seeds, first=first, failure_rates=failure_rates)  # fmt: skip
    return record, pd.concat([alt.assign(scenario="alternative"), null.assign(scenario="null")], ignore_index=True)


def _fwer(shown: pd.Series) -> dict:
    """Share of studies with any claim, overall and per size, from (study, size, cell) claims."""
    per = shown.groupby(level=["study", "train_size"]).any().unstack()
    return {"any": float(per.any(axis=1).mean()), **{str(n): float(per[n].mean()) for n in per.columns}}


def summarise(alt: pd.DataFrame, null: pd.DataFrame, n_studies: int, margin: float,
              fixed_seeds: tuple[int, ...] | None = None, alpha: float | None = None) -> list[dict]:  # fmt: skip
    """The record's rows: one per comparison of the alternative, and the summary numbers as a last row.
    ``fixed_seeds`` and ``alpha``: the fixed designs and the family's level (default: this run's)."""
    fixed_seeds = FIXED_SEEDS if fixed_seeds is None else fixed_seeds
    alpha = PLAN.alpha if alpha is None else alpha
    compared = alt[alt["frozen_layers"] != 0].copy()
    compared["noninferior"] = compared["decision"] == "noninferior"
    compared["inferior"] = compared["decision"] == "inferior"
    cell = compared.groupby(["train_size", "frozen_layers"])
    rows = cell.agg(truth=("truth", "mean"), power=("noninferior", "mean"), inferior=("inferior", "mean"),
                    seeds=("seeds", "mean"), exhausted=("decision", lambda d: float((d == "exhausted").mean())),
                    **{f"fixed_{s}": (f"fixed_{s}", "mean") for s in fixed_seeds}).reset_index()  # fmt: skip
    true_ni = rows["truth"] > -margin
    power = float(rows.loc[true_ni, "power"].mean())
    fixed_power = {s: float(rows.loc[true_ni, f"fixed_{s}"].mean()) for s in fixed_seeds}
    null_idx = null[null["frozen_layers"] != 0].set_index(["study", "train_size", "frozen_layers"])
    fixed_fwer = {s: _fwer(null_idx[f"fixed_{s}"].astype(bool))["any"] for s in fixed_seeds if f"fixed_{s}" in null_idx}
    matched = matched_design(power, fixed_power, fixed_fwer, alpha)
    runs_alt = float(alt.groupby("study")["seeds"].sum().mean())
    runs_null = float(null.groupby("study")["seeds"].sum().mean())
    cells = alt.groupby("study").size().iloc[0]
    same = None if matched is None else compared["noninferior"] == compared[f"fixed_{matched}"]
    summary = {
        "row": "summary", "power_adaptive": power, "power_fixed": fixed_power, "matched_fixed_seeds": matched,
        "fwer_fixed": fixed_fwer,
        "runs_adaptive": runs_alt, "runs_adaptive_null": runs_null, "cells": int(cells),
        "runs_matched": None if matched is None else int(cells * matched),
        "runs_ratio": None if matched is None else runs_alt / (cells * matched),
        "agreement": None if matched is None else float(same.mean()),
        "study_agreement": None if matched is None else float(same.groupby(compared["study"]).all().mean()),
        "wrong_inferior": float(compared.loc[compared["truth"] > -margin, "inferior"].mean()),
        "fwer_adaptive": _fwer(null_idx["decision"] == "noninferior"),
        "fwer_fixed_10": _fwer(null_idx["fixed"].astype(bool)),
        "n_studies": n_studies,
    }  # fmt: skip
    return [*rows.to_dict("records"), summary]


def matched_design(power: float, fixed_power: dict[int, float], fixed_fwer: dict[int, float],
                   alpha: float) -> int | None:  # fmt: skip
    """The fewest fixed seeds whose power reaches ``power`` among the designs that hold their level (a design over
    it would buy its power with its excess error); None where none does, or where ``power`` is 0 (nothing shown
    by either design: nothing to match)."""
    if power <= 0:
        return None
    holding = sorted(s for s in fixed_power if fixed_fwer.get(s, 0.0) <= alpha)
    return next((s for s in holding if fixed_power[s] >= power), None)


def interpolated_seeds(
    power: float, fixed_power: dict, fixed_fwer: dict, alpha: float
) -> tuple[float, int, int] | None:
    """The fixed design's seeds at ``power``, read linearly between the two designs on the bench's grid whose power
    brackets it (those that hold their level only), with the pair read: ``(seeds, below, above)``.

    Why: the match is the first grid design at least as powerful, so a power of 0.265 against 0.264 at 20 seeds
    and 0.311 at 24 matches 24 seeds, and the ratio jumps by a fifth with the third decimal of a Monte Carlo
    estimate. Read between the grid's designs the ratio moves with the power smoothly. None where no pair
    brackets it."""
    fwer = {int(k): v for k, v in fixed_fwer.items()}  # a saved record's keys are strings, a fresh summary's ints
    grid = sorted((int(k), float(v)) for k, v in fixed_power.items() if fwer.get(int(k), 0.0) <= alpha)
    for (s_low, p_low), (s_high, p_high) in itertools.pairwise(grid):
        if p_low < power <= p_high:
            return s_low + (power - p_low) / (p_high - p_low) * (s_high - s_low), s_low, s_high
    return None


def _se(p: float, n: int) -> float:
    return float(np.sqrt(max(p * (1 - p), 0.0) / n))


def _upper(p: float, n: int) -> float:
    """:func:`coverage.exact_upper` of a rate seen as the share ``p`` of ``n`` studies."""
    return coverage.exact_upper(round(p * n), n)


def _rates(name: str, rates: dict, n: int) -> list[str]:
    """A familywise error overall and per size, each with its MC SE and its one-sided 95% upper bound."""
    names = {"any": "any size", **{k: f"n={k}" for k in rates if k != "any"}}
    return [f"  {name}:"] + [
        f"    {names[k]:>9}: {p:.3f} (SE {_se(p, n):.3f}, 95% upper {_upper(p, n):.3f})" for k, p in rates.items()
    ]


def report(result: dict) -> str:
    rows = pd.DataFrame([r for r in result["rows"] if r.get("row") != "summary"])
    s = next(r for r in result["rows"] if r.get("row") == "summary")
    n = result["n_studies"]
    plan = result["plan"]
    lines = [
        f"bench/adaptive_seeds.py: {n} studies of each scenario"
        + (f" (studies {result['first']}-{result['first'] + n - 1})" if result.get("first") else "")
        + ", blog_shaped() with "
        f"{result.get('simulated_seeds', plan['max_seeds'])} seeds a cell (the plan stops at {plan['max_seeds']}); "
        f"{result['processes']} process(es), {result['seconds']:.0f} s",
        f"  {result['machine']}",
        f"  plan: margin {plan['margin']}, familywise alpha {plan['alpha']}, looks at {result['looks']} paired seeds, "
        f"{plan['spending']} spending, {SequentialPlan(**plan).futility_rule()}, task-level contrasts (seeds x items), "
        f"failure part {result.get('failure_rates', 'pooled')}",
        "\nper comparison of blog_shaped(): power = share of studies naming it non-inferior, inferior = naming it "
        "inferior, exhausted = stopped open, seeds = mean seeds it got; fixed S = power of the fixed design on S seeds",
    ]
    fixed_seeds = result.get("fixed_seeds", list(FIXED_SEEDS))
    header = ["n", "depth", "truth", "power", "inferior", "exhausted", "seeds", *[f"fixed {x}" for x in fixed_seeds]]
    lines.append("  ".join(f"{h:>9}" for h in header))
    for r in rows.sort_values(["train_size", "frozen_layers"]).to_dict("records"):
        rates = [f"{r[c]:.3f}" for c in ("power", "inferior", "exhausted")]
        fixed = [f"{r[f'fixed_{x}']:.3f}" for x in fixed_seeds]
        values = [r["train_size"], r["frozen_layers"], f"{r['truth']:+.4f}", *rates, f"{r['seeds']:.2f}", *fixed]
        lines.append("  ".join(f"{v:>9}" for v in values))
    fa, ff = s["fwer_adaptive"], s["fwer_fixed_10"]
    lines += [
        f"\nfamilywise error under null_at_margin({result['margin']}) over {n} studies, binomial MC SE and exact "
        "one-sided 95% upper bound in brackets (nominal <= 0.05):",
        *_rates("adaptive", fa, n),
        *_rates("fixed, 10 seeds", ff, n),
        f"\nmean power over the comparisons with truth above -{result['margin']}: adaptive {s['power_adaptive']:.3f}; "
        "fixed " + ", ".join(f"S={k}: {v:.3f}" for k, v in s["power_fixed"].items()),
        *(
            [
                "fixed designs' own familywise error at the null (a match must hold alpha): "
                + ", ".join(f"S={k}: {v:.3f}" for k, v in s["fwer_fixed"].items())
            ]
            if "fwer_fixed" in s
            else []
        ),
        f"wrong 'inferior' claims (truth above -{result['margin']}): {s['wrong_inferior']:.4f} of those comparisons",
        f"runs: adaptive {s['runs_adaptive']:.1f} per study ({s['runs_adaptive_null']:.1f} at the null) of "
        f"{s['cells']} cells x {plan['max_seeds']} = {s['cells'] * plan['max_seeds']}",
    ]
    if s["power_adaptive"] == 0:
        lines.append("the adaptive design showed no comparison with truth above the margin non-inferior: no power to "
                     f"match a fixed design with (the runs ratio is against the fixed design of {plan['max_seeds']} "
                     f"seeds: {s['runs_adaptive'] / (s['cells'] * plan['max_seeds']):.3f})")  # fmt: skip
    elif s["matched_fixed_seeds"] is None:
        lines.append(
            f"no fixed design up to {max(fixed_seeds)} seeds that holds its level reaches the adaptive design's power"
        )
    else:
        lines.append(
            f"fixed design of the same power: S = {s['matched_fixed_seeds']} ({s['runs_matched']} runs); runs ratio "
            f"adaptive / fixed = {s['runs_ratio']:.3f} (target <= 0.333); same non-inferiority claim in "
            f"{s['agreement']:.3f} of (study, comparison) pairs, in every comparison of {s['study_agreement']:.3f} "
            "of studies"
        )
        between = interpolated_seeds(s["power_adaptive"], s["power_fixed"], s.get("fwer_fixed", {}), plan["alpha"])
        if between is not None:
            seeds, low, high = between
            lines.append(
                f"  the same, with the fixed designs' power read linearly between S = {low} and {high}: "
                f"S = {seeds:.1f} ({s['cells'] * seeds:.0f} runs), "
                f"ratio {s['runs_adaptive'] / (s['cells'] * seeds):.3f}"
            )
        lines += _floor_line(rows, result, s, between)
    return "\n".join(lines)


def _floor_line(rows: pd.DataFrame, result: dict, s: dict, between: tuple[float, int, int] | None) -> list[str]:
    """The runs a per-cell fixed allocation knowing the truth needs for the adaptive design's power
    (``bench/allocation_floor.py``), against the uniform design read between the grid's and the adaptive runs."""
    seeds = result.get("fixed_seeds", list(FIXED_SEEDS))
    floor = allocation_floor(rows.to_dict("records"), result["margin"], seeds, s["power_adaptive"])
    if floor is None:
        return []
    against = "" if between is None else f"{floor / (s['cells'] * between[0]):.3f} of the design read between; "
    return [
        f"  a fixed allocation of seeds per cell, chosen knowing every cell's truth, needs {floor} runs for that "
        f"power ({against}the adaptive design uses {s['runs_adaptive'] / floor:.2f} times that; "
        "bench/allocation_floor.py)"
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=100)
    parser.add_argument("--processes", type=int, default=1, help="studies run in a pool of this many (default 1)")
    parser.add_argument("--margin", type=float, default=0.01, help="the non-inferiority margin (default 0.01)")
    add_plan_flags(parser, min_seeds=PLAN.min_seeds, max_seeds=PLAN.max_seeds, seeds_per_round=PLAN.seeds_per_round)
    parser.add_argument("--first", type=int, default=0, help="the first study's index (default 0)")
    parser.add_argument("--fixed-seeds", default="2,4,6,8,10", help="the fixed designs' seeds, comma-separated")
    rates = "the looks' failure part: Wilson-MOVER (pooled, as shipped) or the joint draws (pooled_joint)"
    parser.add_argument("--failure-rates", default="pooled", choices=("pooled", "pooled_joint"), help=rates)
    parser.add_argument("--output", default="bench/results/adaptive_seeds.json")
    parser.add_argument("--from-json", help="reprint a saved run")
    args = parser.parse_args()
    options = plan_options(parser, args)
    fixed = tuple(int(x) for x in args.fixed_seeds.split(","))
    plan = replace(PLAN, margin=args.margin, **options)

    def compute() -> dict:
        record, studies = run(args.studies, plan, fixed, args.processes, args.first, args.failure_rates)
        coverage.studies_path(args.output).parent.mkdir(parents=True, exist_ok=True)
        studies.to_parquet(coverage.studies_path(args.output), index=False)
        return record

    coverage.reprint_or_run(args.from_json, args.output, compute, report)
    if not args.from_json:
        Path(args.output).with_suffix(".txt").write_text(report(json.loads(Path(args.output).read_text())) + "\n")


if __name__ == "__main__":
    main()

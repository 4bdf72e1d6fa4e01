"""The task-level answer's familywise error at the margin, on more null studies than the coverage bench runs.

    python bench/fwer_task_level.py --studies 400 --first 400 --processes 2
    python bench/fwer_task_level.py --from-json bench/results/fwer_task_level_400_799.json   # reprint a run

Why: ``bench/coverage_task_level.py`` measures coverage and the familywise error on the same 400 studies, and
the error of ``failure_rates="pooled_joint"`` came out 0.052 (MC SE 0.011) against a target of at most 0.05: the
run cannot say on which side of 0.05 it lies. The null studies are the expensive half's cheaper part, so this
bench runs only them, on studies the coverage bench did not draw (``--first``: study i draws
``rng=NULL_OFFSET + i`` as there, so ``--first 400`` continues its 400), and every failure-rate model on the same
studies (``--failure-rates``), which makes their difference paired. Each study is ``null_at_margin(0.01)`` of
the blog-shaped scenario with 5 seeds (every depth's true cost exactly 1 point); the familywise error is the
share of studies naming any depth at any size non-inferior, with its binomial MC SE and exact (Clopper-Pearson)
one-sided 95% upper bound, overall and per size.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from freezestats.stats.items.task_two_part import FAILURE_RATES
from freezestats.stats.simulation.realistic import blog_shaped, null_at_margin, realistic_task

# the coverage bench (its null study, margin and generator seeds) and bench/coverage.py (the saved record), by
# path: `import coverage` would find the PyPI package of pytest-cov first
_HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("bench_coverage_task_level", _HERE / "coverage_task_level.py")
task_bench = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(task_bench)  # type: ignore[union-attr]
coverage = task_bench.coverage


def _one(job: tuple[int, str]) -> list[dict]:
    """One null study under one failure-rate model: per contrast, whether it was shown non-inferior."""
    index, failure_rates = job
    return [{**row, "failure_rates": failure_rates} for row in task_bench.null_study(index, failure_rates)]


def _start(seeds: int) -> None:
    base = replace(blog_shaped(), seeds=seeds)
    task_bench.configure(realistic_task(base), realistic_task(null_at_margin(task_bench.MARGIN, base)))


def run(n_studies: int, first: int, models: tuple[str, ...], seeds: int = 5, processes: int = 1) -> dict:
    """Null studies ``first .. first + n_studies - 1`` under each failure-rate model in ``models``."""
    jobs = [(i, model) for i in range(first, first + n_studies) for model in models]
    started = time.perf_counter()
    if processes > 1:
        with multiprocessing.Pool(processes, initializer=_start, initargs=(seeds,)) as pool:
            outcomes = pool.map(_one, jobs, chunksize=2)
    else:
        _start(seeds)
        outcomes = [_one(job) for job in jobs]
    rows = pd.DataFrame([row for rows in outcomes for row in rows])
    rates = {}
    for model, at in rows.groupby("failure_rates"):
        shown = at.groupby(["study", "train_size"])["noninferior"].any().unstack()
        rates[model] = {"any": int(shown.any(axis=1).sum()), **{str(n): int(shown[n].sum()) for n in shown.columns}}
    claims = rows[rows["noninferior"]]
    return coverage.result_record(n_studies, started, {}, [], first=first, seeds=seeds, margin=task_bench.MARGIN,
                                  processes=processes, errors_per_model=rates,
                                  claims=claims.to_dict("records"))  # fmt: skip


def report(result: dict) -> str:
    n, first = result["n_studies"], result["first"]
    lines = [f"bench/fwer_task_level.py: null studies {first}..{first + n - 1} of null_at_margin({result['margin']}), "
             f"{result['seeds']} seeds a cell, {result['processes']} process(es), {result['seconds']:.0f} s",
             f"  vm: {result['machine'].split(': ', 1)[-1]}",
             "familywise error (studies naming any depth non-inferior), MC SE, exact one-sided 95% upper:"]  # fmt: skip
    for model, counts in result["errors_per_model"].items():
        parts = []
        for key, errors in counts.items():
            p = errors / n
            se = (p * (1 - p) / n) ** 0.5
            name = "any size" if key == "any" else f"n={key}"
            bound = coverage.exact_upper(errors, n)
            parts.append(f"    {name:>9}: {errors:3d} of {n} = {p:.3f} (SE {se:.3f}, 95% upper {bound:.3f})")
        lines += [f"  {model}:", *parts]
    if "claims" in result:
        lines += ["", *claim_breakdown(pd.DataFrame(result["claims"]), n)]
    return "\n".join(lines)


def claim_breakdown(claims: pd.DataFrame, n: int) -> list[str]:
    """Where the false claims come from: per model, the claims (contrasts shown non-inferior at the margin) by
    what the pair's runs at that size showed: no run flagged as failed (a failure rate the sample did not see),
    every run flagged (nothing healthy to compare), or some of each.

    Why: the truth at the margin includes each cell's failure rate times its failed runs' gap; a contrast whose
    5 + 5 runs show no failure has nothing in its data that speaks of that part."""
    lines = ["false claims by what the pair's runs at that size showed (flagged as failed):"]
    if claims.empty:
        return [*lines, "  none"]
    kind = np.select([claims["flagged"] == 0, claims["flagged"] == claims["runs"]], ["none", "all"], "some")
    for model, at in claims.assign(kind=kind).groupby("failure_rates"):
        counts = at["kind"].value_counts()
        cells = ", ".join(f"({r.train_size}, {r.frozen_layers})" for r in at.itertuples())
        lines.append(f"  {model}: {len(at)} claims in {at['study'].nunique()} of {n} studies; none flagged "
                     f"{counts.get('none', 0)}, all flagged {counts.get('all', 0)}, some {counts.get('some', 0)}; "
                     f"cells {cells}")  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=400)
    parser.add_argument("--first", type=int, default=400, help="the first study's index (the coverage bench ran 0..)")
    models = f"comma-separated, of {', '.join(FAILURE_RATES)} (default: pooled,pooled_joint)"
    parser.add_argument("--failure-rates", default="pooled,pooled_joint", help=models)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--output", default="bench/results/fwer_task_level.json")
    parser.add_argument("--from-json", help="reprint a saved run")
    args = parser.parse_args()
    models = tuple(args.failure_rates.split(","))
    unknown = [m for m in models if m not in FAILURE_RATES]
    if unknown:
        parser.error(f"--failure-rates: unknown {unknown}; choose from {list(FAILURE_RATES)}")
    compute = lambda: run(args.studies, args.first, models, processes=args.processes)  # noqa: E731
    coverage.reprint_or_run(args.from_json, args.output, compute, report)
    if not args.from_json:
        Path(args.output).with_suffix(".txt").write_text(report(json.loads(Path(args.output).read_text())) + "\n")


if __name__ == "__main__":
    main()

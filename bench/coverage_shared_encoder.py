"""Do the shared-encoder intervals cover 95% in a study shaped like examples/multitask-minilm?

    python bench/coverage_shared_encoder.py                      # 500 studies per task and scenario (~10 min)
    python bench/coverage_shared_encoder.py --n-studies 100 --tasks stsb --scenarios normal
    python bench/coverage_shared_encoder.py --from-json bench/results/coverage_shared_encoder.json

``stats.shared_encoder_contrasts`` (a residual variance per cell, seed and seed x size random effects) answers
the multi-task example's questions from 3 seeds a cell whose spreads differ 20-fold (STS-B alone at n = 200
against the group at n = 1000), and MRPC's runs sit mostly on the majority-class pile. bench/coverage.py checks
the freeze model on the blog's 5-seed grid; this checks the shared-encoder families on the multi-task study's
own structure, each task on its own cells:

* ``normal``: each (trained_with, frozen, size) cell's runs are normal with the committed study's cell mean and
  SD of the held-out metric (cross-encoded runs; SD floored at 0.002, about one item of a 400-item half);
* ``pile``: each run lands on the task's majority pile (the held-out score of a run that predicts one class)
  with probability (failed + 0.5) / (runs + 1), the cell's failed share shrunk off 0 and 1 so every cell is a
  mixture, and is otherwise normal with the cell's healthy mean and SD (pile + 0.01 and 0.005 where the cell
  had fewer than two healthy runs). The truth of a cell is the mixture's mean.

Every run of seed s shares a seed effect (SD 0.01) and a seed x size effect (SD 0.005), as the same seed
draws the same subset and data order in every setting. Intervals are per comparison (no Holm), so nominal
coverage is 95%; the Monte Carlo band of a coverage from N studies is +-1.96 sqrt(0.95 * 0.05 / N).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from rich.progress import Progress

from freezestats.exceptions import ModelFitError
from freezestats.stats.comparisons.shared_encoder import shared_encoder_contrasts

# bench/coverage.py, for the saved record both coverage benches write; loaded by path, since `import coverage`
# would find coverage.py (the PyPI package of pytest-cov) first wherever that is installed and imported
_spec = importlib.util.spec_from_file_location("bench_coverage", Path(__file__).resolve().with_name("coverage.py"))
coverage = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(coverage)  # type: ignore[union-attr]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "multitask-minilm"
SEEDS, SEED_SD, SEED_SIZE_SD, SD_FLOOR = 3, 0.01, 0.005, 0.002
CELL = ["trained_with", "frozen_layers", "train_size"]


def observed_runs() -> pd.DataFrame:
    """The committed multi-task study's cross-encoded runs (held-out metric, failed flag), one row per task."""
    sys.path.insert(0, str(EXAMPLE))
    import findings  # examples/multitask-minilm/findings.py reads a copy of its study.db

    runs = findings.load_inputs()
    return runs[runs["pair_encoding"] == "cross"]


def cell_parameters(runs: pd.DataFrame, task: str, scenario: str) -> pd.DataFrame:
    """Per cell of ``task``: the generating parameters of the scenario and the cell's true mean."""
    mine = runs[runs["task"] == task].assign(failed=lambda d: d["failed"].fillna(False).astype(bool))
    pile = float(mine.loc[mine["failed"], "heldout"].round(4).mode().iloc[0]) if mine["failed"].any() else np.nan
    rows = []
    for key, cell in mine.groupby(CELL):
        row = dict(zip(CELL, key, strict=True))
        if scenario == "normal":
            row.update(p_pile=0.0, mean=cell["heldout"].mean(), sd=max(cell["heldout"].std(), SD_FLOOR))
        else:
            healthy = cell.loc[~cell["failed"], "heldout"]
            enough = len(healthy) >= 2
            row.update(
                p_pile=(cell["failed"].sum() + 0.5) / (len(cell) + 1),
                mean=healthy.mean() if enough else pile + 0.01,
                sd=max(healthy.std(), SD_FLOOR) if enough else 0.005,
            )
        row["pile"] = pile
        row["truth"] = (1 - row["p_pile"]) * row["mean"] + row["p_pile"] * (pile if row["p_pile"] else 0.0)
        rows.append(row)
    return pd.DataFrame(rows)


def simulate(cells: pd.DataFrame, task: str, rng: np.random.Generator) -> pd.DataFrame:
    """One study of the task's cells: SEEDS runs a cell, seed and seed x size effects shared across settings."""
    sizes = sorted(cells["train_size"].unique())
    seed_effect = rng.normal(0, SEED_SD, SEEDS)
    seed_size = {(s, n): rng.normal(0, SEED_SIZE_SD) for s in range(SEEDS) for n in sizes}
    rows = []
    for cell in cells.itertuples(index=False):
        for s in range(SEEDS):
            on_pile = rng.random() < cell.p_pile
            # a run on the pile predicts one class: its score is the pile's, whatever its seed
            shared = seed_effect[s] + seed_size[(s, cell.train_size)]
            value = cell.pile if on_pile else cell.mean + shared + rng.normal(0, cell.sd)
            rows.append(
                {"task": task, "trained_with": cell.trained_with, "frozen_layers": cell.frozen_layers,
                 "train_size": cell.train_size, "seed": s + 1, "heldout": value, "failed": on_pile}
            )  # fmt: skip
    return pd.DataFrame(rows)


def true_contrasts(cells: pd.DataFrame, task: str) -> pd.DataFrame:
    """The three families' true values, from the cells' true means (as shared_encoder_contrasts labels them)."""
    mu = cells.set_index(CELL)["truth"]
    rows = []
    for group in sorted(set(cells["trained_with"]) - {task}):
        for n in sorted(cells["train_size"].unique()):
            for k in sorted(cells["frozen_layers"].unique()):
                g_k, a_k, g_0, a_0 = mu[(group, k, n)], mu[(task, k, n)], mu[(group, 0, n)], mu[(task, 0, n)]
                rows.append(("together_vs_alone", group, k, n, g_k - a_k))
                if k:
                    rows.append(("frozen_vs_0", group, k, n, g_k - g_0))
                    rows.append(("freezing_gain_difference", group, k, n, (g_k - g_0) - (a_k - a_0)))
    return pd.DataFrame(rows, columns=["comparison", "trained_with", "frozen_layers", "train_size", "truth"])


def run(tasks: list[str], scenarios: list[str], n_studies: int) -> dict:
    """Coverage of every contrast of every task and scenario over ``n_studies`` simulated studies."""
    observed = observed_runs()
    keys = ["comparison", "trained_with", "frozen_layers", "train_size"]
    rows, started = [], time.perf_counter()
    errors: dict[str, int | str] = {}
    with Progress() as progress:
        for task in tasks:
            for scenario in scenarios:
                cells = cell_parameters(observed, task, scenario)
                if cells["pile"].isna().any() and scenario == "pile":
                    errors[f"{task}/{scenario}"] = "skipped: no run of the task failed, so it has no pile"
                    continue
                target = true_contrasts(cells, task)
                rng = np.random.default_rng([ord(c) for c in task + scenario])
                bar = progress.add_task(f"{task} {scenario}", total=n_studies)
                hits = []
                for _ in range(n_studies):
                    study = simulate(cells, task, rng)
                    try:
                        out = shared_encoder_contrasts(study, "heldout", task=task, adjust="none")
                    except ModelFitError:
                        errors[f"{task}/{scenario}"] = int(errors.get(f"{task}/{scenario}", 0)) + 1
                        continue
                    ci = out.merge(target, on=keys)
                    hits.append(ci.assign(covered=(ci["ci_low"] <= ci["truth"]) & (ci["truth"] <= ci["ci_high"])))
                    progress.advance(bar)
                summary = pd.concat(hits).groupby(keys)["covered"].agg(["mean", "count"]).reset_index()
                for row in summary.itertuples(index=False):
                    rows.append({"task": task, "scenario": scenario, "comparison": row.comparison,
                                 "frozen_layers": int(row.frozen_layers), "train_size": int(row.train_size),
                                 "coverage": float(row.mean), "n": int(row.count)})  # fmt: skip
    return coverage.result_record(n_studies, started, errors, rows)


def report(result: dict) -> str:
    """Coverage per task, scenario and family (min / mean over its contrasts) and every contrast below 90%."""
    rows = pd.DataFrame(result["rows"])
    mc = 1.96 * np.sqrt(0.95 * 0.05 / result["n_studies"])
    lines = [
        f"bench/coverage_shared_encoder.py: {result['n_studies']} studies per task and scenario, "
        f"{result['seconds']:.0f} s; {result['machine']}; fits that raised or skipped: {result['errors'] or 'none'}",
        f"coverage of nominal 95% per-comparison intervals, min / mean over a family's contrasts (MC band +-{mc:.3f})",
        f"  {'task':6s} {'scenario':8s} {'together_vs_alone':>19s} {'frozen_vs_0':>13s} "
        f"{'freezing_gain_difference':>26s}",
    ]
    families = ["together_vs_alone", "frozen_vs_0", "freezing_gain_difference"]
    for (task, scenario), part in rows.groupby(["task", "scenario"], sort=False):
        by = part.groupby("comparison")["coverage"].agg(["min", "mean"])
        cells = [f"{by.loc[f, 'min']:.3f}/{by.loc[f, 'mean']:.3f}" if f in by.index else "-" for f in families]
        lines.append(f"  {task:6s} {scenario:8s} {cells[0]:>19s} {cells[1]:>13s} {cells[2]:>26s}")
    low = rows[rows["coverage"] < 0.90].sort_values(["task", "scenario", "comparison", "train_size"])
    lines.append("contrasts below 90%:" if len(low) else "no contrast below 90%")
    for row in low.itertuples(index=False):
        lines.append(
            f"  {row.task:6s} {row.scenario:8s} {row.comparison:25s} frozen {row.frozen_layers} "
            f"at n={row.train_size:<5} {row.coverage:.3f}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-studies", type=int, default=500)
    parser.add_argument("--tasks", default="stsb,mrpc,sst2")
    parser.add_argument("--scenarios", default="normal,pile")
    parser.add_argument("--output", default="bench/results/coverage_shared_encoder.json")
    parser.add_argument("--from-json", help="reprint a saved run")
    args = parser.parse_args()
    compute = lambda: run(args.tasks.split(","), args.scenarios.split(","), args.n_studies)  # noqa: E731
    coverage.reprint_or_run(args.from_json, args.output, compute, report)


if __name__ == "__main__":
    main()

"""``freezestats plan SPEC``: before any run, the seeds and scored items a spec's design needs to decide.

Without a pilot, the variance of each depth's cost comes from a prior: the committed decisive example's variance
components (``data/plan/prior.csv``, written by ``bench/plan_prior.py``), taken at the nearest train size (on a log
scale) and the nearest depth. The seed SD of a pilot of k pairs is uncertain: its 80% upper bound is
``sd * sqrt((k - 1) / chi2_{0.2, k-1})``, and the plan prices the design at the estimate and at that bound. A run's
time is the prior's at its size and depth, scaled by train size (training dominates at n >= 200). Everything is
priced for a true cost of 0 at the stated margin and power (:mod:`freezestats.stats.decision.plan`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.spec.study import StudySpec
from freezestats.stats.decision.crossed import VarianceParts
from freezestats.stats.decision.plan import DesignPower, power, seeds_needed
from freezestats.tasks.bundled import bundled_path

__all__ = ["PlannedDepth", "items_needed", "plan_spec", "plan_warnings", "read_prior"]


@dataclass(frozen=True)
class PlannedDepth:
    task: str
    train_size: int
    depth: int
    prior: str  # the prior row it used: task, size, depth, pairs
    parts: VarianceParts
    seed_sd_high: float  # the 80% upper bound of the prior's seed SD
    seeds: int  # the spec's seeds
    items: int  # the spec's scored items
    at_spec: DesignPower | None  # None: fewer than 3 seeds
    needs: DesignPower | None  # fewest seeds at the spec's items (None: more than 200)
    needs_high: DesignPower | None  # the same at the seed SD's upper bound
    items_needed: int | None  # fewest items with the spec's seeds (None: items alone cannot)
    run_seconds: float


def read_prior() -> pd.DataFrame:
    """The bundled prior (variance components in points, run seconds), one row per example, size and depth."""
    return pd.read_csv(bundled_path("data/plan/prior.csv"))


def _nearest(prior: pd.DataFrame, task: str, size: int, depth: int) -> pd.Series:
    rows = prior[prior["task"] == task] if (prior["task"] == task).any() else prior
    rows = rows.assign(gap=np.abs(np.log(rows["train_size"] / size)), off=np.abs(rows["frozen_layers"] - depth))
    return rows.sort_values(["gap", "off", "frozen_layers"]).iloc[0]


def _seconds(prior: pd.DataFrame, row: pd.Series, size: int) -> float:
    """A run's seconds at ``size``: linear in train size through the prior's sizes at the row's task and depth
    (a fixed evaluation cost plus training), proportional where the prior has one size."""
    same = prior[(prior["task"] == row["task"]) & (prior["frozen_layers"] == row["frozen_layers"])]
    if same["train_size"].nunique() < 2:
        return float(row["seconds"]) * size / float(row["train_size"])
    slope, intercept = np.polyfit(same["train_size"], same["seconds"], 1)
    return float(max(intercept + slope * size, 1.0))


def items_needed(parts: VarianceParts, seeds: int, margin: float, target: float, most: int = 1_000_000) -> int | None:
    """The fewest scored items (doubling search, then bisection) for ``target`` power with ``seeds`` pairs."""
    if seeds < 3 or power(parts, seeds, most, margin).power < target:
        return None
    low, high = 2, 2
    while power(parts, seeds, high, margin).power < target:
        low, high = high, high * 2
    while high - low > max(1, low // 100):
        mid = (low + high) // 2
        low, high = (mid, high) if power(parts, seeds, mid, margin).power < target else (low, mid)
    return high


def plan_spec(spec: StudySpec, items: dict[str, int], margin: float = 1.0, target: float = 0.8) -> list[PlannedDepth]:
    """Every task x train size x depth (other than full fine-tuning) of ``spec``, scored on ``items[task]`` items."""
    prior = read_prior()
    seeds = len(spec.grid.seeds)
    rows = []
    for task in spec.tasks:
        for size in spec.grid.train_sizes:
            for depth in (d for d in spec.grid.frozen_layers if d != 0):
                p = _nearest(prior, task, size, depth)
                parts = VarianceParts(p["sd_seed"] ** 2, p["sd_item"] ** 2, p["sd_res"] ** 2)
                k = int(p["both_trained"])
                high = float(p["sd_seed"] * np.sqrt((k - 1) / stats.chi2.ppf(0.2, k - 1)))
                wide = VarianceParts(high**2, parts.item, parts.residual)
                n = items[task]
                rows.append(PlannedDepth(
                    task, size, depth, f"{p['task']} n={p['train_size']} frozen {p['frozen_layers']} ({k} pairs)",
                    parts, high, seeds, n, power(parts, seeds, n, margin) if seeds >= 3 else None,
                    seeds_needed(parts, n, margin, target), seeds_needed(wide, n, margin, target),
                    items_needed(parts, seeds, margin, target), _seconds(prior, p, size),
                ))  # fmt: skip
    return rows


def plan_warnings(plan: list[PlannedDepth], target: float = 0.8) -> list[str]:
    """One line per task whose scored items are fewer than its seeds need at some depth, naming the size needed."""
    lines = []
    for task in dict.fromkeys(row.task for row in plan):
        few = [r for r in plan if r.task == task and r.seeds < 3]
        if few:
            lines.append(f"warning: {task}: {few[0].seeds} seed(s) give no cost interval; the answer needs at least 3.")
            continue
        hopeless = [r for r in plan if r.task == task and r.items_needed is None]
        if hopeless:
            r = hopeless[0]
            need = f"{r.needs.seeds if r.needs else 'more than 200'} seeds at {r.items:,} items"
            lines.append(f"warning: {task}: with {r.seeds} seeds no pool size gives {target:.0%} power at n = "
                         f"{r.train_size}, frozen {r.depth}; the plan needs {need}.")  # fmt: skip
            continue
        short = [r for r in plan if r.task == task and r.items_needed is not None and r.items_needed > r.items]
        if short:
            worst = max(short, key=lambda r: r.items_needed or 0)
            lines.append(
                f"warning: {task}: {worst.items:,} scored items are fewer than the plan needs for {target:.0%} power "
                f"with {worst.seeds} seeds at n = {worst.train_size}, frozen {worst.depth}: set `[evaluation] pool` "
                f"to at least {worst.items_needed:,}."
            )
    return lines

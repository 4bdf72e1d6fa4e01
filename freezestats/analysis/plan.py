"""``freezestats plan``: from a pilot's stored runs, the seeds and scored items each depth needs to decide.

For every task, train size and depth the pilot ran beside full fine-tuning (depth 0), the runs are paired by
seed, pairs with a collapsed run are set aside (:func:`collapsed`), and the per-item differences on the scored
items (the evaluation pool where the study has one, else the validation set's score half) give the cost interval
and its variance components (:func:`~freezestats.stats.decision.crossed.crossed_cost`). The plan then prices the
design that would show the depth within ``margin`` points at ``target`` power if its true cost were 0: seeds at
the items the study scores, and seeds at the 436 items of SST-2's score half for comparison, with the CPU time a
run of that size took in the pilot.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from freezestats.exceptions import StorageError
from freezestats.results.export import results_table
from freezestats.results.item_predictions import item_predictions, pool_item_predictions
from freezestats.stats.decision.crossed import CrossedCost, crossed_cost
from freezestats.stats.decision.plan import DesignPower, seeds_needed
from freezestats.stats.items.pseudo_values import pseudo_values

__all__ = ["COLLAPSE_SHARE", "DEV_ITEMS", "DepthPlan", "TaskPlan", "collapsed", "paired_differences", "plan_study"]

COLLAPSE_SHARE = 0.95
"""A run collapsed if at least this share of its predictions on the select half, at the chosen checkpoint, is one
class (regression: the predictions there are constant). It never reads the scored or pool items."""
DEV_ITEMS = 436
"""SST-2's score half: what the blog protocol scores, priced beside the study's own items."""


@dataclass(frozen=True)
class DepthPlan:
    """One depth at one size: the pilot's cost interval, and the seeds that would decide it."""

    train_size: int
    depth: int
    seeds_run: int
    cost: CrossedCost | None  # None: fewer than 3 pairs in which both runs trained
    at_study_items: DesignPower | None  # None: no seed count up to the limit reaches the power
    at_dev_items: DesignPower | None
    run_seconds: float  # the pilot's mean wall time of one run at this size and depth


@dataclass(frozen=True)
class TaskPlan:
    task: str
    population: str
    items: int
    margin: float
    target: float
    depths: tuple[DepthPlan, ...]


def collapsed(items: pd.DataFrame, regression: bool) -> pd.Series:
    """Per trial: whether the run collapsed, read off its select-half predictions at the chosen checkpoint."""
    select = items[items["half"] == "select"]
    if regression:
        return select.groupby("trial")["prediction_heldout"].agg(lambda p: float(np.std(p)) < 1e-6)
    share = select.groupby("trial")["prediction_heldout"].agg(lambda p: p.value_counts(normalize=True).iloc[0])
    return share >= COLLAPSE_SHARE


def plan_study(study: object, artifact_dir: Path, margin: float = 1.0, target: float = 0.8) -> list[TaskPlan]:
    """The plan of every task of a pilot study (an Optuna study with freezestats runs)."""
    runs = results_table(study)
    if runs.empty:
        raise StorageError("The pilot study has no complete runs to plan from.")
    items = item_predictions(runs, artifact_dir)
    pool = pool_item_predictions(runs, artifact_dir)
    attrs = getattr(study, "user_attrs", {})
    plans = []
    for task, task_runs in runs.groupby("task"):
        regression = bool(task_runs["metric"].iloc[0] in ("pearson", "spearman", "pearson_spearman"))
        gone = collapsed(items[items["task"] == task], regression)
        if pool is not None and (pool["task"] == task).any():
            scored = pool[pool["task"] == task].rename(columns={"prediction": "answer"})
            population = attrs.get(f"evaluation_pool:{task}", {}).get("population", f"{task} evaluation pool")
        else:
            scored = items[(items["task"] == task) & (items["half"] == "score")]
            scored = scored.rename(columns={"prediction_heldout": "answer"})
            population = f"the {task} validation set's score half"
        n_items = int(scored["idx"].nunique())
        depths = tuple(
            _depth_plan(task_runs, scored, gone, size, depth, margin, target, n_items)
            for size in sorted(task_runs["train_size"].unique())
            for depth in sorted(task_runs[task_runs["train_size"] == size]["frozen_layers"].unique())
            if depth != 0
        )
        plans.append(TaskPlan(str(task), population, n_items, margin, target, depths))
    return plans


def _depth_plan(
    runs: pd.DataFrame,
    scored: pd.DataFrame,
    gone: pd.Series,
    size: int,
    depth: int,
    margin: float,
    target: float,
    n_items: int,
) -> DepthPlan:
    at = runs[runs["train_size"] == size]
    diffs, seeds_run = paired_differences(runs, scored, gone, size, depth)
    cost = crossed_cost(diffs) if len(diffs) >= 3 else None
    seconds = float(at[at["frozen_layers"] == depth]["wall_seconds"].mean())
    plan = (None, None) if cost is None else tuple(
        seeds_needed(cost.parts, items, margin, target) for items in (n_items, DEV_ITEMS)
    )  # fmt: skip
    return DepthPlan(int(size), int(depth), seeds_run, cost, plan[0], plan[1], seconds)


def paired_differences(
    runs: pd.DataFrame, scored: pd.DataFrame, gone: pd.Series, size: int, depth: int
) -> tuple[np.ndarray, int]:
    """Per seed pair in which neither run collapsed: ``depth``'s per-item points minus full fine-tuning's, on the
    ``scored`` items (column ``answer``); and how many seeds ran both. Rows: pairs; columns: items."""
    at = runs[runs["train_size"] == size]
    by_seed = {d: at[at["frozen_layers"] == d].set_index("seed")["trial"] for d in (0, depth)}
    seeds = sorted(set(by_seed[0].index) & set(by_seed[depth].index))
    pairs = [s for s in seeds if not gone.get(by_seed[0][s], False) and not gone.get(by_seed[depth][s], False)]
    metric = str(at["metric"].iloc[0])
    rows = [_points(scored, by_seed[depth][s], metric) - _points(scored, by_seed[0][s], metric) for s in pairs]
    return (np.stack(rows) if rows else np.empty((0, 0))), len(seeds)


def _points(scored: pd.DataFrame, trial: int, metric: str) -> np.ndarray:
    """A run's per-item jackknife pseudo-values of ``metric``, in points, in item order (accuracy: 100 or 0)."""
    run = scored[scored["trial"] == trial].sort_values("idx")
    return 100.0 * pseudo_values(metric, run["answer"].to_numpy(), run["label"].to_numpy())

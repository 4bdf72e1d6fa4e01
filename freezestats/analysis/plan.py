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

from freezestats.analysis.decision import decide
from freezestats.exceptions import StorageError
from freezestats.results.export import results_table
from freezestats.results.item_predictions import item_predictions, pool_item_predictions, pool_populations
from freezestats.stats.decision.crossed import CrossedCost
from freezestats.stats.decision.plan import DesignPower, seeds_needed
from freezestats.stats.decision.verdicts import DepthEvidence

__all__ = ["DEV_ITEMS", "DepthPlan", "TaskPlan", "plan_study"]

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


def plan_study(study: object, artifact_dir: Path, margin: float = 1.0, target: float = 0.8) -> list[TaskPlan]:
    """The plan of every task of a pilot study (an Optuna study with freezestats runs)."""
    runs = results_table(study)
    if runs.empty:
        raise StorageError("The pilot study has no complete runs to plan from.")
    populations = pool_populations(getattr(study, "user_attrs", {}))
    items = item_predictions(runs, artifact_dir)
    pool = pool_item_predictions(runs, artifact_dir)
    plans = []
    for decision in decide(runs, items, pool, margin=margin, target=target, populations=populations):
        depths = tuple(
            _depth_plan(size.train_size, row.verdict.evidence, row.seconds, decision.items, margin, target)
            for size in decision.sizes
            for row in size.rows
        )
        plans.append(TaskPlan(decision.task, decision.population, decision.items, margin, target, depths))
    return plans


def _depth_plan(
    size: int, evidence: DepthEvidence, seconds: float, n_items: int, margin: float, target: float
) -> DepthPlan:
    cost = evidence.cost
    plan = (None, None) if cost is None else tuple(
        seeds_needed(cost.parts, items, margin, target) for items in (n_items, DEV_ITEMS)
    )  # fmt: skip
    return DepthPlan(size, evidence.depth, evidence.seeds, cost, plan[0], plan[1], seconds)

"""The statistics of an adaptive study, read from its stored trials: each depth's decision, the next round, the replay.

The runner's round loop (:mod:`freezestats.runner.adaptive`) may not import the statistics, so this module is its
decision step (:func:`decide_round`), built from the tidy results table (:func:`freezestats.results.export.
results_table`) and the per-item predictions (:mod:`freezestats.results.item_predictions`), as
:func:`freezestats.stats.sequential.sequential_decisions` takes them, one task at a time. ``status`` and the report
read the same tables (:func:`study_decisions`, :func:`cell_seeds`, :func:`study_replay`), so what they show is what
the loop decided on.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
import pandas as pd

from freezestats.exceptions import StorageError
from freezestats.results.export import results_table
from freezestats.results.item_predictions import item_predictions
from freezestats.runner.adaptive import RoundDecision
from freezestats.spec.study import StudySpec

if TYPE_CHECKING:
    from freezestats.spec.adaptive import AdaptiveSpec
    from freezestats.stats.sequential import SequentialPlan

__all__ = [
    "DECIDED",
    "cell_seeds",
    "decide_round",
    "grid_runs",
    "sequential_plan",
    "study_decisions",
    "study_replay",
]

DECIDED = ("noninferior", "inferior")
"""The decisions that close a comparison (``open`` goes on; ``exhausted``: open at ``max_seeds``, no seed left)."""


def sequential_plan(adaptive: AdaptiveSpec) -> SequentialPlan:
    """The statistics' plan from the spec's ``[adaptive]`` table (the budget stays with the runner)."""
    from freezestats.stats.sequential import SequentialPlan

    return SequentialPlan(**adaptive.plan_kwargs())


def grid_runs(study: optuna.Study) -> pd.DataFrame:
    """The study's finished grid runs (the tidy table ``freezestats export`` writes), search runs left out."""
    runs = results_table(study)
    return runs[runs["role"] == "grid"].reset_index(drop=True) if len(runs) else runs


def _items(study: optuna.Study, runs: pd.DataFrame) -> pd.DataFrame | None:
    """The runs' per-item predictions, or ``None`` when the study kept none (the decisions are then seed-only)."""
    folder = study.user_attrs.get("artifact_dir")
    if not folder or not Path(folder).is_dir():
        return None
    try:
        return item_predictions(runs, folder)
    except StorageError:
        return None


def _by_task(study: optuna.Study, spec: StudySpec, runs: pd.DataFrame | None = None) -> dict[str, Any]:
    runs = grid_runs(study) if runs is None else runs
    items = _items(study, runs) if len(runs) else None
    out = {}
    for task in spec.tasks:
        task_runs = runs[runs["task"] == task].reset_index(drop=True) if len(runs) else runs
        if len(task_runs):
            task_items = None if items is None else items[items["task"] == task].reset_index(drop=True)
            out[task] = (task_runs, task_items)
    return out


def study_decisions(study: optuna.Study, spec: StudySpec, response: str = "heldout") -> pd.DataFrame:
    """Each (task, size, depth) comparison with the reference as the stored trials decide it now.

    Returns
    -------
    pd.DataFrame
        ``sequential_decisions``' columns (train_size, frozen_layers, reference, seeds, look, estimate, lower,
        upper, alpha, decision, population, procedure) with ``task`` first; empty before any run finished.
    """
    from freezestats.stats.sequential import sequential_decisions

    plan = sequential_plan(_adaptive(spec))
    frames = []
    for task, (task_runs, task_items) in _by_task(study, spec).items():
        table = sequential_decisions(task_runs, task_items, plan, response=response, metric=spec.metric_for(task))
        frames.append(table.assign(task=task))
    if not frames:
        return pd.DataFrame(columns=["task", "train_size", "frozen_layers", "seeds", "decision"])
    table = pd.concat(frames, ignore_index=True)
    return table[["task", *[c for c in table.columns if c != "task"]]]


def decide_round(study: optuna.Study, spec: StudySpec) -> RoundDecision:
    """The decision step of :func:`freezestats.runner.adaptive.run_adaptive`: the seeds each open cell needs next."""
    from freezestats.stats.sequential import next_seeds

    plan = sequential_plan(_adaptive(spec))
    decisions = study_decisions(study, spec)
    targets: dict[tuple[str, int, int], int] = {}
    for task, task_decisions in decisions.groupby("task", sort=False):
        wanted = next_seeds(task_decisions.drop(columns="task").reset_index(drop=True), plan)
        for row in wanted.itertuples(index=False):
            targets[(str(task), int(row.train_size), int(row.frozen_layers))] = int(row.seeds_target)
    decided = decisions["decision"].isin(DECIDED) if len(decisions) else pd.Series(dtype=bool)
    n_open = int((decisions["decision"] == "open").sum()) if len(decisions) else 0
    return RoundDecision(targets=targets, n_open=n_open, n_decided=int(decided.sum()))


def cell_seeds(study: optuna.Study, spec: StudySpec) -> pd.DataFrame:
    """Per (task, size, depth): seeds finished, and the decision (``reference`` for frozen 0), for ``status``.

    Columns: task, train_size, frozen_layers, seeds, decision, estimate, lower, look.
    """
    runs = grid_runs(study)
    columns = ["task", "train_size", "frozen_layers", "seeds", "decision", "estimate", "lower", "look"]
    if not len(runs):
        return pd.DataFrame(columns=columns)
    seeds = runs.groupby(["task", "train_size", "frozen_layers"]).size().rename("seeds").reset_index()
    decisions = study_decisions(study, spec)
    shown = ["task", "train_size", "frozen_layers", "decision", "estimate", "lower", "look"]
    table = seeds.merge(decisions[[c for c in shown if c in decisions.columns]], how="left")
    table["decision"] = table["decision"].where(table["frozen_layers"] != 0, "reference").fillna("open")
    return table.reindex(columns=columns).sort_values(["task", "train_size", "frozen_layers"], ignore_index=True)


def study_replay(study: optuna.Study, spec: StudySpec, response: str = "heldout") -> pd.DataFrame:
    """:func:`freezestats.stats.sequential.replay` of every task (``task`` first): per cell and look, the decision,
    its round and the seeds used (the report's "How the seeds were spent")."""
    from freezestats.stats.sequential import replay

    plan = sequential_plan(_adaptive(spec))
    frames = [
        replay(task_runs, task_items, plan, response=response, metric=spec.metric_for(task)).assign(task=task)
        for task, (task_runs, task_items) in _by_task(study, spec).items()
    ]
    if not frames:
        return pd.DataFrame(columns=["task"])
    table = pd.concat(frames, ignore_index=True)
    return table[["task", *[c for c in table.columns if c != "task"]]]


def _adaptive(spec: StudySpec) -> AdaptiveSpec:
    if spec.adaptive is None:
        raise StorageError(f"Study '{spec.name}' did not run adaptively (its spec has no [adaptive] table).")
    return spec.adaptive

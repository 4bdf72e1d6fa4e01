"""The answer of one task: non-inferiority of each depth, from the contrasts the chosen uncertainty asks for.

Apart from :mod:`freezestats.analysis.task` (which runs every table of a task) because the answer has a choice
of its own: by default each depth's paired contrast over the task (seeds and evaluation items varying) under
the task's graphical family; with ``--uncertainty seeds`` the model's fixed sequence, which speaks of this
evaluation set. Both record which population and procedure the answer used, for every label that names them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from freezestats.analysis.options import AnalysisOptions
from freezestats.analysis.result import SECOND_MODE, Analysis
from freezestats.exceptions import ModelFitError

__all__ = ["answer_as_tests", "answer_contrasts", "item_uncertainty", "task_metric", "two_part_table"]


def two_part_table(runs: pd.DataFrame, response: str, reference: int) -> pd.DataFrame:
    """Contrasts of the expected score with failures in two parts (:mod:`freezestats.stats.failures.two_part`). The
    healthy runs get a variance per cell, the structure ``bench/coverage.py`` validated (README, *Coverage*; with a
    variance per size, frozen 10 at n = 100 fell to 0.86 in scenario b)."""
    from freezestats.stats.failures.two_part import two_part_contrasts

    return two_part_contrasts(runs, response, reference=reference, variance="per_cell")


def answer_contrasts(result: Analysis, runs: pd.DataFrame, task: str, response: str) -> pd.DataFrame | None:
    """The two-part contrasts when the answer is to come from them, else None (the per-size model's).

    Where some cell mixes healthy runs with failed runs far below them (:func:`failures_within_cells`), its
    scores are a healthy spread plus far outliers that no normal model of the cell covers: in scenario b of
    ``bench/coverage.py`` (5% of runs collapse) the per-size model's intervals covered 0.77-0.86 for several
    contrasts, the two-part contrasts at least 0.90 (docs/analysis.md). Where no cell does, the per-size model
    is the one that holds (scenario a) and has the more degrees of freedom. ``settings["answer_from"]`` records
    the choice per task.
    """
    from freezestats.stats.failures.two_part import failures_within_cells

    mixed = failures_within_cells(runs, runs["failed"].fillna(False).astype(bool), response)
    table = result.tables.get("two_part_contrasts")
    mine = None if table is None else table[table["task"] == task].drop(columns="task")
    use = mixed and mine is not None and not mine.empty
    result.settings.setdefault("answer_from", {})[task] = "two_part" if use else "model"
    if mixed and not use:
        result.warnings.append(
            f"{task}: {SECOND_MODE}, but the two-part contrasts could not be computed, so the non-inferiority "
            "answer comes from the mixed model of all runs, whose intervals can be too narrow there "
            "(bench/coverage.py, scenario b)."
        )
    return mine if use else None


def answer_as_tests(
    result: Analysis,
    attempt: Callable[..., None],
    fit: Any,
    runs: pd.DataFrame,
    task: str,
    o: AnalysisOptions,
    two_part: pd.DataFrame | None = None,
) -> None:
    """The headline answer as tests: non-inferiority of each depth (after checking that the reference beats the
    majority baseline), and Lee et al.'s 90% criterion as a linear test.

    ``uncertainty="task"`` (the default) tests each depth's own paired contrast, with the evaluation items'
    variance where per-item predictions exist, under the task's graphical family (:func:`_task_answer`); the
    model's fixed sequence stays beside it as ``noninferiority_model``. ``"seeds"`` answers from the model's
    fixed sequence (``two_part`` contrasts when given, :func:`answer_contrasts`), which speaks of this evaluation
    set only.
    """
    from freezestats import stats

    metric = task_metric(runs)
    used = o.margin if o.margin is not None else stats.default_margin(metric or "accuracy")
    result.settings["margins"][task] = used
    n_sizes = runs["train_size"].nunique()
    # The baseline gates are one per size: Bonferroni over sizes whenever the answer's family is the whole task.
    alpha = 0.05 / n_sizes if o.adjust_across == "sizes" or o.uncertainty == "task" else 0.05
    baseline = None
    if "majority_baseline" in runs.columns and runs["majority_baseline"].notna().all():
        baseline = runs.groupby("train_size")["majority_baseline"].mean()

    def model_sequence() -> pd.DataFrame:
        contrasts = fit if two_part is None else two_part
        return stats.noninferiority_sequence(
            contrasts, margin=used, reference=o.reference, adjust_across=o.adjust_across
        )

    if o.uncertainty == "seeds":
        attempt("noninferiority", task, model_sequence)
        _record_answer(result, task, "evaluation_set", "model")
    else:
        attempt("noninferiority_model", task, model_sequence)
        _task_answer(result, attempt, runs, task, o, used)
    check = None
    if baseline is not None:
        attempt(
            "baseline_check", task, lambda: stats.reference_beats_baseline(fit, baseline, alpha, reference=o.reference)
        )
        table = result.tables.get("baseline_check")
        check = table[table["task"] == task].drop(columns="task") if table is not None else None
    sequence = result.tables.get("noninferiority")
    if sequence is not None and (sequence["task"] == task).any():
        mine = sequence[sequence["task"] == task].drop(columns="task")
        attempt("answer", task, lambda: stats.noninferiority_answer(mine, check))
    attempt("lee_tests", task, lambda: stats.lee_ratio_tests(fit, ratio=0.9, reference=o.reference))


def _task_answer(
    result: Analysis, attempt: Callable[..., None], runs: pd.DataFrame, task: str, o: AnalysisOptions, margin: float
) -> None:
    """The default answer: each depth's paired contrast, over the task where the runs' predictions are stored.

    Without them the contrasts speak of this evaluation set; the answer says so first (``answer_population``)."""
    from freezestats.stats.inference.task_family import task_noninferiority
    from freezestats.stats.items.task_level import task_level_contrasts

    metric = task_metric(runs) or "accuracy"
    items = None if o.items is None else o.items[(o.items["task"] == task) & o.items["trial"].isin(runs["trial"])]
    population = "task" if items is not None and not items.empty else "evaluation_set"

    kept: dict[str, pd.DataFrame] = {}

    def tests() -> pd.DataFrame:
        nonlocal population
        options = {"response": o.response, "metric": metric, "reference": o.reference, "failure_rates": o.failure_rates}
        try:
            contrasts = task_level_contrasts(runs, items, population=population, **options)
        except ModelFitError as err:
            if population != "task":
                raise
            result.warnings.append(f"{task}: the answer speaks of this evaluation set only: {err}")
            population = "evaluation_set"
            contrasts = task_level_contrasts(runs, None, population=population, **options)
        kept["contrasts"] = contrasts
        return task_noninferiority(contrasts, margin=margin)

    attempt("noninferiority", task, tests)
    _record_answer(result, task, population, "paired")
    if "contrasts" in kept:
        _seeds_needed(result, attempt, kept["contrasts"], task, margin)


def _seeds_needed(
    result: Analysis, attempt: Callable[..., None], contrasts: pd.DataFrame, task: str, margin: float
) -> None:
    """Seeds per cell for 80% power of the task-level answer, per (size, depth), the SDs' uncertainty included
    (:mod:`freezestats.stats.inference.task_power`): table ``task_power``, settings ``seeds_needed``."""
    from freezestats.stats.inference.task_power import seeds_needed, task_power

    attempt("task_power", task, lambda: task_power(contrasts, margin=margin, n_sim=1000))
    table = result.tables.get("task_power")
    if table is None or not (table["task"] == task).any():
        return
    need = seeds_needed(table[table["task"] == task].drop(columns="task"))
    result.settings.setdefault("seeds_needed", {})[task] = {
        str(size): {str(r.frozen_layers): (int(r.seeds) if r.reached else None) for r in part.itertuples()}
        for size, part in need.groupby("train_size")
    }


def _record_answer(result: Analysis, task: str, population: str, source: str) -> None:
    """Which population the task's answer speaks of, and by what procedure, for every label that names them."""
    from freezestats.stats.inference.task_family import FAMILY_PROCEDURE

    table = result.tables.get("noninferiority")
    mine = None if table is None else table[table["task"] == task]
    procedure = FAMILY_PROCEDURE if source == "paired" else None
    if procedure is None and mine is not None and not mine.empty:
        procedure = str(mine["family"].iloc[0])
    result.settings.setdefault("answer_population", {})[task] = population
    result.settings.setdefault("answer_procedure", {})[task] = procedure


def task_metric(runs: pd.DataFrame) -> str:
    """The task's metric as the table names it (the most common value of ``metric``), or "" when it has none."""
    if "metric" in runs.columns and runs["metric"].notna().any():
        return str(runs["metric"].mode().iloc[0])
    return ""


def item_uncertainty(
    result: Analysis, attempt: Callable[..., None], runs: pd.DataFrame, items: pd.DataFrame, task: str, response: str
) -> None:
    """The non-inferiority sequence with the items' sampling variance added
    (:mod:`freezestats.stats.items.uncertainty`)."""
    from freezestats.stats.items.uncertainty import noninferiority_with_items

    sequence = result.tables.get("noninferiority")
    if sequence is None or not (sequence["task"] == task).any():
        return
    mine = sequence[sequence["task"] == task].drop(columns="task")
    metric = task_metric(runs) or "accuracy"
    task_items = items[(items["task"] == task) & items["trial"].isin(runs["trial"])]  # not a group's trials
    result.settings["answer_uncertainty"] = "seeds"
    attempt("noninferiority_items", task, lambda: noninferiority_with_items(mine, runs, task_items, response, metric))

"""Analyse a results table: every statistic the report needs, per task, as named tidy tables.

This is the stage between the results table and the report: ``analyze`` runs the model the user asked
for (``mixed``, ``glmm`` or ``ols``) with and without failed runs, and the model-free analyses (cell
summaries, seed spread, failure rates, Lee et al.'s operating point, the comparison with the published
figures), and keeps every table plus the warnings that came up. ``write_analysis`` stores them as
parquet + CSV and ``analysis.json``; nothing is rounded here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from freezestats import __version__
from freezestats.analysis.arms import add_arm_tables, freeze_rows
from freezestats.analysis.options import UNCERTAINTIES, AnalysisOptions
from freezestats.analysis.result import Analysis
from freezestats.analysis.task import TaskAnalysis
from freezestats.analysis.task_metrics import apply_task_metrics
from freezestats.exceptions import ModelFitError
from freezestats.stats.design.input_table import check_results_table, normalize_results, shorten
from freezestats.stats.items.task_two_part import DEFAULT_FAILURE_RATES, FAILURE_RATES

__all__ = ["MODELS", "RESPONSES", "analyze", "load_results", "load_study_record"]

MODELS = ("mixed", "glmm", "ols")
VARIANCES = ("per_size", "per_cell", "pooled")  # the mixed model's residual variance (stats.fit_mixed)
RESPONSES = ("best_dev", "final_dev", "heldout")
RESPONSE_NOTES = {
    "best_dev": "best validation score during training: the blog's number; the same data selects and scores the "
    "checkpoint, so it is biased upwards (more so for noisier, smaller-data cells)",
    "final_dev": "score after the last step: no checkpoint selection, no selection bias",
    "heldout": "checkpoint selected on one fixed half of the validation set and scored on the other: unbiased",
}


def load_results(
    storage: str | None = None, results: str | Path | None = None, study_name: str | None = None
) -> pd.DataFrame:
    """The results table from a study database or an exported .parquet/.csv file (exactly one of them)."""
    if (storage is None) == (results is None):
        raise ModelFitError("Give exactly one of --storage (a study database) or --results (an exported table).")
    if storage is not None:
        from freezestats.results.export import results_table
        from freezestats.study.storage import open_storage
        from freezestats.study.trials import load_study

        return results_table(load_study(open_storage(storage, must_exist=True), study_name))
    from freezestats.results.export import read_renamed_columns

    path = Path(results)
    if not path.is_file():
        raise ModelFitError(f"No results table at {str(path)!r}.")
    try:
        table = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except Exception as err:  # pyarrow/pandas raise many types for unreadable files
        raise ModelFitError(f"Cannot read {path} as a results table: {err}") from err
    return read_renamed_columns(table, str(path))


def _trained_alone(grid: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The runs of tasks trained alone, and how many rows of task groups were left out.

    A group trial gives a row per task; pooled with the single-task runs of that task it would mix two
    experiments (and rows of one trial, which share an encoder, as if independent).
    """
    if "trained_with" not in grid.columns:
        return grid, 0
    alone = grid["trained_with"].isna() | (grid["trained_with"] == grid["task"])
    return grid[alone], int((~alone).sum())


def _cross_encoded(data: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The rows of cross-encoded trials (every row of a table from before ``pair_encoding``), and how many
    ``bi`` rows were left out: pooled with the cross runs of their cell they would look like extra seeds."""
    if "pair_encoding" not in data.columns:
        return data, 0
    cross = data["pair_encoding"].isna() | (data["pair_encoding"] == "cross")
    return data[cross], int((~cross).sum())


def _pair_encodings(
    attempt: Callable[..., None], grid: pd.DataFrame, tasks: list[str], response: str, adjust: str
) -> None:
    """Per task with bi runs: bi minus cross in each cell where both ran
    (:mod:`freezestats.stats.comparisons.pair_encoding`)."""
    from freezestats.stats.comparisons.pair_encoding import pair_encoding_contrasts

    for task in tasks:
        rows = grid[grid["task"] == task]
        if rows["pair_encoding"].eq("bi").any():
            make = lambda rows=rows, task=task: pair_encoding_contrasts(rows, response, task=task, adjust=adjust)  # noqa: E731
            attempt("pair_encoding", task, make)


def _shared_encoder(
    attempt: Callable[..., None], warnings: list[str], grid: pd.DataFrame, tasks: list[str], response: str
) -> None:
    """Per task trained both alone and in a group: the shared-encoder contrasts (one model per task), at the
    train sizes where every cell has its two runs (:func:`_finished_sizes`)."""
    from freezestats.stats.comparisons.shared_encoder import shared_encoder_contrasts

    for task in tasks:
        rows = grid[grid["task"] == task]
        if (rows["trained_with"].notna() & (rows["trained_with"] != task)).any():
            rows = _finished_sizes(rows, task, warnings)
            make = lambda rows=rows, task=task: shared_encoder_contrasts(rows, response, task=task)  # noqa: E731
            attempt("shared_encoder", task, make)


def _finished_sizes(rows: pd.DataFrame, task: str, warnings: list[str]) -> pd.DataFrame:
    """The task's rows at the train sizes where every (setting, frozen depth) cell has two runs, with a warning
    naming the sizes left out and their short cells; all rows where no size is finished (the contrasts then
    refuse, naming the cells). A study still running (the group's largest size takes longest) gets its answer
    at the sizes that are done instead of none."""
    from freezestats.stats.comparisons.shared_encoder import training_setting
    from freezestats.stats.design.checks import unreplicated_cells

    setting = rows.assign(setting=training_setting(rows, task))
    short = unreplicated_cells(setting, ["setting", "frozen_layers"])
    unfinished = sorted({n for _, n, _ in short})
    if not unfinished or set(unfinished) == set(rows["train_size"].astype(int)):
        return rows
    cells = ", ".join(f"{where}, frozen {k} at n = {n} ({runs})" for (where, k), n, runs in short)
    done = sorted(set(rows["train_size"].astype(int)) - set(unfinished))
    warnings.append(
        f"{task}: shared_encoder at n = {', '.join(map(str, done))} only; n = {', '.join(map(str, unfinished))} "
        f"has cells with fewer than two runs (runs in brackets): {cells}."
    )
    return rows[~rows["train_size"].astype(int).isin(unfinished)]


def load_study_record(storage: str, study_name: str | None = None) -> dict[str, Any]:
    """The study's name, stored spec (plain data, as kept in the database) and provenance.

    The report's Methods and colophon are written from these, so that they describe what was run, not what a
    spec file says today. The spec is returned as stored (not re-validated), so keys added by newer versions
    of freezestats are kept and older studies still load.
    """
    from freezestats.study.storage import open_storage
    from freezestats.study.trials import SPEC_ATTR, load_study

    study = load_study(open_storage(storage, must_exist=True), study_name)
    attrs = study.user_attrs
    return {
        "name": study.study_name,
        "spec": attrs.get(SPEC_ATTR, {}),
        "spec_hash": attrs.get("spec_hash"),
        "provenance": attrs.get("provenance", {}),
        **({"adaptive": attrs["adaptive"]} if "adaptive" in attrs else {}),  # the rounds of an adaptive study
    }


def analyze(
    data: pd.DataFrame,
    *,
    model: str = "mixed",
    response: str | None = None,
    variance: str = "per_size",
    tasks: list[str] | None = None,
    reference: int = 0,
    margin: float | None = None,
    adjust: str = "holm",
    delta: float | None = None,
    n_boot: int = 2000,
    pooled: bool = False,
    adjust_across: str = "none",
    bootstrap_tests: int = 0,
    progress: Callable[[int, int], object] | None = None,
    items: pd.DataFrame | None = None,
    uncertainty: str = "task",
    task_metrics: Mapping[str, str] | None = None,
    failure_rates: str = DEFAULT_FAILURE_RATES,
    pool: pd.DataFrame | None = None,
    populations: Mapping[str, str] | None = None,
) -> Analysis:
    """Run every analysis of the study on ``data`` (the results table), one task at a time.

    ``bootstrap_tests > 0`` adds a parametric-bootstrap likelihood-ratio test of the frozen × size interaction
    (``interaction_test_bootstrap``) with that many draws, reporting each draw to ``progress(done, total)``; it is
    not in the default path, which stays within seconds for a 350-run table.

    ``uncertainty`` says what the answer's intervals let vary. ``"task"`` (default): each depth's own contrast with
    the reference, paired by seed, with the evaluation items' sampling variance from ``items`` (the per-item
    predictions, :func:`freezestats.results.item_predictions.item_predictions`), so the answer speaks of new
    seeds *and new examples* of the task; without ``items`` it speaks of this evaluation set and says so. The
    family is the task (every size and depth), under a graphical procedure
    (:mod:`freezestats.stats.inference.task_family`). ``"seeds"``: the model's fixed sequence per size, which
    speaks of this evaluation set (then ``items`` adds ``noninferiority_items`` beside it).

    ``task_metrics`` (``{"cola": "mcc"}``) judges a task on another metric than its runs recorded, re-scored
    from ``items`` (:mod:`freezestats.analysis.task_metrics`); such a task is analysed at its last checkpoint
    unless ``response`` is given (default ``heldout``).

    ``failure_rates`` picks the failure part of the task-level answer's two-part contrasts
    (:data:`~freezestats.stats.items.task_two_part.FAILURE_RATES`; ``"pooled_joint"``, the joint draws, by default:
    :data:`~freezestats.stats.items.task_two_part.DEFAULT_FAILURE_RATES`).
    """
    from freezestats.stats.descriptive.reference import load_reference

    response_given = response is not None
    options = AnalysisOptions(
        model=model,
        response=response or "heldout",
        variance=variance,
        reference=reference,
        margin=margin,
        adjust=adjust,
        adjust_across=adjust_across,
        n_boot=n_boot,
        bootstrap_tests=bootstrap_tests,
        progress=progress,
        items=items,
        uncertainty=uncertainty,
        failure_rates=failure_rates,
    )
    _check_options(options)
    check_results_table(data, options.response, model=model, tasks=tasks, reference=reference)
    data, per_task = apply_task_metrics(
        normalize_results(data), items, task_metrics or {}, options.response, response_given
    )
    every = data
    data, n_bi = _cross_encoded(every)
    all_grid = data[data["role"] == "grid"]
    arm_grid, n_grouped = _trained_alone(all_grid)
    grid, arm_note = freeze_rows(arm_grid)  # the freeze model sees the freeze arm; every arm: the arm tables
    if grid.empty:
        raise ModelFitError(
            f"The results table has no runs of the freeze arm trained alone (arms present: {_arm_names(arm_grid)}); "
            "every analysis compares with full fine-tuning (the freeze arm at depth 0): add those runs."
        )
    tasks = tasks or sorted(arm_grid["task"].unique())
    # rows set aside from the freeze model are stated beside n_runs, so that "54 runs" is not read as the study
    counts = {"n_runs": len(grid), "n_rows_bi": n_bi, "n_rows_grouped": n_grouped, "pooled": pooled}
    settings = _settings(options, per_task, tasks, delta, counts)
    result = Analysis(settings=settings, warnings=per_task["notes"] + _set_aside_notes(n_bi, n_grouped))
    steps = TaskAnalysis(result, options)
    blog_tasks = set(load_reference()["task"])
    for task in tasks:
        steps.run(task, grid[grid["task"] == task], compare_with_blog=task in blog_tasks)
    _beside_the_freeze_model(steps, tasks, every=every, all_grid=all_grid, arm_grid=arm_grid, arm_note=arm_note)
    if pooled:
        _pooled_tables(result, grid[grid["task"].isin(tasks)], options.response)
    if items is not None:
        _decision_table(result, grid[grid["task"].isin(tasks)], items, pool, margin, populations)
    result.warnings = list(dict.fromkeys(result.warnings))  # a reason met by two steps' shared input is said once
    if "fixed_effects" not in result.tables:
        raise ModelFitError(_no_model_reason(result.warnings))
    return result


def _settings(
    options: AnalysisOptions, per_task: dict, tasks: list[str], delta: float | None, counts: dict[str, Any]
) -> dict[str, Any]:
    """The analysis's recorded settings: what was asked for, what each task was judged on, and the rows'
    ``counts`` (in the order the stored analyses have them)."""
    return {
        "model": options.model,
        "response": options.response,
        "response_note": RESPONSE_NOTES[options.response],
        "variance": options.variance if options.model == "mixed" else None,
        "reference": options.reference,
        "margin": options.margin,
        "adjust": options.adjust,
        "adjust_across": options.adjust_across,
        "uncertainty": options.uncertainty,
        "failure_rates": options.failure_rates,
        "metric_of": per_task["metric_of"],
        "response_of": per_task["response_of"],
        "selected_on": per_task["selected_on"],
        "margins": {},
        "delta": delta or options.margin or 0.02,
        "tasks": tasks,
        **counts,
        "freezestats_version": __version__,
    }


def _beside_the_freeze_model(
    steps: TaskAnalysis,
    tasks: list[str],
    *,
    every: pd.DataFrame,
    all_grid: pd.DataFrame,
    arm_grid: pd.DataFrame,
    arm_note: str | None,
) -> None:
    """The tables of the rows the freeze model leaves out: task groups against their runs alone (when
    ``all_grid``, every cross-encoded grid row, has more than ``arm_grid``, those trained alone), the other arms
    (``arm_note``), and bi- against cross-encoded pairs (when ``every`` row has bi-encoded ones)."""
    from freezestats import stats

    n_bi, n_grouped = steps.result.settings["n_rows_bi"], steps.result.settings["n_rows_grouped"]
    warnings, options = steps.result.warnings, steps.options
    if n_grouped:
        _shared_encoder(steps.attempt, warnings, all_grid, tasks, options.response)
    if arm_note:
        warnings.append(arm_note)

        def margin_of(task: str) -> float:
            metric = arm_grid.loc[arm_grid["task"] == task, "metric"] if "metric" in arm_grid else pd.Series()
            default = stats.default_margin(str(metric.mode().iloc[0]) if metric.notna().any() else "accuracy")
            return options.margin or default

        add_arm_tables(steps.attempt, arm_grid, tasks, options.response, margin_of)
    if n_bi:
        _pair_encodings(steps.attempt, every[every["role"] == "grid"], tasks, options.response, options.adjust)


def _decision_table(
    result: Analysis,
    grid: pd.DataFrame,
    items: pd.DataFrame,
    pool: pd.DataFrame | None,
    margin: float | None,
    populations: Mapping[str, str] | None,
) -> None:
    """The answer (:mod:`freezestats.analysis.decision`) as the ``decision`` table; ``margin`` is in the metric's
    units (0.01 = 1 point), 1 point by default."""
    from freezestats.analysis.decision import decide

    try:
        decisions = decide(grid, items, pool, margin=100 * margin if margin else 1.0, populations=populations)
    except (ModelFitError, ValueError, KeyError) as err:
        result.warnings.append(f"decision not computed: {err}")
        return
    tables = [d.table() for d in decisions if d.sizes]
    if tables:
        result.tables["decision"] = pd.concat(tables, ignore_index=True)


def _no_model_reason(warnings: list[str]) -> str:
    """Why no model could be fitted, in one line: the steps' reasons, each said once (every step failing for
    the same reason, e.g. a design the model cannot estimate, reads as that reason alone)."""
    reasons = list(dict.fromkeys(w.split(" not fitted: ", 1)[-1].split(" not computed: ", 1)[-1] for w in warnings))
    return shorten("No model could be fitted: " + " | ".join(reasons))


def _arm_names(grid: pd.DataFrame) -> list[str]:
    return sorted(map(str, grid["arm"].dropna().unique())) if "arm" in grid.columns else []


def _set_aside_notes(n_bi: int, n_grouped: int) -> list[str]:
    """Warnings naming the rows the freeze model leaves to their own tables (bi-encoded, trained in groups)."""
    notes = []
    if n_bi:
        notes.append(
            f"{n_bi} rows were trained with pair_encoding = 'bi': every analysis but the pair_encoding table (bi "
            "minus cross, paired by seed) uses the cross-encoded runs."
        )
    if n_grouped:
        notes.append(
            f"{n_grouped} rows were trained in task groups (trained_with): each task's freeze analysis uses its runs "
            "trained alone, and the group rows are compared with those in the shared_encoder table."
        )
    return notes


def _check_options(options: AnalysisOptions) -> None:
    """One clear error for each option ``analyze`` cannot work with, before any fit (the table's checks are
    :func:`freezestats.stats.design.input_table.check_results_table`)."""
    margin = options.margin
    for flag, value, allowed in (("--model", options.model, MODELS), ("--metric", options.response, RESPONSES),
                                 ("--variance", options.variance, VARIANCES),
                                 ("--uncertainty", options.uncertainty, UNCERTAINTIES),
                                 ("--failure-rates", options.failure_rates, FAILURE_RATES),
                                 ("--adjust-across", options.adjust_across, ("none", "sizes"))):  # fmt: skip
        if value not in allowed:
            raise ModelFitError(f"`{flag}` must be one of {list(allowed)}, but got {value!r}.")
    if margin is not None and not (math.isfinite(margin) and margin > 0):
        raise ModelFitError(f"`--margin` must be > 0, but got {margin}.")


def _pooled_tables(result: Analysis, grid: pd.DataFrame, response: str) -> None:
    """``--pooled``: one model of every chosen task together, and the test that freezing acts alike in each."""
    from freezestats.stats.comparisons.pooled_tasks import fit_pooled
    from freezestats.stats.comparisons.task_interaction import task_interaction_test

    try:
        fit = fit_pooled(grid, response)
        result.tables["pooled_fixed_effects"] = fit.fixed_effects
        result.tables["pooled_variance_components"] = fit.variance_components
        result.tables["task_interaction_test"] = task_interaction_test(grid, response, fit=fit)
        result.warnings.extend(f"pooled model: {w}" for w in fit.warnings)
    except ModelFitError as err:
        result.warnings.append(f"pooled model not fitted: {err}")

"""What a report is made from: the analysis, the runs it analysed, and the stored study (spec, provenance).

Three ways in, as on the command line: a study database (``--storage``), an exported table
(``--results``), or a folder written by ``freezestats analyze`` (``--analysis``). Whatever is missing is
made with the existing stages (``analysis.analyze``, ``stats.fit_ols``), never re-implemented here; what
cannot be had (no spec when only a table was given) is left ``None`` and the report says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from freezestats.analysis.pipeline import analyze, load_results, load_study_record
from freezestats.analysis.result import RESULTS_FILE, STUDY_FILE, Analysis
from freezestats.analysis.result import read_analysis as _read_analysis
from freezestats.exceptions import FreezestatsError, ModelFitError
from freezestats.stats.items.task_two_part import DEFAULT_FAILURE_RATES

__all__ = ["ReportInputs", "gather_inputs", "ols_cross_check"]


@dataclass
class ReportInputs:
    """Everything the document is written from; ``runs`` and ``study`` may be missing (then said so)."""

    analysis: Analysis
    runs: pd.DataFrame | None = None
    study: dict[str, Any] | None = None
    ols_contrasts: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)
    ran_analysis: bool = False
    items: pd.DataFrame | None = None
    """The runs' per-item predictions, when the analysis was run here with them (an adaptive study's replay)."""

    @property
    def spec(self) -> dict[str, Any]:
        """The stored spec as plain data ({} when unknown)."""
        return dict((self.study or {}).get("spec") or {})

    @property
    def study_name(self) -> str:
        if self.study and self.study.get("name"):
            return str(self.study["name"])
        if self.runs is not None and "study" in self.runs.columns and self.runs["study"].notna().any():
            return str(self.runs["study"].dropna().iloc[0])
        return "unnamed study"

    def metric_of(self, task: str) -> str:
        """The metric the analysis judged the task on (``--task-metric``), else the one recorded with the runs,
        else the spec's, else the task's default."""
        judged = self.analysis.settings.get("metric_of", {}).get(task)
        if judged:
            return str(judged)
        runs = self.task_runs(task)
        if runs is not None and "metric" in runs.columns and runs["metric"].notna().any():
            return str(runs["metric"].dropna().iloc[0])
        primary = self.spec.get("primary_metric") or {}
        if task in primary:
            return str(primary[task])
        try:
            from freezestats.tasks import get_task

            return get_task(task).metrics[0]
        except Exception:  # an unknown task name in an old analysis: a neutral word is enough for a label
            return "score"

    def response_of(self, task: str) -> str:
        """The response the analysis used for ``task``: its own (a task re-scored on another metric is analysed
        at its last checkpoint) or the study's."""
        settings = self.analysis.settings
        return str(settings.get("response_of", {}).get(task, settings["response"]))

    def task_runs(self, task: str, all_arms: bool = False) -> pd.DataFrame | None:
        """The grid runs of one task (search runs are not part of the grid's statistics) that the freeze sections
        plot: trained alone, read as one input (``cross``: bi runs have their own section), and of the freeze arm
        only unless ``all_arms`` (the arm section's)."""
        if self.runs is None:
            return None
        from freezestats.analysis.arms import freeze_rows

        runs = self.runs[self.runs["task"] == task]
        if "role" in runs.columns:
            runs = runs[runs["role"].fillna("grid") == "grid"]
        if "trained_with" in runs.columns:
            runs = runs[runs["trained_with"].isna() | (runs["trained_with"] == task)]
        if "pair_encoding" in runs.columns:
            runs = runs[runs["pair_encoding"].fillna("cross") == "cross"]
        return runs if all_arms else freeze_rows(runs)[0]


def gather_inputs(
    *,
    storage: str | None = None,
    results: str | Path | None = None,
    predictions: str | Path | None = None,
    analysis_dir: str | Path | None = None,
    study_name: str | None = None,
    model: str = "mixed",
    metric: str | None = None,
    variance: str = "per_size",
    margin: float | None = None,
    n_boot: int = 2000,
    uncertainty: str = "task",
    failure_rates: str = DEFAULT_FAILURE_RATES,
    task_metrics: Mapping[str, str] | None = None,
) -> ReportInputs:
    """Load or compute the analysis, the runs and the study record (see the module docstring)."""
    if storage is not None and results is not None:
        raise ModelFitError("Give at most one of --storage (a study database) or --results (an exported table).")
    runs: pd.DataFrame | None = None
    study: dict[str, Any] | None = None
    notes: list[str] = []
    items: pd.DataFrame | None = None
    if analysis_dir is not None:
        folder = Path(analysis_dir)
        analysis = _read_analysis(folder)
        if (folder / RESULTS_FILE).is_file():
            runs = pd.read_parquet(folder / RESULTS_FILE)
        if (folder / STUDY_FILE).is_file():
            try:
                study = json.loads((folder / STUDY_FILE).read_text())
            except ValueError as err:
                raise ModelFitError(f"{folder / STUDY_FILE} is not valid JSON: {err}") from err
        if runs is None and (storage is not None or results is not None):
            runs = load_results(storage, results, study_name)
        if study is None and storage is not None:
            study = load_study_record(storage, study_name)
        ran = False
    else:
        if storage is None and results is None:
            from freezestats.study.storage import DEFAULT_STORAGE

            storage = DEFAULT_STORAGE
        runs = load_results(storage, results, study_name)
        if storage is not None:
            study = load_study_record(storage, study_name)
        from freezestats.results.item_predictions import load_item_table, load_pool_table

        items, why_not = load_item_table(storage, predictions, study_name, runs=runs)
        pool, populations = load_pool_table(storage, predictions, study_name, runs) if items is not None else (None, {})
        analysis = analyze(
            runs,
            model=model,
            response=metric,
            variance=variance,
            margin=margin,
            n_boot=n_boot,
            items=items,
            uncertainty=uncertainty,
            failure_rates=failure_rates,
            task_metrics=task_metrics,
            pool=pool,
            populations=populations,
        )
        if why_not:
            analysis.warnings.append(why_not)
        if task_metrics:  # the figures show the runs on the metric the analysis judged them on
            from freezestats.analysis.task_metrics import apply_task_metrics

            runs = apply_task_metrics(runs, items, task_metrics, metric or "heldout", metric is not None)[0]
        ran = True
    if runs is None:
        notes.append(
            "The analysed runs are not available (the analysis folder has no results.parquet), so the figures "
            "that show single runs and their cost are left out; give --storage or --results to add them."
        )
    if study is None:
        notes.append(
            "The study spec is not available (the report was built without the study database), so Methods "
            "describes the grid as read from the results."
        )
    inputs = ReportInputs(analysis=analysis, runs=runs, study=study, notes=notes, ran_analysis=ran, items=items)
    inputs.ols_contrasts = ols_cross_check(inputs)
    return inputs


def ols_cross_check(inputs: ReportInputs) -> pd.DataFrame | None:
    """Contrasts vs the reference level from the cluster-robust OLS fit, to set beside the model's.

    Only when the runs are at hand and the analysis' model is not already OLS; a fit that fails is left
    out and noted (``inputs.notes``), because the cross-check must not stop the report.
    """
    settings = inputs.analysis.settings
    if inputs.runs is None or settings.get("model") == "ols":
        return None
    from freezestats.stats.inference.emm import contrasts_vs_reference
    from freezestats.stats.models.ols import fit_ols

    parts = []
    for task in settings.get("tasks", []):
        runs = inputs.task_runs(task)
        if runs is None or runs.empty:
            continue
        try:
            fit = fit_ols(runs, inputs.response_of(task))
            table = contrasts_vs_reference(fit, int(settings.get("reference", 0)), settings.get("adjust", "holm"))
        except (FreezestatsError, ValueError) as err:
            inputs.notes.append(f"{task}: the OLS cross-check could not be fitted: {err}")
            continue
        parts.append(table.assign(task=task))
    return pd.concat(parts, ignore_index=True) if parts else None

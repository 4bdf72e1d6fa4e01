"""Each task judged on its own metric: ``--task-metric cola=mcc`` re-scores a task's runs before any analysis.

A study's runs carry the metric its spec named; a reader judges a task by its official metric. Where the two
differ (the blog protocol scores CoLA by accuracy; GLUE by MCC), the runs are scored again from their stored
predictions (:func:`freezestats.results.rescore.rescore_runs`). Their ``best`` and ``heldout`` checkpoints were
chosen on the old metric, so a re-scored task is analysed at its **last** checkpoint (``final_dev``) unless the
response was asked for explicitly: a checkpoint picked by accuracy at step 1 of 20, at the majority class,
would otherwise decide an MCC analysis. Which metric, checkpoint and selection rule each task used is recorded
in the settings, for every label that names them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from freezestats.exceptions import ModelFitError

__all__ = ["CHECKPOINT_RULES", "apply_task_metrics", "parse_task_metrics"]

#: What each response's checkpoint is, in the words the report and summary use.
CHECKPOINT_RULES = {
    "heldout": "the checkpoint best on one half of the validation set, scored on the other half",
    "best_dev": "the checkpoint best on the validation set, scored on that same set (biased upward)",
    "final_dev": "the last checkpoint, scored on the validation set (no selection)",
}


def parse_task_metrics(pairs: list[str] | None) -> dict[str, str]:
    """``["cola=mcc", ...]`` (the command line's ``--task-metric``) as ``{"cola": "mcc"}``, checked."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        task, sep, metric = pair.partition("=")
        if not sep or not task.strip() or not metric.strip():
            raise ModelFitError(f"`--task-metric` takes TASK=METRIC (e.g. cola=mcc), but got {pair!r}.")
        out[task.strip()] = metric.strip()
    return out


def apply_task_metrics(
    data: pd.DataFrame,
    items: pd.DataFrame | None,
    task_metrics: Mapping[str, str],
    response: str,
    response_given: bool,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``data`` with each task of ``task_metrics`` re-scored on its metric, and the per-task settings.

    Returns the table and ``{"metric_of": {task: metric}, "response_of": {task: response},
    "selected_on": {task: metric}, "notes": [...]}``. A task whose runs already carry the metric is left as
    it is. Raises :class:`~freezestats.exceptions.ModelFitError` (one line) for a task the table lacks, an
    unknown metric, or a re-scoring without per-item predictions.
    """
    from freezestats.results.rescore import rescore_runs
    from freezestats.tasks.metrics import METRICS

    settings: dict[str, Any] = {"metric_of": {}, "response_of": {}, "selected_on": {}, "notes": []}
    tasks = set(data["task"].astype(str))
    for task, metric in task_metrics.items():
        if task not in tasks:
            raise ModelFitError(
                f"`--task-metric {task}={metric}`: the table has no task {task!r} (has {sorted(tasks)})."
            )
        if metric not in METRICS:
            raise ModelFitError(f"`--task-metric {task}={metric}`: the metrics are {sorted(METRICS)}.")
        rows = data["task"].astype(str) == task
        stored = str(data.loc[rows, "metric"].mode().iloc[0]) if "metric" in data.columns else ""
        settings["metric_of"][task] = metric
        if stored == metric:
            continue
        if items is None:
            raise ModelFitError(
                f"`--task-metric {task}={metric}`: the runs were scored on {stored or 'another metric'}, and scoring "
                "them again needs their per-item predictions (--predictions, or a study database with artifacts)."
            )
        rescored = rescore_runs(data[rows], items[items["task"].astype(str) == task], metric)
        data = pd.concat([data[~rows], rescored], ignore_index=True)
        settings["selected_on"][task] = stored
        if not response_given and response in ("heldout", "best_dev"):
            settings["response_of"][task] = "final_dev"
            settings["notes"].append(
                f"{task}: scored on {metric} from the stored predictions at its last checkpoint (final_dev): its "
                f"runs chose their best checkpoints on {stored}, so those checkpoints say nothing of {metric}."
            )
    return data, settings

"""When the chosen checkpoints were taken: per cell, the evaluation each run's checkpoint came from.

A run scored at its "best" checkpoint is only as good as the choice: on CoLA's imbalanced dev set the checkpoint
best by accuracy came at evaluation 1-3 of 20, at the majority class, before anything was learned. The table
makes such a choice visible, per cell, so that a score taken at the first evaluations is read as what it is.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from freezestats.report.figures import frozen_label, frozen_order
from freezestats.report.inputs import ReportInputs

__all__ = ["checkpoint_section", "checkpoint_table"]

#: The run column holding the evaluation index each response's checkpoint came from.
STEP_COLUMN = {"heldout": "heldout_step", "best_dev": "best_step", "final_dev": "best_step"}


def checkpoint_table(runs: pd.DataFrame, column: str) -> pd.DataFrame:
    """Rows train sizes, columns frozen levels, cells ``median [min–max]`` of ``column`` over the cell's runs."""
    levels = frozen_order(runs["frozen_layers"].unique())
    rows = []
    for size, at in runs.groupby("train_size"):
        row = {"n": str(int(size))}
        for level in levels:
            steps = at.loc[at["frozen_layers"] == level, column].dropna().astype(int)
            row[frozen_label(level)] = f"{int(steps.median())} [{steps.min()}–{steps.max()}]" if len(steps) else "–"
        rows.append(row)
    return pd.DataFrame(rows)


def checkpoint_section(inputs: ReportInputs, w: Any) -> str:
    """One table per task: where the checkpoint the analysis scores (or, for the last checkpoint, the one the
    runs chose and the analysis set aside) fell among the run's evaluations."""
    parts = []
    for task in inputs.analysis.settings.get("tasks", []):
        runs = inputs.task_runs(task)
        response = inputs.response_of(task)
        column = STEP_COLUMN.get(response, "best_step")
        if runs is None or runs.empty or column not in runs.columns or runs[column].isna().all():
            continue
        last = response == "final_dev"
        caption = (
            f"{task}: at which evaluation (0 = the first, {int(runs[column].max())} = the latest seen) each run's "
            + (
                "best-on-dev checkpoint fell, median [min–max] over the cell's runs; the analysis scores the last "
                "checkpoint instead, since these were chosen on another metric."
                if last
                else f"checkpoint for `{response}` was taken, median [min–max] over the cell's runs."
            )
        )
        parts.append(f"### {task}\n\n" + w.table(checkpoint_table(runs, column), f"{task}-checkpoints", caption))
    return "\n\n".join(parts) or "The runs do not record which evaluation their checkpoints came from."

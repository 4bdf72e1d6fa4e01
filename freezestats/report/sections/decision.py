"""The report's opening: one decision table (task x train size), and the answer's sentences grouped by what they say.

A reader opens the report to learn how deep to freeze. The table gives, per task and train size, the deepest
freeze shown non-inferior, the bound that showed it, the metric and checkpoint it is on and the population the
interval speaks of; the sentences below it say what is *not* known. A fact shared by several sizes ("full
fine-tuning was not shown to beat the majority baseline") is said once with the sizes listed, never once per
size: :func:`freezestats.analysis.answer_text.grouped_answer` groups the sizes by kind of outcome, so no
sentence of a task repeats.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from freezestats.analysis.answer_text import grouped_answer
from freezestats.report.figures import frozen_label
from freezestats.report.inputs import ReportInputs
from freezestats.stats.inference.sequence import order_by_depth

__all__ = ["decision_section", "decision_table"]

#: The population column's words: what the interval lets vary.
_POPULATION_SHORT = {"task": "the task", "evaluation_set": "this eval. set"}
#: The checkpoint each response scores, in a word.
_CHECKPOINT = {"heldout": "held-out", "final_dev": "last", "best_dev": "best on dev"}


def decision_table(inputs: ReportInputs) -> pd.DataFrame:
    """One row per task and train size: the decision, its bound against the margin, metric, checkpoint, population."""
    settings = inputs.analysis.settings
    answers = inputs.analysis.tables.get("answer")
    tests = inputs.analysis.tables.get("noninferiority")
    rows: list[dict[str, Any]] = []
    if answers is None or tests is None:
        return pd.DataFrame(rows)
    for task in settings.get("tasks", []):
        population = settings.get("answer_population", {}).get(task, "evaluation_set")
        margin = float(settings.get("margins", {}).get(task, float("nan")))
        on = f"{inputs.metric_of(task)} ({_CHECKPOINT.get(inputs.response_of(task), inputs.response_of(task))})"
        for row in answers[answers["task"] == task].sort_values("train_size").itertuples():
            mine = order_by_depth(tests[(tests["task"] == task) & (tests["train_size"] == row.train_size)])
            decision, bound = _decision(row, mine)
            rows.append({"task": task, "n": str(int(row.train_size)), "freeze": decision, "bound": bound,
                         "margin": _pts(-margin), "metric (checkpoint)": on,
                         "speaks of": _POPULATION_SHORT[population]})  # fmt: skip
    return pd.DataFrame(rows)


def decision_section(inputs: ReportInputs, w: Any) -> str:
    """The decision table, then per task the sentences on what is not known (:func:`grouped_answer`)."""
    table = decision_table(inputs)
    if table.empty:
        return "No non-inferiority test could be run (see the warnings in Model details)."
    caption = (
        "The decision: per task and train size, the deepest freeze shown non-inferior to full fine-tuning "
        "(every shallower one shown too), the one-sided bound of its difference (points of the metric) "
        "against the margin, the metric and the checkpoint it is scored at (held-out: best on one half of the "
        "validation set, scored on the other; last: the final checkpoint), and what its interval speaks of: "
        "the task (new seeds and new evaluation items) or this evaluation set (new seeds, the same items). "
        "¹ Full fine-tuning was not shown to beat the majority baseline there."
    )
    parts = [w.table(table, "decision", caption)]
    for task in inputs.analysis.settings.get("tasks", []):
        open_ = grouped_answer(inputs.analysis, task, known=False)
        if open_:
            parts.append(f"**Not known for {task}.** " + " ".join(open_))
    return "\n\n".join(parts)


def _decision(row: Any, tests: pd.DataFrame) -> tuple[str, str]:
    if not bool(row.beats_baseline):
        return "none stated¹", "–"
    if pd.isna(row.deepest_noninferior):
        return "none shown", _pts(float(tests["lower"].iloc[0])) if not tests.empty else "–"
    depth = int(row.deepest_noninferior)
    at = tests[tests["frozen_layers"] == depth]
    return f"up to {frozen_label(depth)}", _pts(float(at["lower"].iloc[0])) if not at.empty else "–"


def _pts(value: float) -> str:
    return f"{100 * value:+.1f}".replace("-", "−")

"""The report opens with the decision table, and its answer says each kind of outcome once."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from freezestats.analysis.pipeline import Analysis
from freezestats.report.inputs import ReportInputs
from freezestats.report.sections.decision import decision_table
from freezestats.report.text import answer

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "blog2020-minilm"


@pytest.fixture(scope="module")
def blog_inputs(blog2020_analysis: Analysis) -> ReportInputs:
    runs = pd.read_csv(EXAMPLE / "results.csv")
    return ReportInputs(analysis=blog2020_analysis, runs=runs, study=None, notes=[], ran_analysis=True)


def _shapes(text: str) -> list[str]:
    """The answer's sentences with every number blanked: a sentence said once per size has one shape."""
    sentences = [s.strip() for s in re.split(r"(?<=[.)])\s+(?=[A-Z*])", text) if s.strip()]
    return [re.sub(r"[−+-]?\d+(\.\d+)?", "#", s) for s in sentences]


def test_no_sentence_of_the_answer_repeats_across_sizes(blog_inputs: ReportInputs) -> None:
    text = answer(blog_inputs)
    for paragraph in text.split("\n\n")[1:]:  # each task's paragraph (the first is the how-to-read box)
        shapes = _shapes(paragraph)
        assert len(shapes) == len(set(shapes)), [s for s in shapes if shapes.count(s) > 1]
    assert text.count("was not shown to beat the majority baseline") == 2  # once per task, its sizes listed


def test_the_decision_table_has_a_row_per_task_and_size_with_metric_and_population(blog_inputs: ReportInputs) -> None:
    table = decision_table(blog_inputs)
    assert list(table.columns) == ["task", "n", "freeze", "bound", "margin", "metric (checkpoint)", "speaks of"]
    assert len(table) == 10 and set(table["task"]) == {"cola", "sst2"}
    cola = table[table["task"] == "cola"].set_index("n")
    assert (cola["metric (checkpoint)"] == "mcc (last)").all()
    assert cola.loc["50", "freeze"] == "none stated¹" and cola.loc["1000", "freeze"].startswith("up to")
    sst2 = table[table["task"] == "sst2"]
    assert (sst2["metric (checkpoint)"] == "accuracy (held-out)").all()
    assert (table["speaks of"] == "the task").all()


def test_the_checkpoint_table_shows_where_each_cells_checkpoints_fell(blog_inputs: ReportInputs) -> None:
    from freezestats.report.sections.checkpoints import checkpoint_table

    runs = blog_inputs.task_runs("cola")
    table = checkpoint_table(runs, "best_step").set_index("n")
    cell = runs[(runs["train_size"] == 100) & (runs["frozen_layers"] == 0)]["best_step"]
    assert table.loc["100", "0"] == f"{int(cell.median())} [{cell.min()}–{cell.max()}]"
    assert list(table.columns[:2]) == ["0", "emb."] and len(table) == 5

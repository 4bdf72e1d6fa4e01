"""The report's prose, written from the numbers: the answer (Methods and the colophon: :mod:`.methods`).

Nothing here is hard-coded about a particular study: every number in a sentence is read from the analysis
tables, the stored spec or the runs, so a re-analysis rewrites the text with the figures.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from freezestats.analysis.answer_text import grouped_answer
from freezestats.analysis.result import SECOND_MODE
from freezestats.report.figures import frozen_label, frozen_order
from freezestats.report.inputs import ReportInputs
from freezestats.stats.items.task_level import POPULATIONS

__all__ = ["FAILED_DEFINITION", "answer", "frozen_dropout", "n_layers"]

FAILED_DEFINITION = (
    "a run counts as *failed* (collapsed) when its final predictions are all one class (or constant, for "
    "regression) or its final metric is at or below the majority-class baseline"
)


def n_layers(inputs: ReportInputs, task: str | None = None) -> int | None:
    """Encoder layers of the model (from the runs, else the stored provenance)."""
    runs = inputs.task_runs(task) if task else inputs.runs
    if runs is not None and "n_layers" in runs.columns and runs["n_layers"].notna().any():
        return int(runs["n_layers"].dropna().iloc[0])
    value = ((inputs.study or {}).get("provenance") or {}).get("n_layers")
    return int(value) if value is not None else None


def frozen_dropout(spec: dict[str, Any]) -> str:
    """``training.frozen_dropout`` of the stored spec: "on" (the blog's protocol, the default) or "off"."""
    return str((spec.get("training") or {}).get("frozen_dropout", "on"))


def _points(value: float) -> str:
    return f"{100 * value:+.1f}".replace("-", "−")


def answer(inputs: ReportInputs) -> str:
    """One paragraph per task: which population the answer speaks of, the answer as tests, then what the
    superiority contrasts say, described as what they are, and a two-sentence "how to read this" box.

    The claim "freezing up to k layers is non-inferior within m points" comes from the analysis' ``noninferiority``
    table: by default each depth's paired task-level contrast under the task's graphical procedure
    (:mod:`freezestats.stats.inference.task_family`); with ``--uncertainty seeds`` the model's fixed sequence.
    The paragraph names the population and the procedure from the analysis' settings, so the words cannot drift
    from what ran. Where full fine-tuning was not shown to beat the majority baseline, no cost is stated. "Not
    significantly worse" is never read as "safe".
    """
    settings = inputs.analysis.settings
    answers = inputs.analysis.tables.get("answer")
    contrasts = inputs.analysis.tables.get("contrasts")
    reference = int(settings.get("reference", 0))
    ref_phrase = "full fine-tuning" if reference == 0 else f"freezing {frozen_label(reference)} layers"
    family = (
        "one family over all train sizes (Bonferroni)"
        if settings.get("adjust_across") == "sizes"
        else "one family per train size"
    )
    paragraphs = [
        "::: {.callout-note}\n**How to read this.** A depth is *non-inferior* when the study shows, at 95% "
        "one-sided confidence, that freezing it loses less than the margin against "
        f"{ref_phrase}; a superiority test that finds no significant difference only says the study could not "
        "tell, which is absence of evidence, not evidence of no cost.\n:::"
    ]
    for task in settings.get("tasks", []):
        response = settings.get("response_of", {}).get(task, settings.get("response"))
        lead = f"**{task}** ({inputs.metric_of(task)}, {response})."
        if answers is None or not (answers["task"] == task).any():
            paragraphs.append(
                f"{lead} No non-inferiority test could be run for this task (see the warnings in Model details), "
                "so the question is answered by the cell means in the figures only."
            )
            continue
        sentences = grouped_answer(inputs.analysis, task)
        margin = settings.get("margins", {}).get(task)
        extra = _superiority_sentence(contrasts, task, reference, settings.get("adjust", "holm"))
        paragraphs.append(
            f"{lead} {population_sentence(settings, task)} "
            + " ".join(sentences)
            + (f" {extra}" if extra else "")
            + f" (Margin {margin:g}; {procedure_phrase(settings, task, family)}"
            + (_TWO_PART_NOTE if settings.get("answer_from", {}).get(task) == "two_part" else "")
            + ".)"
            + _items_sentence(inputs.analysis.tables.get("noninferiority_items"), task)
        )
    return "\n\n".join(paragraphs)


def population_sentence(settings: dict[str, Any], task: str) -> str:
    """What the task's answer speaks of, said first: the task, or (without stored predictions, or with
    ``--uncertainty seeds``) this evaluation set only."""
    population = settings.get("answer_population", {}).get(task, "evaluation_set")
    if population == "task":
        return f"These intervals speak of {POPULATIONS['task']}."
    if settings.get("uncertainty", "seeds") == "task":
        return (
            "No per-item predictions are stored for these runs, so these intervals speak of "
            f"{POPULATIONS['evaluation_set']} only, not of the task."
        )
    return f"These intervals speak of {POPULATIONS['evaluation_set']} only (`--uncertainty seeds`), not of the task."


def procedure_phrase(settings: dict[str, Any], task: str, family: str) -> str:
    """The multiple-testing procedure the answer actually ran, in the words of its settings."""
    procedure = settings.get("answer_procedure", {}).get(task)
    if procedure and settings.get("uncertainty") == "task":
        return f"each depth against the reference on its own paired runs; {procedure}; familywise 5% over the task"
    return f"depths tested shallow to deep, stopping at the first that fails: {procedure or family}"


_TWO_PART_NOTE = (
    f"; {SECOND_MODE}, so the costs are those of the expected score with failures, "
    "P(fail) × the failed runs' score + (1 − P(fail)) × the healthy mean (two-part contrasts)"
)


def _items_sentence(table: pd.DataFrame | None, task: str) -> str:
    """Where adding the validation items' sampling variance changes the answer, per train size."""
    if table is None or not (table["task"] == task).any():
        return ""
    changed = []
    for size, group in table[table["task"] == task].groupby("train_size"):
        seeds = group.loc[group["noninferior_seed"], "frozen_layers"]
        items = group.loc[group["noninferior"], "frozen_layers"]
        if len(seeds) != len(items):
            deepest = frozen_label(int(items.iloc[-1])) if len(items) else None
            changed.append(f"n = {int(size)}: " + (f"up to {deepest}" if deepest else "no depth"))
    base = (
        " These bounds are about this validation set (seeds only). With the items' sampling variance added, "
        "as for new items of the task, "
    )
    if not changed:
        return base + "the answer is the same."
    return base + "non-inferiority holds for " + "; ".join(changed) + "."


def _superiority_sentence(contrasts: pd.DataFrame | None, task: str, reference: int, adjust: str) -> str:
    """Where the superiority contrasts found a depth detectably worse: the shallowest such depth per size."""
    if contrasts is None or not (contrasts["task"] == task).any():
        return ""
    table = contrasts[contrasts["task"] == task]
    if "fit" in table.columns:
        table = table[table["fit"] == "all_runs"]
    worse = []
    for size, group in table.groupby("train_size"):
        order = [k for k in frozen_order(group["frozen_layers"]) if k != reference]
        rows = group.set_index("frozen_layers").loc[order]
        hit = rows[(rows["p_adj"] < 0.05) & (rows["estimate"] < 0)]
        if len(hit):
            first = hit.iloc[0]
            worse.append(
                f"n = {int(size)}: from frozen {frozen_label(int(hit.index[0]))}, {_points(first['estimate'])} "
                f"[{_points(first['ci_low'])}, {_points(first['ci_high'])}]"
            )
    if not worse:
        return f"No depth was detectably worse in the superiority contrasts ({adjust}-adjusted)."
    return (
        f"Detectably worse in the superiority contrasts of the mixed model ({adjust}-adjusted within a size; "
        "seeds only, so about this evaluation set): " + "; ".join(worse) + "."
    )

"""The answer's tests in the Contrasts section: each depth's standard error split into its seeds' and its items'
parts, so a reader sees how much of the uncertainty the one evaluation set carries."""

from __future__ import annotations

import pandas as pd

from freezestats.report.inputs import ReportInputs
from freezestats.report.tables import present, sorted_cells
from freezestats.report.writer import Writer, task_table

__all__ = ["answer_tests_table", "item_uncertainty_table", "seeds_needed_table"]


def answer_tests_table(inputs: ReportInputs, w: Writer, task: str) -> str:
    """The default answer's tests: each depth's paired contrast, its seeds' and items' standard errors, the
    per-comparison 95% interval, the bound at the level the task's procedure gave it, and the decision."""
    table = task_table(inputs, "noninferiority", task, fit=None)
    if table is None or "se_item" not in table.columns:
        return ""
    population = str(table["population"].iloc[0]) if "population" in table.columns else "evaluation_set"
    side = table["se_lower"] if "se_lower" in table.columns else table["se"]
    failures = (side**2 - table["se_seed"] ** 2 - table["se_item"] ** 2).clip(lower=0) ** 0.5
    shown = present(
        sorted_cells(table.assign(share=table["se_item"] ** 2 / side.where(side > 0) ** 2, se_fail=failures)),
        {
            "train_size": "train size",
            "frozen_layers": "frozen",
            "estimate": "difference",
            "se_seed": "SE seeds",
            "se_item": "SE items",
            "se_fail": "SE failures",
            "share": "items' share",
            "ci_low": "95% low",
            "ci_high": "95% high",
            "lower": "bound",
            "p_adj": "p adj.",
            "noninferior": "non-inferior",
        },
    )
    about = "the task (new seeds and new evaluation items)" if population == "task" else "this evaluation set"
    tests = w.table(
        shown,
        f"{task}-answer-tests",
        f"{task}: the answer's tests, each depth against full fine-tuning on its own runs paired by seed and by "
        f"item; the intervals speak of {about}. SE seeds: the per-seed differences' (paired t); SE items: the "
        "evaluation items' part; SE failures: the failed runs' part on the lower side of the 95% interval (the two "
        "cells' failure rates, from that depth's and the reference's runs only; 0 where no run of either depth "
        "failed at any size); 95% low/high: per comparison; "
        "bound: one-sided, at the level the task's graphical procedure finally gave the test, with the failure "
        "part read at that level (non-inferior exactly when it is above −margin); p adj.: the procedure's "
        "adjusted p.",
    )
    return tests + seeds_needed_table(inputs, w, task)


def seeds_needed_table(inputs: ReportInputs, w: Writer, task: str) -> str:
    """Seeds per cell for 80% power of the task-level answer (``settings["seeds_needed"]``), a row per size and
    a column per depth; empty where the analysis has none."""
    needed = inputs.analysis.settings.get("seeds_needed", {}).get(task)
    if not needed:
        return ""
    rows = [
        {"train size": str(size), **{f"frozen {depth}": str(seeds or ">40") for depth, seeds in by_depth.items()}}
        for size, by_depth in needed.items()
    ]
    margin = inputs.analysis.settings.get("margins", {}).get(task)
    return "\n\n" + w.table(
        pd.DataFrame(rows).fillna("–"),
        f"{task}-seeds-needed",
        f"{task}: seeds per cell for 80% power of the task-level answer: how many seeds would show a depth with no "
        f"true cost non-inferior within the margin ({margin}), at the level the task's graphical procedure first "
        "gives its test, simulated from that depth's own per-seed spread with the spread's uncertainty (5 seeds "
        "leave it wide), its items' part (which more seeds do not shrink: hence '>40') and its failure part.",
    )


def item_uncertainty_table(inputs: ReportInputs, w: Writer, task: str) -> str:
    """The answer's tests with the seeds' and the items' parts of each standard error (the default answer), or,
    with ``--uncertainty seeds``, the bounds with and without the items' sampling variance side by side."""
    if inputs.analysis.settings.get("uncertainty") == "task":
        return answer_tests_table(inputs, w, task)
    table = task_table(inputs, "noninferiority_items", task, fit=None)
    if table is None:
        return (
            "No per-item predictions were analysed, so every interval here is about these validation items (seeds "
            "only); item uncertainty needs `--predictions` or the study database."
        )
    return w.table(
        present(
            sorted_cells(table),
            {
                "train_size": "train size",
                "frozen_layers": "frozen",
                "estimate": "difference",
                "lower_seed": "lower (seeds)",
                "noninferior_seed": "non-inferior (seeds)",
                "se_item": "SE items",
                "item_share": "item share of variance",
                "lower": "lower (seeds + items)",
                "noninferior": "non-inferior (seeds + items)",
            },
        ),
        f"{task}-noninferiority-items",
        f"{task}: one-sided lower bounds of the non-inferiority sequence, seed-only (about these validation items: "
        "the answer uses them) and with the items' sampling variance added (about the task's items), from the "
        "per-item predictions by a two-way seed × item decomposition.",
    )

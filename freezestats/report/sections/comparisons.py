"""The report's comparisons with published work and its compute summary: Lee et al.'s "90% of full quality"
point, the blog's appendix beside our cells, and what the study cost to run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from freezestats.report import figures as F
from freezestats.report.inputs import ReportInputs
from freezestats.report.tables import count_range, fmt_num, present, sorted_cells

if TYPE_CHECKING:
    pass
from freezestats.report.writer import Writer, heading, task_table, why_missing
from freezestats.stats.descriptive.reference import load_reference

__all__ = ["REFERENCE_NAME", "compute_section", "lee_section", "reference_section"]

REFERENCE_NAME = "blog 2020 (RoBERTa-base)"


def lee_section(inputs: ReportInputs, w: Writer) -> str:
    parts = []
    for task in inputs.analysis.settings["tasks"]:
        head = heading(inputs, task)
        relative = task_table(inputs, "relative_scores", task, fit=None)
        operating = task_table(inputs, "operating_point", task, fit=None)
        if relative is None or operating is None:
            parts.append(head + f"Not computed: {why_missing(inputs, task, 'relative_scores')}.")
            continue
        threshold = float(operating["threshold"].iloc[0])
        shown = operating.copy()
        body = []
        tests = task_table(inputs, "lee_tests", task, fit=None)
        if tests is not None and len(tests):
            body.append(
                w.table(
                    present(
                        tests,
                        {
                            "train_size": "train size",
                            "frozen_layers": "frozen",
                            "ratio_estimate": "ratio",
                            "ratio_ci_low": "Fieller low",
                            "ratio_ci_high": "Fieller high",
                            "lower": "lower bound of μₖ − 0.9μ₀",
                            "p_val": "p",
                            "tested": "tested",
                            "reaches": "reaches 90%",
                        },
                        {"ratio_estimate": fmt_num(3), "ratio_ci_low": fmt_num(3), "ratio_ci_high": fmt_num(3)},
                    ),
                    f"{task}-lee-tests",
                    f"{task}: Lee et al.'s criterion as a test: μₖ − 0.9·μ₀ ≥ 0, one-sided, in fixed sequence from "
                    "shallow to deep (a depth is 'tested' only when every shallower one reached 90%); the ratio "
                    "μₖ/μ₀ with its Fieller 90% interval. This is the answer; the bootstrap below is a display.",
                )
            )
        body += [
            w.figure(
                F.lee_figure(relative, operating, threshold),
                f"{task}-relative",
                f"{task}: relative quality, Lee et al.'s ratio of a depth's mean score to full fine-tuning's (1 = "
                "full; 0 is a score of 0, not the majority baseline, so a depth at the baseline can sit well above 0) "
                f"against trainable encoder layers, bootstrap 95% intervals over seeds; stars: fewest layers reaching "
                f"{threshold:.0%}.",
            ),
            w.table(
                present(
                    shown,
                    {
                        "train_size": "train size",
                        "trainable_layers": "trainable layers",
                        "frozen_layers": "frozen",
                        "ci_low": "CI low",
                        "ci_high": "CI high",
                        "p_reached": "bootstrap share reaching it",
                    },
                    {"ci_low": fmt_num(0), "ci_high": fmt_num(0), "p_reached": fmt_num(2)},
                ),
                f"{task}-operating-point",
                f"{task}: the {threshold:.0%} operating point: fewest trainable layers whose mean reaches "
                f"{threshold:.0%} of full fine-tuning's quality, with its bootstrap 95% interval (a percentile "
                f"interval over {_seeds_a_cell(inputs, task)} of a discrete choice: it under-covers; read the tests "
                "above instead).",
            ),
        ]
        parts.append(head + "\n\n".join(body))
    return "\n\n".join(parts)


def _seeds_a_cell(inputs: ReportInputs, task: str) -> str:
    """The runs a cell of the task has, e.g. "3 seeds" or "3–5 seeds": what the bootstrap resamples."""
    cells = task_table(inputs, "cell_summary", task, fit=None)
    if cells is None or "n" not in cells.columns:
        return "the seeds"
    return count_range(cells["n"], "seeds")


def compute_section(inputs: ReportInputs, w: Writer) -> str:
    parts = []
    for task in inputs.analysis.settings["tasks"]:
        response = inputs.response_of(task)
        head = heading(inputs, task)
        runs = inputs.task_runs(task)
        measured = (
            runs is not None
            and {"wall_seconds", "trainable_params"} <= set(runs.columns)
            and runs["wall_seconds"].notna().any()
            and runs["trainable_params"].notna().any()
        )
        if not measured:
            parts.append(
                head + "No compute measurements: the runs are not at hand or do not record wall time and "
                "trainable parameters (e.g. a simulated table)."
            )
            continue
        metric = inputs.metric_of(task)
        by_level = runs.groupby("frozen_layers").agg(
            runs=("wall_seconds", "size"),
            wall=("wall_seconds", "median"),
            total=("wall_seconds", "sum"),
            params=("trainable_params", "median"),
            score=(response, "mean"),
        )
        by_level = by_level.reindex(F.frozen_order(by_level.index)).reset_index()
        shown = present(
            by_level,
            {
                "frozen_layers": "frozen",
                "runs": "runs",
                "wall": "median wall time (s)",
                "total": "total (s)",
                "params": "trainable parameters",
                "score": f"mean {response}",
            },
            {"runs": fmt_num(0), "wall": fmt_num(1), "total": fmt_num(0), "params": lambda v: f"{float(v):,.0f}"},
        )
        parts.append(
            head
            + w.figure(
                F.compute_figure(runs, response, metric),
                f"{task}-compute",
                f"{task}: wall time per run and trainable parameters per frozen level, and {metric} against wall time.",
            )
            + "\n\n"
            + w.table(shown, f"{task}-compute", f"{task}: cost per frozen level (all train sizes together).")
        )
    return "\n\n".join(parts)


def reference_section(inputs: ReportInputs, w: Writer) -> str:
    parts = []
    comparison = inputs.analysis.tables.get("reference_comparison")
    covered = set(load_reference()["task"])
    for task in inputs.analysis.settings["tasks"]:
        head = heading(inputs, task)
        part = task_table(inputs, "reference_comparison", task, fit=None)
        if part is None or not part["in_reference"].any():
            if part is not None and part["note"].notna().any():
                reason = str(part["note"].dropna().iloc[0])
            elif task not in covered:
                reason = f"the {REFERENCE_NAME} published {' and '.join(sorted(covered))} only"
            elif comparison is None:
                reason = why_missing(inputs, task, "reference_comparison")
            else:
                reason = "the published figures do not cover this task's cells"
            parts.append(head + f"No comparison with the published figures for {task}: {reason}.")
            continue
        metric = inputs.metric_of(task)
        both = sorted_cells(part[part["in_reference"]])
        notes = sorted({str(n) for n in both["note"].dropna() if str(n)})
        body = [
            w.figure(
                F.reference_figure(both, metric, REFERENCE_NAME),
                f"{task}-reference",
                f"{task}: cell mean ± SD of `best_dev` against frozen layers, this study (left) and the "
                f"{REFERENCE_NAME} (right), same axes. Both are the best validation score during training, the "
                "blog's number, biased upward by checkpoint selection on the scoring data.",
            ),
            w.table(
                present(
                    both,
                    {
                        "train_size": "train size",
                        "frozen_layers": "frozen",
                        "mean": "mean",
                        "ref_mean": "blog mean",
                        "median": "50%",
                        "ref_median": "blog 50%",
                        "std": "std",
                        "ref_std": "blog std",
                        "min": "min",
                        "ref_min": "blog min",
                        "max": "max",
                        "ref_max": "blog max",
                    },
                ),
                f"{task}-reference",
                f"{task}: our statistics per cell beside the {REFERENCE_NAME}'s.",
            ),
        ]
        if notes:
            body.append("Notes from the comparison: " + "; ".join(notes) + ".")
        parts.append(head + "\n\n".join(body))
    return "\n\n".join(parts)

"""What ``freezestats analyze`` prints: a short summary of an :class:`~freezestats.analysis.result.Analysis`.

The lines the report reuses (the run count, the cross/bi sentences, p values) are here too, so that the report
reads them from the analysis stage rather than the analysis stage reaching up into the report.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from freezestats.analysis.answer_text import grouped_answer
from freezestats.analysis.decision import decision_lines
from freezestats.analysis.result import SECOND_MODE, Analysis
from freezestats.stats.items.task_level import POPULATIONS

__all__ = ["answer_heading", "difference_text", "fmt_p", "pair_encoding_lines", "runs_counted", "summary_lines"]


def _test_text(row: Any) -> str:
    """An F test as F(num, den) = f, p; a likelihood-ratio test (no F) as LR = x, df, p."""
    if pd.notna(getattr(row, "f_stat", float("nan"))):
        return f"F({int(row.num_df)}, {row.den_df:.1f}) = {row.f_stat:.2f}, p={row.p_val:.3g} (Satterthwaite df)"
    return f"LR={row.lr_stat:.2f}, df={int(row.df)}, p={row.p_val:.3g}"


def runs_counted(settings: dict[str, Any]) -> str:
    """The runs counted, e.g. "350 runs", or "54 cross-encoded runs alone (and 54 in groups, 30 bi-encoded)".

    ``n_runs`` counts the rows of the freeze model only; a shared-encoder study's group rows and its bi-encoded rows
    are analysed in their own tables, and a count that left them out unsaid would understate the study.
    """
    grouped, bi = settings.get("n_rows_grouped") or 0, settings.get("n_rows_bi") or 0
    kind = ("cross-encoded " if bi else "") + "runs" + (" alone" if grouped else "")
    aside = [f"{grouped} in groups"] * bool(grouped) + [f"{bi} bi-encoded"] * bool(bi)
    return f"{settings['n_runs']} {kind}" + (f" (and {', '.join(aside)})" if aside else "")


def answer_heading(s: dict[str, Any], task: str) -> str:
    """What the answer's intervals speak of and the procedure that ran, from the settings the analysis recorded
    (so the words cannot drift from what was computed); the population comes first."""
    population = s.get("answer_population", {}).get(task, "evaluation_set")
    procedure = s.get("answer_procedure", {}).get(task) or "fixed sequence shallow to deep"
    if population == "task":
        about = f"for {POPULATIONS['task']}"
    elif s.get("uncertainty") == "task":
        about = f"NO per-item predictions stored: for {POPULATIONS['evaluation_set']} only, not the task"
    else:
        about = f"for {POPULATIONS['evaluation_set']} only (--uncertainty seeds)"
    source = f"; two-part contrasts: {SECOND_MODE}" if s.get("answer_from", {}).get(task) == "two_part" else ""
    return f"answer {about} (non-inferiority, margin {s['margins'].get(task)}; {procedure}{source})"


def summary_lines(analysis: Analysis) -> list[str]:
    """A short human summary: the contrasts against full fine-tuning and what the study says."""
    s = analysis.settings
    lines = [
        f"freezestats analyze: {s['model']} model of {s['response']} ({runs_counted(s)}); "
        f"{s['response']}: {s['response_note']}."
    ]
    contrasts = analysis.tables.get("contrasts")
    answers = analysis.tables.get("answer")
    decision = analysis.tables.get("decision")
    for task in s["tasks"]:
        lines.append(f"[{task}]")
        if decision is not None and (decision["task"] == task).any():
            lines.extend(decision_lines(decision[decision["task"] == task]))
        if answers is not None and (answers["task"] == task).any():
            lines.append(f"  {answer_heading(s, task)}:")
            lines.extend(f"    {sentence}" for sentence in grouped_answer(analysis, task))
            lines.append(f"  superiority contrasts ({s['adjust']}-adjusted within a size; not shown ≠ no cost):")
        if contrasts is not None:
            c = contrasts[(contrasts["task"] == task) & (contrasts["fit"] == "all_runs")]
            for size, group in c.groupby("train_size"):
                parts = [
                    f"{int(r.frozen_layers)}: {r.estimate:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}] p_adj={r.p_adj:.3g}"
                    for r in group.itertuples()
                ]
                lines.append(f"  n={size}: frozen vs {s['reference']} → " + "; ".join(parts))
        inter = analysis.tables.get("interaction_test")
        if inter is not None and (inter["task"] == task).any():
            r = inter[inter["task"] == task].iloc[0]
            lines.append(f"  frozen × size interaction: {_test_text(r)}")
        op = analysis.tables.get("operating_point")
        if op is not None and (op["task"] == task).any():
            parts = [
                f"n={int(r.train_size)}: {r.trainable_layers} trainable [{r.ci_low}, {r.ci_high}]"
                for r in op[op["task"] == task].itertuples()
            ]
            lines.append("  90% of full quality: " + "; ".join(parts))
        lines.extend(_other_answers(analysis, task))
        per_size = s.get("seeds_per_size", {}).get(task)
        if per_size:
            parts = [
                f"n={size}: Δ {v['detect_delta'] or '>20'}, non-inferior {v.get('noninferior') or '>20'}"
                for size, v in per_size.items()
            ]
            lines.append(
                f"  seeds per cell for 80% power of the mixed model's tests (Δ={s['delta']}, Holm within size; "
                f"margin {s['margins'].get(task)}; SDs taken as known): " + "; ".join(parts)
            )
        lines.extend(_seeds_needed_line(s.get("seeds_needed", {}).get(task), s["margins"].get(task)))
    pooled = analysis.tables.get("task_interaction_test")
    if pooled is not None:
        r = pooled.iloc[0]
        lines.append(f"[all tasks] does freezing act differently per task? {_test_text(r)}")
    lines.extend(f"warning: {w}" for w in analysis.warnings)
    return lines


def _seeds_needed_line(needed: dict | None, margin: float | None) -> list[str]:
    """The task-level answer's seeds per cell for 80% power, per size and depth (``settings["seeds_needed"]``)."""
    if not needed:
        return []
    parts = [
        f"n={size}: " + ", ".join(f"{depth}: {seeds or '>40'}" for depth, seeds in by_depth.items())
        for size, by_depth in needed.items()
    ]
    return [
        f"  seeds per cell for 80% power of the task-level answer (frozen depth: seeds, a depth with no true cost, "
        f"margin {margin}; the SDs' uncertainty included): " + "; ".join(parts)
    ]


def _other_answers(analysis: Analysis, task: str) -> list[str]:
    """The across-arm answer, the shared-encoder freezing gains and the cross/bi gaps of a task, when the study
    has them."""
    lines = []
    arms = analysis.tables.get("arm_answer")
    if arms is not None and (arms["task"] == task).any():
        lines.append("  which arm (non-inferiority against full fine-tuning, Holm over a size's arm levels):")
        lines.extend(f"    {statement}" for statement in arms.loc[arms["task"] == task, "statement"])
    shared = analysis.tables.get("shared_encoder")
    if shared is not None and (shared["task"] == task).any():
        gains = shared[(shared["task"] == task) & (shared["comparison"] == "freezing_gain_difference")]
        lines.extend(
            f"  shared encoder, n={r.train_size}, with {r.trained_with}: freezing {r.frozen_layers} gains "
            f"{r.estimate:+.3f} [{r.ci_low_adj:+.3f}, {r.ci_high_adj:+.3f}] more than alone (p_adj={r.p_adj:.3g})"
            for r in gains.itertuples()
        )
    pairs = analysis.tables.get("pair_encoding")
    if pairs is not None and (pairs["task"] == task).any():
        lines.extend(f"  cross vs bi: {line}" for line in pair_encoding_lines(pairs[pairs["task"] == task], task))
    return lines


def fmt_p(value: object) -> str:
    """p values: three significant digits, ``< 0.001`` below that."""
    try:
        p = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "–"
    if not np.isfinite(p):
        return "–"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def pair_encoding_lines(table: pd.DataFrame, task: str, digits: int = 3) -> list[str]:
    """One sentence per cell: bi minus cross with its 95% interval and Holm-adjusted p."""
    lines = []
    for row in table.sort_values(["train_size", "trained_with", "frozen_layers"]).itertuples():
        where = "alone" if row.trained_with == task else f"in {row.trained_with}"
        if pd.isna(row.p_adj):
            verdict = "has no interval (fewer than two seeds, or identical differences)"
        elif row.p_adj < 0.05:
            verdict = "is worse than cross" if row.estimate < 0 else "is better than cross"
        else:
            verdict = "was not shown to differ from cross (not a finding of no difference)"
        lines.append(
            f"n = {row.train_size}, {where}, frozen {row.frozen_layers}: bi {verdict}; bi − cross = "
            f"{difference_text(row.estimate, row.ci_low, row.ci_high, digits)} ({row.cross:.{digits}f} cross, "
            f"{row.bi:.{digits}f} bi; {row.n_pairs} seed{'s' if row.n_pairs != 1 else ''}, p adj. {fmt_p(row.p_adj)})."
        )
    return lines


def difference_text(estimate: float, low: float, high: float, digits: int) -> str:
    """``+e [lo, hi]``, or ``+e (no interval)`` where one seed pair (or identical differences) gave none."""
    if pd.isna(low) or pd.isna(high):
        return f"{estimate:+.{digits}f} (no interval)"
    return f"{estimate:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"

"""The answer of a task in words, one sentence per kind of outcome with its train sizes listed.

A fact shared by several sizes ("full fine-tuning was not shown to beat the majority baseline") is said once with
the sizes listed, never once per size, so a reader meets each statement once: in the terminal summary, the report's
answer and the "not known" lines under its decision table alike.
"""

from __future__ import annotations

import pandas as pd

from freezestats.analysis.result import Analysis
from freezestats.stats.inference.sequence import order_by_depth

__all__ = ["grouped_answer"]


def grouped_answer(analysis: Analysis, task: str, known: bool = True) -> list[str]:
    """The task's answer as sentences, one per kind of outcome with its sizes listed (never one per size).

    ``known=False`` keeps only what is not known: sizes without a cost stated and sizes where no or not every
    depth was shown.
    """
    answers = analysis.tables.get("answer")
    tests = analysis.tables.get("noninferiority")
    if answers is None or tests is None:
        return []
    mine = answers[answers["task"] == task].sort_values("train_size")
    margin = float(analysis.settings.get("margins", {}).get(task, float("nan")))
    no_baseline = [int(r.train_size) for r in mine.itertuples() if not bool(r.beats_baseline)]
    none_shown, shown = [], {}
    for r in mine.itertuples():
        if bool(r.beats_baseline) and pd.isna(r.deepest_noninferior):
            first = order_by_depth(tests[(tests["task"] == task) & (tests["train_size"] == r.train_size)]).iloc[0]
            none_shown.append((int(r.train_size), float(first["lower"]), int(first["frozen_layers"])))
        elif bool(r.beats_baseline):
            shown.setdefault(int(r.deepest_noninferior), []).append(int(r.train_size))
    out = []
    if no_baseline:
        out.append(
            f"At n = {_sizes(no_baseline)} full fine-tuning was not shown to beat the majority baseline, so no "
            "cost of freezing is stated there."
        )
    if none_shown:
        bounds = ", ".join(f"{_pts(lower)} at n = {n} ({_label(k)})" for n, lower, k in none_shown)
        out.append(
            f"At n = {_sizes([n for n, _, _ in none_shown])} no freeze was shown non-inferior within "
            f"{_pts(margin).lstrip('+')} points: the shallowest freeze's bound is {bounds}, below the margin "
            f"{_pts(-margin)}: the study cannot tell yet, and not shown is not shown inferior."
        )
    if known:
        for depth, sizes in sorted(shown.items()):
            out.append(f"Freezing {_up_to(depth)} is non-inferior at n = {_sizes(sizes)}.")
    return out


def _label(depth: int) -> str:
    return "emb." if depth == -1 else str(depth)


def _up_to(depth: int) -> str:
    return "the embeddings only" if depth == -1 else f"up to {depth} layer{'' if depth == 1 else 's'}"


def _sizes(sizes: list[int]) -> str:
    return ", ".join(str(n) for n in sizes)


def _pts(value: float) -> str:
    return f"{100 * value:+.1f}".replace("-", "−")

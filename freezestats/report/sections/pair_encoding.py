"""The report's "Cross against bi encoding" section: how much a sentence-pair task loses when its two
sentences are encoded apart (a bi-encoder) instead of together (``grid.pair_encoding``).

The source of issue 14 reported this gap once, without seeds (STS 0.69 bi against 0.87 cross). Here each
cell's gap is a mean of per-seed differences with a t interval (:mod:`freezestats.stats.comparisons.pair_encoding`),
so the section states per task and cell whether bi was shown to be worse, and by how much.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from freezestats.analysis.summary import difference_text, fmt_p, pair_encoding_lines
from freezestats.exceptions import SpecError
from freezestats.report.tables import fmt_num, present
from freezestats.tasks import get_task

if TYPE_CHECKING:
    from freezestats.report.inputs import ReportInputs

__all__ = ["pair_encoding_methods", "pair_encoding_section"]

_NONE = (
    "No sentence-pair task of this study ran as a bi-encoder, so there is no cross/bi comparison; "
    '`grid.pair_encoding = ["cross", "bi"]` gets this section.'
)


def pair_encoding_methods(spec: dict[str, Any]) -> str | None:
    """The Methods paragraph on ``grid.pair_encoding``: which cells ran bi-encoded and with which heads."""
    grid = spec.get("grid") or {}
    if "bi" not in (grid.get("pair_encoding") or []):
        return None
    levels = grid.get("bi_frozen_layers")
    where = f"at frozen {', '.join(str(k) for k in levels)}" if levels else "at every frozen level"
    return (
        f"**Pair encoding.** Sentence-pair tasks (and groups holding one) ran cross-encoded (one joint input) and, "
        f"{where}, bi-encoded as well: each sentence in a pass of its own, mean-pooled; the head is a scaled "
        "cosine for regression and a linear layer on [u, v, |u − v|, u * v] for classification. The bi runs "
        "share the cross runs' subsets, seeds and data order, so each cell's gap is paired by seed; every other "
        "analysis uses the cross-encoded runs."
    )


def pair_encoding_section(inputs: ReportInputs, w: Any) -> str:
    """Per task with bi runs: the answer lines and the table of per-cell contrasts."""
    table = inputs.analysis.tables.get("pair_encoding")
    if table is None or table.empty:
        return _NONE
    parts = []
    for task in sorted(table["task"].unique()):
        mine = table[table["task"] == task]
        lines = [f"### {task}", "", *_single_sentence_note(task), *[f"- {s}" for s in pair_encoding_lines(mine, task)]]
        lines += ["", w.table(_shown(mine), f"{task}-pair-encoding", _caption(task))]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _single_sentence_note(task: str) -> list[str]:
    """For a task of single sentences in a group: what its "bi" rows are, since its own inputs never change."""
    try:
        single = not get_task(task).is_pair
    except SpecError:  # a task the registry does not know (a results table from elsewhere): say nothing
        return []
    if not single:
        return []
    return [
        f"{task} has single sentences, encoded the same way in both: its *bi* runs are the group runs whose pair "
        f"tasks were bi-encoded, so bi − cross is what that did to {task} through the shared encoder.",
        "",
    ]


def _shown(table: pd.DataFrame) -> pd.DataFrame:
    number = fmt_num(3)
    shown = table.assign(
        difference=[
            difference_text(e, lo, hi, 3) for e, lo, hi in zip(table.estimate, table.ci_low, table.ci_high, strict=True)
        ]
    )
    return present(
        shown[["train_size", "trained_with", "frozen_layers", "n_pairs", "cross", "bi", "difference", "p_adj"]],
        {
            "train_size": "n",
            "trained_with": "trained with",
            "frozen_layers": "frozen",
            "n_pairs": "seeds",
            "cross": "cross",
            "bi": "bi",
            "difference": "bi − cross [95%]",
            "p_adj": "p (adjusted)",
        },
        {"cross": number, "bi": number, "p_adj": fmt_p},
    )


def _caption(task: str) -> str:
    return (
        f"{task}: bi-encoder minus cross-encoder in each cell where both ran, the mean of per-seed differences "
        "(same subset, seed and data order) with a t interval; p values Holm-adjusted over a size's frozen levels."
    )

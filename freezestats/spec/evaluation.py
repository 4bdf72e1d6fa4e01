"""The spec's ``[evaluation]`` table: an evaluation pool, labelled items of the task that no train size can draw.

Why: the validation set is small (SST-2's dev set has 872 sentences, half of which choose the checkpoint), so the
score of one run carries evaluation noise that more seeds cannot remove; and an answer about "the task" speaks of
new data from it, not of one fixed set. A pool of thousands of items reserved from train before any subset is
drawn, and scored once per run at the checkpoint chosen on the validation set, answers both.

A spec without the table stores and hashes exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from freezestats.spec.grid import GridSpec
from freezestats.spec.parser import _Parser

__all__ = ["EvaluationSpec", "parse_evaluation"]


@dataclass(frozen=True)
class EvaluationSpec:
    """``pool``: the items each task reserves as its evaluation pool (stratified; SST-2: whole sentences)."""

    pool: int = 0

    def stored_form(self) -> dict[str, Any]:
        return {"pool": self.pool}


def parse_evaluation(p: _Parser, raw: Mapping[str, Any], grid: GridSpec) -> EvaluationSpec | None:
    """``[evaluation]``: ``pool = N`` items (N >= 10), or the table left out for no pool."""
    if "evaluation" not in raw:
        return None
    if "bi" in grid.pair_encoding:
        raise p.fail("`[evaluation]` scores a pool with cross-encoded pairs only: leave 'bi' out of grid.pair_encoding")
    table = p.table(raw, "evaluation")
    p.keys(table, "evaluation.", {"pool"})
    return EvaluationSpec(pool=p.integer(table.get("pool", 0), "evaluation.pool", low=10))

"""``grid.pair_encoding``: how the study's sentence-pair tasks read their two sentences, as a grid axis."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from freezestats.spec.parser import _Parser

__all__ = ["BI", "CROSS", "PAIR_ENCODINGS", "parse_pair_encoding"]

CROSS, BI = "cross", "bi"
PAIR_ENCODINGS = (CROSS, BI)


def parse_pair_encoding(
    p: _Parser, grid_raw: Mapping[str, Any], frozen: tuple[int, ...], tasks: Sequence[str]
) -> dict[str, Any]:
    """``grid.pair_encoding`` (default ``["cross"]``) and ``grid.bi_frozen_layers`` (default: every level).

    ``bi`` in a study without a sentence-pair task is an error, not a warning: the spec asks for a contrast
    that no cell would measure, and a typo in ``tasks`` should cost seconds, not a night of cross-only runs.
    """
    if "pair_encoding" not in grid_raw:
        if "bi_frozen_layers" in grid_raw:
            raise p.fail("`grid.bi_frozen_layers` is set but `grid.pair_encoding` is not; add 'bi' to it")
        return {}
    values = p.nonempty_list(grid_raw, "pair_encoding", "grid.")
    encodings = tuple(p.choice(v, f"grid.pair_encoding[{i}]", PAIR_ENCODINGS) for i, v in enumerate(values))
    p.unique(encodings, "grid.pair_encoding")
    pair_tasks = [task for task in dict.fromkeys(tasks) if p.task(task).is_pair]
    if BI in encodings and not pair_tasks:
        raise p.fail(
            "`grid.pair_encoding` asks for 'bi', but no task of the study (alone or in a group) is a sentence-pair "
            f"task; add one (mrpc, stsb, rte) or drop 'bi' (tasks: {list(dict.fromkeys(tasks))})"
        )
    if "bi_frozen_layers" not in grid_raw:
        return {"pair_encoding": encodings}
    if BI not in encodings or CROSS not in encodings:
        raise p.fail(
            "`grid.bi_frozen_layers` restricts 'bi' to some frozen levels, so `grid.pair_encoding` must be "
            f"['cross', 'bi'], but got {list(encodings)}"
        )
    levels = tuple(
        p.integer(v, f"grid.bi_frozen_layers[{i}]", low=-1)
        for i, v in enumerate(p.nonempty_list(grid_raw, "bi_frozen_layers", "grid."))
    )
    p.unique(levels, "grid.bi_frozen_layers")
    for i, level in enumerate(levels):
        if level not in frozen:
            raise p.fail(
                f"`grid.bi_frozen_layers[{i}]` must be one of `grid.frozen_layers` {list(frozen)}, but got {level}"
            )
    return {"pair_encoding": encodings, "bi_frozen_layers": levels}

"""Deprecated: the arm comparison's names before they were renamed; it lives in :mod:`.arm_levels` now.

An *arm* is a way of adapting the encoder (freeze, LoRA, probe, re-init), so the comparison of arm levels says
``arm`` where it said ``strategy`` ("strategy" also named the freeze arm's freezing rule). Code written against
the old names still runs: each one warns (``DeprecationWarning``) naming the new one, and returns it.
"""

from __future__ import annotations

import warnings
from typing import Any

from freezestats.stats.comparisons import arm_levels

__all__: list[str] = []

RENAMED = {
    "STRATEGY_CONTRAST_COLUMNS": "ARM_CONTRAST_COLUMNS",
    "strategy_answer": "arm_answer",
    "strategy_codes": "arm_codes",
    "strategy_contrasts": "arm_contrasts",
    "strategy_noninferiority": "arm_noninferiority",
}
"""Old name -> new name in :mod:`freezestats.stats.comparisons.arm_levels` (and :mod:`freezestats.stats`)."""


def renamed(name: str, stacklevel: int = 3) -> Any:
    """The object now called ``RENAMED[name]``, with a ``DeprecationWarning`` naming it."""
    new = RENAMED[name]
    warnings.warn(
        f"{name} is deprecated: use freezestats.stats.comparisons.arm_levels.{new} (the same, renamed)",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    return getattr(arm_levels, new)


def __getattr__(name: str) -> Any:
    if name in RENAMED:
        return renamed(name)
    if name == "require_every_cell":
        return arm_levels.require_every_cell
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

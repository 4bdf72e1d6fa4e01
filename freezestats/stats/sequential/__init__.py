"""Adaptive seed allocation with error control under optional stopping (issue 32).

An adaptive study runs its seeds in rounds and stops a cell once its comparison with the reference is decided.
``spending`` holds the Lan–DeMets spending functions and their group-sequential boundaries, ``bounds`` one
contrast's information fraction, sequential p value and repeated bounds on the t scale, ``history`` the task's
family decided look by look (Maurer & Bretz's graphical group-sequential procedure), ``decisions`` the public
:func:`sequential_decisions` and :func:`next_seeds` on a results table, ``replay`` a stored study replayed
as if it had been adaptive, and ``plan`` the design's numbers (:class:`SequentialPlan`).
"""

from __future__ import annotations

from freezestats.stats.sequential.decisions import NEXT_SEEDS_COLUMNS, next_seeds, sequential_decisions
from freezestats.stats.sequential.history import DECISIONS, PROCEDURE, SEQUENTIAL_COLUMNS
from freezestats.stats.sequential.plan import SequentialPlan
from freezestats.stats.sequential.replay import REPLAY_COLUMNS, fixed_design, replay, replay_summary
from freezestats.stats.sequential.spending import SPENDING_FUNCTIONS, boundaries, crossing_probability, spent

__all__ = [
    "DECISIONS",
    "NEXT_SEEDS_COLUMNS",
    "PROCEDURE",
    "REPLAY_COLUMNS",
    "SEQUENTIAL_COLUMNS",
    "SPENDING_FUNCTIONS",
    "SequentialPlan",
    "boundaries",
    "crossing_probability",
    "fixed_design",
    "next_seeds",
    "replay",
    "replay_summary",
    "sequential_decisions",
    "spent",
]

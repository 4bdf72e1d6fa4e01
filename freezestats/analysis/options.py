"""What ``analyze`` was asked for, checked once and handed to every task's steps."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from freezestats.stats.items.task_two_part import DEFAULT_FAILURE_RATES

__all__ = ["UNCERTAINTIES", "AnalysisOptions"]

#: ``--uncertainty``: what the answer's intervals let vary, and so which population they speak of.
UNCERTAINTIES = ("task", "seeds")


@dataclass(frozen=True)
class AnalysisOptions:
    """What ``analyze`` was asked for (its keyword arguments, checked)."""

    model: str
    response: str
    variance: str
    reference: int
    margin: float | None
    adjust: str
    adjust_across: str
    n_boot: int
    bootstrap_tests: int
    progress: Callable[[int, int], object] | None
    items: pd.DataFrame | None
    uncertainty: str = "task"
    """``task``: the answer from each depth's own paired contrast with seeds and evaluation items varying (the
    items' part needs ``items``); ``seeds``: the model's fixed sequence, which speaks of this evaluation set."""
    failure_rates: str = DEFAULT_FAILURE_RATES
    """The task-level answer's failure part (:data:`~freezestats.stats.items.task_two_part.FAILURE_RATES`)."""

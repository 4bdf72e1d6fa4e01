"""Choose a learning rate per group from the search trials (Lee, Tang & Lin 2019, section 3).

A group is (task, train_size, subset_draw, frozen_layers): with ``full-model`` search the rate is chosen
on frozen_layers = 0 and used by every freeze level; with ``per-cell`` every level has its own. The rate
with the highest mean selection metric over the search seeds wins.

The default selection metric, ``select``, is each search run's best score on the fixed *selection* half
of the validation set (the half that also picks the ``heldout`` checkpoint), so the *scoring* half, on
which ``heldout`` is reported, never helps choose the rate. ``heldout`` (the scoring half) and
``best_dev`` (the whole validation set) remain available, but then the data that reports a score also
chose the rate. Together with search seeds disjoint from the grid seeds (``lr_search.seeds``), and no
search run copied into the grid (unless ``lr_search.reuse``), the grid's runs carry no selection bias
from the search: they are fresh runs at a rate chosen on other runs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from freezestats.study.cells import Cell

__all__ = ["choose_rates", "rate_means", "search_score", "select_half_best"]

Group = tuple[str, int, int, int]


def select_half_best(curve: Sequence[Mapping[str, Any]]) -> float:
    """A run's best primary-metric score on the selection half of the validation set, over its curve.

    NaN evaluations count as the worst (as when the ``heldout`` checkpoint is chosen); NaN when all are.
    """
    values = [float(point["select"]) for point in curve if point.get("select") is not None]
    finite = [v for v in values if math.isfinite(v)]
    return max(finite) if finite else math.nan


def search_score(attrs: Mapping[str, Any], metric: str) -> float:
    """The selection metric of one search trial from its user attributes.

    ``select`` is the stored ``select_best``, or (for trials recorded before it was stored) computed
    from the stored learning curve.
    """
    if metric == "select":
        if attrs.get("select_best") is not None:
            return float(attrs["select_best"])
        return select_half_best(attrs.get("curve") or [])
    value = attrs.get(metric)
    return math.nan if value is None else float(value)


def rate_means(results: Iterable[tuple[Cell, float]]) -> dict[Group, dict[float, tuple[float, int]]]:
    """Mean selection metric and number of runs per group and rate (a NaN run makes its mean NaN)."""
    scores: dict[Group, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for cell, value in results:
        scores[cell.group][cell.learning_rate].append(value)
    return {
        group: {rate: (float(np.mean(values)), len(values)) for rate, values in sorted(by_rate.items())}
        for group, by_rate in sorted(scores.items())
    }


def choose_rates(results: Iterable[tuple[Cell, float]]) -> dict[Group, float]:
    """Best rate per group from (search cell, selection metric) pairs.

    Ties go to the smaller rate (the more conservative choice); NaN scores count as the worst.
    Groups with no finite score at any rate get no rate.
    """
    chosen = {}
    for group, by_rate in rate_means(results).items():
        finite = {rate: mean for rate, (mean, _) in by_rate.items() if np.isfinite(mean)}
        if finite:
            best = max(finite.values())
            chosen[group] = min(rate for rate, mean in finite.items() if mean == best)
    return chosen

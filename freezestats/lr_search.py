"""Choose a learning rate per group from the search trials (Lee, Tang & Lin 2019, section 3).

A group is (task, train_size, subset_draw, frozen_layers): with ``full-model`` search the rate is chosen
on frozen_layers = 0 and reused by every freeze level; with ``per-cell`` every level has its own. The
rate with the highest mean selection metric over seeds wins; the default selection metric is
``heldout`` so that the choice does not also inflate the reported ``best_dev``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import numpy as np

from freezestats.cells import Cell

__all__ = ["choose_rates"]


def choose_rates(results: Iterable[tuple[Cell, float]]) -> dict[tuple[str, int, int, int], float]:
    """Best rate per group from (search cell, selection metric) pairs.

    Ties go to the smaller rate (the more conservative choice); NaN scores count as the worst.
    Groups with no finite score at any rate get no rate.
    """
    scores: dict[tuple[str, int, int, int], dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for cell, value in results:
        scores[cell.group][cell.learning_rate].append(value)
    chosen = {}
    for group, by_rate in scores.items():
        means = {rate: float(np.mean(values)) for rate, values in by_rate.items()}
        finite = {rate: mean for rate, mean in means.items() if np.isfinite(mean)}
        if finite:
            best = max(finite.values())
            chosen[group] = min(rate for rate, mean in finite.items() if mean == best)
    return chosen

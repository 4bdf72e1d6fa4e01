"""The fixed-sequence tests' shared pieces: the tables' columns, the depth order, the stopping rule, baselines.

Several tests walk the frozen depths in the same fixed sequence, shallow to deep, stopping at the first depth not
shown: non-inferiority (:mod:`freezestats.stats.inference.noninferiority`), Lee et al.'s ratio
(:mod:`freezestats.stats.relative_quality.ratio_tests`) and the item-uncertainty version
(:mod:`freezestats.stats.items.uncertainty`); the
sentences of :mod:`freezestats.stats.inference.answer` read the non-inferiority tables back. They must agree on what
"shallower" means, on when a sequence stops and on the tables' columns, so those live here once, in a module
that imports none of them: :mod:`~freezestats.stats.inference.noninferiority` re-exports the answer, so the answer
cannot
import these from there. Every name here stays importable from :mod:`freezestats.stats.inference.noninferiority`, where
it was first defined and where the other modules still import it from.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from freezestats.exceptions import ModelFitError

NONINFERIORITY_COLUMNS = [
    "train_size",
    "frozen_layers",
    "reference",
    "estimate",
    "se",
    "df",
    "lower",
    "margin",
    "t",
    "p_val",
    "tested",
    "noninferior",
    "alpha",
    "family",
]
BASELINE_COLUMNS = [
    "train_size",
    "reference",
    "estimate",
    "se",
    "df",
    "baseline",
    "lower",
    "t",
    "p_val",
    "beats_baseline",
    "alpha",
]

Baseline = float | Mapping[int, float] | pd.Series


def depth_rank(frozen_layers: np.ndarray) -> np.ndarray:
    """How much a depth freezes, for ordering: ``0 -> 0``, ``-1`` (embeddings only) ``-> 1``, ``k >= 1 -> k + 1``."""
    k = np.asarray(frozen_layers, dtype=np.int64)
    return np.where(k == 0, 0, np.where(k < 0, 1, k + 1))


def order_by_depth(table: pd.DataFrame) -> pd.DataFrame:
    """Rows sorted by ``train_size``, then from the shallowest to the deepest freeze (the sequence's order)."""
    rank = depth_rank(table["frozen_layers"].to_numpy())
    order = np.lexsort((rank, table["train_size"].to_numpy()))
    return table.iloc[order].reset_index(drop=True)


def fixed_sequence(train_size: np.ndarray, rejected: np.ndarray) -> np.ndarray:
    """Whether each row is reached in its size's sequence: every earlier row of the size was rejected.

    Rows must already be in sequence order within each size (:func:`order_by_depth`).
    """
    sizes = np.asarray(train_size)
    rejected = np.asarray(rejected, dtype=bool)
    reached = np.zeros(len(sizes), dtype=bool)
    for size in pd.unique(sizes):
        index = np.flatnonzero(sizes == size)
        passed = np.concatenate([[True], np.cumprod(rejected[index][:-1]).astype(bool)])
        reached[index] = passed
    return reached


def baseline_by_size(baseline: Baseline | None, sizes: np.ndarray, caller: str) -> np.ndarray:
    """The baseline of each entry of ``sizes``, from one number or a ``{train_size: baseline}`` mapping / Series."""
    sizes = np.asarray(sizes)
    if baseline is None:
        return np.zeros(len(sizes))
    if isinstance(baseline, (Mapping, pd.Series)):
        lookup = {int(k): v for k, v in dict(baseline).items()}
        missing = sorted({int(s) for s in sizes} - set(lookup))
        if missing:
            raise ModelFitError(
                f"{caller}: `baseline` must give a value for every train size of the fit, but train_size {missing} "
                f"is missing (given: {sorted(lookup)})."
            )
        values = np.array([_finite(lookup[int(s)], caller) for s in sizes], dtype=float)
    else:
        values = np.full(len(sizes), _finite(baseline, caller))
    return values


# --------------------------------------------------------------------------------------------------------------
# Private helpers


def _finite(value: object, caller: str) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = float("nan")
    if not np.isfinite(number):
        raise ModelFitError(f"{caller}: `baseline` must be a finite number, but got baseline={value!r}.")
    return number

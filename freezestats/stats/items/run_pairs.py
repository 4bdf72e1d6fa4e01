"""The runs of one depth and of the reference at one train size, paired, and which contrast they get.

A depth's task-level contrast (:mod:`~freezestats.stats.items.task_level`) and its pair's failure model
(:mod:`~freezestats.stats.items.task_two_part`) must agree on which sizes a depth enters whole, so both read that
decision here (:func:`contrast_method`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from freezestats.stats.items.uncertainty import PAIR_KEYS

#: How a contrast was estimated, in ``method``: no run of the task failed; the healthy runs plus the failure
#: part (:mod:`freezestats.stats.items.task_two_part`); the depth's runs whole against the healthy reference
#: runs, plus the reference's failure part; or, with fewer than two healthy reference runs, all the pairs.
METHODS = ("paired", "two-part", "two-part, depth whole", "all runs")
#: the depth's runs whole (its runs mostly failed)
WHOLE = METHODS[2]


def unit_of(pairs: pd.DataFrame) -> np.ndarray:
    """Each pair's independent unit: its seed (one row each) or, when the pairs span several subset draws, its draw
    (seeds of one draw share its subset)."""
    return pairs["draw"].to_numpy() if pairs["draw"].nunique() > 1 else np.arange(len(pairs))


def n_units(pairs: pd.DataFrame, kept: pd.Series) -> int:
    """How many of the contrast's units keep a run."""
    return len(np.unique(unit_of(pairs)[kept.to_numpy()]))


def unit_differences(pairs: pd.DataFrame) -> pd.Series:
    """The contrast's per-unit differences (a draw's seeds averaged)."""
    return (pairs["value"] - pairs["value_ref"]).groupby(unit_of(pairs)).mean()


def pairs_at_size(at_size: pd.DataFrame, depth: int, reference: int, response: str) -> pd.DataFrame:
    """The runs of ``depth`` and of the reference at one size, one row per shared pairing key, with both runs'
    ``response`` and the subset draw they share."""
    keys = [k for k in PAIR_KEYS if k in at_size.columns]
    level = at_size[at_size["frozen_layers"] == depth].drop_duplicates(keys).set_index(keys)
    ref = at_size[at_size["frozen_layers"] == reference].drop_duplicates(keys).set_index(keys)
    common = level.index.intersection(ref.index)
    level, ref = level.loc[common], ref.loc[common]
    draws = level.reset_index()["subset_draw"].to_numpy() if "subset_draw" in keys else np.zeros(len(common))
    return pd.DataFrame(
        {
            "trial": level["trial"].astype(int).to_numpy(),
            "trial_ref": ref["trial"].astype(int).to_numpy(),
            "draw": draws,
            "value": level[response].astype(float).to_numpy(),
            "value_ref": ref[response].astype(float).to_numpy(),
            "failed": failure_flags(level),
            "failed_ref": failure_flags(ref),
        }
    )


def failure_flags(cell: pd.DataFrame) -> np.ndarray:
    """The runs' failure flags (all False where the table has none)."""
    if "failed" not in cell.columns:
        return np.zeros(len(cell), dtype=bool)
    return cell["failed"].fillna(False).astype(bool).to_numpy()


def contrast_method(pairs: pd.DataFrame, has_failures: bool) -> str:
    """Which contrast a depth gets against the reference at one size (:data:`METHODS`): paired where the task has
    no failed run; where it has, two-part where both cells keep two healthy units, the depth whole where only the
    reference does, and all runs where the reference does not."""
    paired, two_part, whole, all_runs = METHODS
    if not has_failures:
        return paired
    if n_units(pairs, ~pairs["failed_ref"]) < 2:
        return all_runs
    return two_part if n_units(pairs, ~pairs["failed"]) >= 2 else whole

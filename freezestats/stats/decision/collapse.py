"""Collapse, defined once: a run that predicts (nearly) one answer for everything.

A run collapsed if at least 95% of its predictions on the *select* half of the validation set, at the chosen
checkpoint, are one class; for regression, if those predictions are constant. The rule reads only the half that
chose the checkpoint, never the scored items or the evaluation pool, so conditioning on it cannot truncate the
outcome that is compared (a rule on the scored items would drop exactly the low scores it then averages over).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["COLLAPSE_SHARE", "collapsed"]

COLLAPSE_SHARE = 0.95


def collapsed(items: pd.DataFrame, regression: bool) -> pd.Series:
    """Per trial (index): whether the run collapsed, from its select-half predictions at the chosen checkpoint.

    ``items`` holds the per-item predictions (``trial``, ``half``, ``prediction_heldout``), as
    :func:`freezestats.results.item_predictions.item_predictions` reads them.
    """
    select = items[items["half"] == "select"]
    if regression:
        return select.groupby("trial")["prediction_heldout"].agg(lambda p: float(np.std(p)) < 1e-6)
    share = select.groupby("trial")["prediction_heldout"].agg(lambda p: p.value_counts(normalize=True).iloc[0])
    return share >= COLLAPSE_SHARE

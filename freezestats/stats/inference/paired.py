"""Contrasts against the reference level that assume no common variance: paired by seed, cell by cell.

The mixed model pools one residual variance over all cells; fine-tuning runs often break that (collapsed
cells have no spread, small-data cells a lot). Within a train size, every frozen level is run with the same
seeds as the reference, so each contrast can be estimated from its own per-seed differences alone.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.checks import prepare
from freezestats.stats.inference.multitest import adjust_p

__all__ = ["paired_contrasts"]


def paired_contrasts(
    data: pd.DataFrame,
    response: str = "best_dev",
    *,
    reference: int = 0,
    adjust: Literal["holm", "bonferroni", "none"] = "holm",
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Each frozen level minus the reference within each train size, from per-seed paired differences.

    Parameters
    ----------
    data
        Results table of one task (``task, frozen_layers, train_size, subset_draw, seed`` and ``response``);
        validated like every analysis here (grid rows of complete trials, runs without a response dropped).
    response
        ``best_dev``, ``final_dev`` or ``heldout``.
    reference
        The frozen level to compare with (default 0, full fine-tuning).
    adjust
        Multiplicity adjustment within each train size.
    confidence
        Coverage of the (unadjusted) intervals.

    Returns
    -------
    pandas.DataFrame
        ``train_size, frozen_layers, reference, n_pairs, estimate, se, df, ci_low, ci_high, t, p_val, p_adj,
        adjust``.

    Notes
    -----
    A pair is a (subset_draw, seed) run of the level and of the reference at the same size; unpaired runs
    are dropped (listwise). The estimate is the mean difference, its standard error ``sd(d)/sqrt(n)`` and the
    test a paired t-test with ``n − 1`` degrees of freedom. This uses only the two cells involved, so unequal
    variances across cells do not bias it; the price is fewer degrees of freedom than the pooled model.
    With identical differences in every pair (e.g. two collapsed cells) the SE is 0 and t is undefined
    (reported as NaN).

    References
    ----------
    Student (1908). The probable error of a mean. Biometrika 6(1), 1–25.
    """
    frame = prepare(
        data,
        columns=["frozen_layers", "train_size", "seed"],
        response=response,
        single_task=True,
        caller="paired_contrasts",
    )
    if reference not in set(frame["frozen_layers"]):
        raise ModelFitError(f"No run has the reference level frozen_layers={reference}.")
    if adjust not in ("holm", "bonferroni", "none"):
        raise ModelFitError(f"`adjust` must be 'holm', 'bonferroni' or 'none', but got {adjust!r}.")
    keys = ["subset_draw", "seed"] if "subset_draw" in frame.columns else ["seed"]
    rows = []
    for size, at_size in frame.groupby("train_size"):
        ref = at_size[at_size["frozen_layers"] == reference].set_index(keys)[response]
        family = []
        for level, runs in at_size[at_size["frozen_layers"] != reference].groupby("frozen_layers"):
            d = (runs.set_index(keys)[response] - ref).dropna().to_numpy(dtype=float)
            n = len(d)
            row = {
                "train_size": size,
                "frozen_layers": level,
                "reference": reference,
                "n_pairs": n,
                "estimate": float(d.mean()) if n else np.nan,
            }
            if n >= 2:
                se = float(d.std(ddof=1) / np.sqrt(n))
                half = stats.t.ppf(0.5 + confidence / 2, n - 1) * se
                t = row["estimate"] / se if se > 0 else np.nan
                p = float(2 * stats.t.sf(abs(t), n - 1)) if se > 0 else np.nan
                row.update(se=se, df=n - 1, ci_low=row["estimate"] - half, ci_high=row["estimate"] + half, t=t, p_val=p)
            else:
                row.update(se=np.nan, df=np.nan, ci_low=np.nan, ci_high=np.nan, t=np.nan, p_val=np.nan)
            family.append(row)
        p = np.array([r["p_val"] for r in family], dtype=float)
        p_adj = adjust_p(p, adjust)
        for r, q in zip(family, p_adj, strict=True):
            r.update(p_adj=float(q), adjust=adjust)
        rows.extend(family)
    if not rows:
        raise ModelFitError("paired_contrasts: no frozen level other than the reference has runs.")
    return pd.DataFrame(rows)

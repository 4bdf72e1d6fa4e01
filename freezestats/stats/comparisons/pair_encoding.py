"""Cross against bi encoding of a sentence-pair task: bi minus cross, paired by seed, cell by cell.

Where ``grid.pair_encoding`` runs both, a ``bi`` run and its ``cross`` run share the task, the frozen level,
the train size and subset, the seeds and the data order, and were trained alone or in the same group: only
how the pair is read differs (and the head it needs). So each contrast is estimated from its own per-seed
differences, as :mod:`freezestats.stats.inference.paired` does for frozen levels, without assuming that the two
encodings share a variance with each other or with the rest of the grid. Each task has its own table (its
metric: F1 for MRPC, Pearson for STS-B), and one row per trial within a task, so no trial random effect is
needed. Issue 14's source measured this gap once, without seeds: paraphrase 0.82 (bi) against 0.88 (cross),
STS 0.69 against 0.87.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.inference.multitest import adjust_p

__all__ = ["PAIR_ENCODING_COLUMNS", "pair_encoding_contrasts"]

PAIR_ENCODING_COLUMNS = [
    "trained_with", "frozen_layers", "train_size", "n_pairs", "cross", "bi", "estimate", "se", "df", "ci_low",
    "ci_high", "p_val", "p_adj", "adjust",
]  # fmt: skip
_PAIRED_BY = ("subset_draw", "seed", "order_seed")


def pair_encoding_contrasts(
    runs: pd.DataFrame, response: str, *, task: str, adjust: str = "holm", confidence: float = 0.95
) -> pd.DataFrame:
    """``bi - cross`` per (trained_with, frozen level, train size) of ``task``, from per-seed differences.

    ``runs`` holds grid runs with ``pair_encoding`` (complete trials; runs without a ``response`` are left
    out, and a seed counts only where both encodings have a value). ``cross`` and ``bi`` are the two means
    over the paired seeds, ``estimate`` their difference with a t interval on ``n_pairs - 1`` degrees of
    freedom; ``p_adj`` is adjusted within each (trained_with, train size) over its frozen levels.
    Raises :class:`ModelFitError` when ``task`` has no ``bi`` run paired with a ``cross`` one.
    """
    rows = runs[runs["task"] == task]
    if "pair_encoding" not in rows.columns or not rows["pair_encoding"].eq("bi").any():
        raise ModelFitError(f"task '{task}' has no runs with pair_encoding = 'bi'")
    keys = ["trained_with", "frozen_layers", "train_size", *(k for k in _PAIRED_BY if k in rows.columns)]
    rows = rows.dropna(subset=[response]).assign(trained_with=rows["trained_with"].fillna(task))
    wide = rows.pivot_table(index=keys, columns="pair_encoding", values=response, aggfunc="first")
    if not {"cross", "bi"} <= set(wide.columns):
        raise ModelFitError(f"task '{task}' has no bi run with a cross run of the same cell and seed")
    wide = wide.dropna(subset=["cross", "bi"])
    table = pd.DataFrame(
        [_contrast(cell, confidence, *where) for where, cell in wide.groupby(level=[0, 1, 2], sort=True)]
    )
    if table.empty:
        raise ModelFitError(f"task '{task}' has no bi run with a cross run of the same cell and seed")
    table["p_adj"] = table.groupby(["trained_with", "train_size"])["p_val"].transform(
        lambda p: adjust_p(p.to_numpy(), adjust)
    )
    table["adjust"] = adjust
    return table[PAIR_ENCODING_COLUMNS]


def _contrast(cell: pd.DataFrame, confidence: float, trained_with: str, frozen: int, size: int) -> dict:
    """One cell's paired contrast (NaN interval and p with fewer than two seeds)."""
    diff = (cell["bi"] - cell["cross"]).to_numpy(dtype=float)
    n = len(diff)
    estimate = float(diff.mean())
    se = float(diff.std(ddof=1) / np.sqrt(n)) if n > 1 else np.nan
    df = n - 1
    if n > 1 and se > 0:
        half = float(stats.t.ppf(0.5 + confidence / 2, df)) * se
        p_val = float(2 * stats.t.sf(abs(estimate) / se, df))
    else:  # one seed, or identical differences: no spread to build an interval from
        half, p_val = np.nan, np.nan
    return {
        "trained_with": trained_with,
        "frozen_layers": int(frozen),
        "train_size": int(size),
        "n_pairs": n,
        "cross": float(cell["cross"].mean()),
        "bi": float(cell["bi"].mean()),
        "estimate": estimate,
        "se": se,
        "df": df,
        "ci_low": estimate - half,
        "ci_high": estimate + half,
        "p_val": p_val,
    }

r"""Item uncertainty: the contrasts' extra variance from the validation items, which every run shares.

Every run of a study is scored on the same validation items, so the seed-level model's intervals are
conditional on that one item sample: they say how the contrast would vary with other seeds *on these items*.
A reader who asks about the task (new items from the same distribution) needs the item-sampling variance as
well. On SST-2's 436-item score half it is of the order of a point, more than the seed spread at n = 1000.

For one contrast (depth :math:`k` against the reference, at one train size) take the per-item pseudo-values
(:mod:`freezestats.stats.items.pseudo_values`; for accuracy, the item's correctness) of the paired runs and their
differences :math:`D_{si} = \phi_{k,s,i} - \phi_{0,s,i}` over paired seeds :math:`s = 1..S` and items
:math:`i = 1..I`. Model them as a crossed two-way random layout,
:math:`D_{si} = \delta + u_s + w_i + e_{si}`. The contrast's estimate is :math:`\bar D`, with

.. math:: \operatorname{Var}(\bar D) = \sigma_u^2/S + \sigma_w^2/I + \sigma_e^2/(SI).

The seed-level model (items fixed) estimates :math:`\sigma_u^2/S + \sigma_e^2/(SI)`; the item term
:math:`\sigma_w^2/I` is what it leaves out. With the two-way mean squares,
:math:`E[MS_{item}] = \sigma_e^2 + S\sigma_w^2` and :math:`E[MS_{res}] = \sigma_e^2`, so

.. math:: \hat v_{item} = \max\{0,\ (MS_{item} - MS_{res}) / (S\,I)\}

is unbiased before truncation (Cornfield & Tukey 1956). Its Satterthwaite df combine with the model's df for
the total :math:`se^2 = se_{seed}^2 + \hat v_{item}`. A bootstrap over 5 seeds and the items would under-cover
(5 units), and one over items alone would double-count :math:`\sigma_e^2`; the decomposition needs neither.
With one seed per cell :math:`MS_{res}` is not estimable and :math:`MS_{item}/I` (which includes
:math:`\sigma_e^2/I`) is used, conservatively.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.inference.sequence import NONINFERIORITY_COLUMNS, fixed_sequence, order_by_depth
from freezestats.stats.items.pseudo_values import pseudo_values

__all__ = [
    "ITEM_UNCERTAINTY_COLUMNS",
    "excess_over_noise",
    "item_variance",
    "noninferiority_with_items",
    "run_pseudo_values",
]

#: Relative size below which a difference of two mean squares is rounding, not signal.
_ROUNDING = 1e-9

#: The scored checkpoint and the items each response scores: ``heldout`` scores the score half only.
RESPONSE_ITEMS = {"best_dev": ("prediction_best", None), "heldout": ("prediction_heldout", "score"),
                  "final_dev": ("prediction_final", None)}  # fmt: skip
PAIR_KEYS = ["subset_draw", "seed", "order_seed"]

ITEM_UNCERTAINTY_COLUMNS = [
    "train_size",
    "frozen_layers",
    "reference",
    "estimate",
    "se_seed",
    "df_seed",
    "lower_seed",
    "noninferior_seed",
    "se_item",
    "df_item",
    "se",
    "df",
    "item_share",
    "lower",
    "margin",
    "p_val",
    "tested",
    "noninferior",
    "alpha",
    "n_pairs",
    "n_items",
]


def excess_over_noise(signal: float, noise: float) -> float:
    """``signal - noise`` where it is above their rounding, else 0.

    Why: where runs differ on a single item (two collapsed runs, one item apart) :math:`MS_{item}` equals
    :math:`MS_{res}` exactly, but in floating point one comes out 1e-17 above the other. Kept, that excess is an
    item variance of 1e-20 with Satterthwaite df of 3e-29, and its t quantile made an interval 1e149 wide on the
    realistic simulator (study 519, n = 50, frozen 1)."""
    excess = signal - noise
    return excess if excess > _ROUNDING * max(abs(signal), abs(noise)) else 0.0


def item_variance(differences: np.ndarray) -> tuple[float, float]:
    """``(v_item, df_item)``: the item part of :math:`\\operatorname{Var}(\\bar D)` of an S x I table of paired
    per-item differences, and its Satterthwaite df (``inf`` when it is truncated at 0)."""
    d = np.asarray(differences, dtype=float)
    if d.ndim != 2 or d.shape[1] < 2 or d.shape[0] < 1:
        raise ModelFitError(f"item_variance: need an S x I table with I >= 2 items, but got shape {d.shape}.")
    n_seeds, n_items = d.shape
    item_means = d.mean(axis=0)
    ms_item = n_seeds * np.sum((item_means - item_means.mean()) ** 2) / (n_items - 1)
    if n_seeds == 1:  # no replication: MS_item also holds sigma_e^2, so this over-states the item part
        return float(ms_item / n_items), float(n_items - 1)
    resid = d - d.mean(axis=1, keepdims=True) - item_means[None, :] + d.mean()
    df_res = (n_seeds - 1) * (n_items - 1)
    ms_res = np.sum(resid**2) / df_res
    excess = excess_over_noise(ms_item, ms_res)
    if excess <= 0:
        return 0.0, float("inf")
    df_item = excess**2 / (ms_item**2 / (n_items - 1) + ms_res**2 / df_res)
    return float(excess / (n_seeds * n_items)), float(df_item)


def run_pseudo_values(items: pd.DataFrame, response: str, metric: str) -> dict[int, pd.Series]:
    """Per run (trial number): the pseudo-values of ``metric`` on the items ``response`` scores, indexed by item."""
    if response not in RESPONSE_ITEMS:
        raise ModelFitError(f"Item uncertainty needs a response in {list(RESPONSE_ITEMS)}, but got {response!r}.")
    column, half = RESPONSE_ITEMS[response]
    scored = items if half is None else items[items["half"] == half]
    out = {}
    for trial, run in scored.groupby("trial", sort=False):
        run = run.sort_values("idx")
        values = pseudo_values(metric, run[column].to_numpy(), run["label"].to_numpy())
        out[int(trial)] = pd.Series(values, index=run["idx"].to_numpy())
    return out


def noninferiority_with_items(
    sequence: pd.DataFrame, runs: pd.DataFrame, items: pd.DataFrame, response: str, metric: str
) -> pd.DataFrame:
    """The non-inferiority sequence again, with the item variance added to each contrast's seed-level variance.

    Parameters
    ----------
    sequence
        One task's :func:`freezestats.stats.noninferiority_sequence` table (seed-level, from the mixed model);
        its margin and per-test alpha are kept.
    runs
        That task's grid runs (the results table), with ``trial`` and the pairing keys.
    items
        Their per-item predictions (:func:`freezestats.results.item_predictions.item_predictions`).
    response, metric
        The analysed response (``heldout``, ``best_dev`` or ``final_dev``) and the task's metric.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`ITEM_UNCERTAINTY_COLUMNS`, one row per row of ``sequence``: the seed-only bound and
        decision (``lower_seed``, ``noninferior_seed``) beside the one with item uncertainty (``lower``,
        ``p_val``, ``tested``, ``noninferior``: the same fixed sequence). ``item_share`` is the item part's share
        of the total variance.
    """
    missing = [c for c in NONINFERIORITY_COLUMNS if c not in sequence.columns]
    if missing:
        raise ModelFitError(f"noninferiority_with_items: `sequence` lacks {missing} (noninferiority_sequence's).")
    phi = run_pseudo_values(items, response, metric)
    rows = []
    for row in order_by_depth(sequence).itertuples(index=False):
        v_item, df_item, n_pairs, n_items = _contrast_item_variance(runs, phi, row)
        se_seed, df_seed = float(row.se), float(row.df)
        var = se_seed**2 + v_item
        parts = se_seed**4 / df_seed + (v_item**2 / df_item if np.isfinite(df_item) else 0.0)
        df = var**2 / parts if parts > 0 else df_seed  # both parts zero (a floored, collapsed contrast): keep df
        se = float(np.sqrt(var))
        rows.append(
            {
                "train_size": row.train_size,
                "frozen_layers": row.frozen_layers,
                "reference": row.reference,
                "estimate": row.estimate,
                "se_seed": se_seed,
                "df_seed": df_seed,
                "lower_seed": row.lower,
                "noninferior_seed": bool(row.noninferior),
                "se_item": float(np.sqrt(v_item)),
                "df_item": df_item,
                "se": se,
                "df": df,
                "item_share": v_item / var if var > 0 else np.nan,
                "lower": row.estimate - stats.t.ppf(1 - row.alpha, df) * se,
                "margin": row.margin,
                "p_val": float(stats.t.sf((row.estimate + row.margin) / se, df)),
                "alpha": row.alpha,
                "n_pairs": n_pairs,
                "n_items": n_items,
            }
        )
    table = pd.DataFrame(rows)
    rejected = table["p_val"].to_numpy() < table["alpha"].to_numpy()
    table["tested"] = fixed_sequence(table["train_size"].to_numpy(), rejected)
    table["noninferior"] = table["tested"] & rejected
    return table[ITEM_UNCERTAINTY_COLUMNS]


def _contrast_item_variance(
    runs: pd.DataFrame, phi: dict[int, pd.Series], row: object
) -> tuple[float, float, int, int]:
    """Item variance of one contrast from the runs of its two cells paired by seed (and draw, order)."""
    size = runs[runs["train_size"] == row.train_size]  # type: ignore[attr-defined]
    keys = [k for k in PAIR_KEYS if k in size.columns]
    level = size[size["frozen_layers"] == row.frozen_layers].set_index(keys)["trial"]  # type: ignore[attr-defined]
    ref = size[size["frozen_layers"] == row.reference].set_index(keys)["trial"]  # type: ignore[attr-defined]
    pairs = [(int(level[k]), int(ref[k])) for k in level.index.intersection(ref.index) if level[k] in phi]
    pairs = [(a, b) for a, b in pairs if b in phi]
    if not pairs:
        raise ModelFitError(
            f"No paired runs with stored predictions for frozen_layers={row.frozen_layers} against "  # type: ignore[attr-defined]
            f"{row.reference} at train_size={row.train_size}."  # type: ignore[attr-defined]
        )
    common = phi[pairs[0][0]].index
    for a, b in pairs:
        common = common.intersection(phi[a].index).intersection(phi[b].index)
    diffs = np.vstack([phi[a].loc[common].to_numpy() - phi[b].loc[common].to_numpy() for a, b in pairs])
    v_item, df_item = item_variance(diffs)
    return v_item, df_item, len(pairs), len(common)

r"""Contrasts that speak of the task: paired by seed and by item, each depth against the reference on its own.

A user asks "what does freezing k layers cost on *my task*", i.e. over new seeds and new examples of the task,
not over new seeds scored on the one validation set every run shares. And the answer for depth :math:`k` must
not depend on which other depths the study happened to run. Both follow from estimating each contrast from its
own two cells only, paired twice:

* **by seed**: the runs of depth :math:`k` and of the reference with the same seed (subset draw, data order)
  share the subset, the data order and the head's initialisation, so their difference removes what they share.
  Its per-seed spread is the contrast's own: no variance is borrowed from other depths (the mixed model's
  per-size residual variance is, and its verdict moved with the depths pooled: issue 28), and no assumption of
  one additive seed effect is made (real runs' within-seed correlation with the reference ranges from -0.3 to
  0.99 across cells);
* **by item**: both runs are scored on the same items, so the per-item differences :math:`D_{si} =
  \phi_{k,s,i} - \phi_{r,s,i}` (jackknife pseudo-values, :mod:`freezestats.stats.items.pseudo_values`; the
  item's correctness for accuracy) carry how the two depths disagree item by item.

With the crossed layout :math:`D_{si} = \delta + u_s + w_i + e_{si}` the variance of :math:`\bar D` over new
seeds *and new items* is :math:`\sigma_u^2/S + \sigma_w^2/I + \sigma_e^2/(SI)`, estimated without bias by

.. math:: \widehat{\operatorname{Var}} = \frac{MS_{seed} + MS_{item} - MS_{res}}{S\,I}
   = \underbrace{\frac{s_d^2}{S}}_{\text{seeds, this set}}
   + \underbrace{\frac{MS_{item} - MS_{res}}{S\,I}}_{\text{items}}

where :math:`s_d^2` is the sample variance of the per-seed differences of the metric (the paired t test's).
The item part is truncated at 0 (:func:`~freezestats.stats.items.uncertainty.item_variance`), and the df are
Satterthwaite's for the three mean squares. For balanced data this is the REML fit of
``lmer(D ~ 1 + (1|seed) + (1|item))`` with lmerTest's Satterthwaite df whenever no component sits at 0
(``tests/data/task_level_reference.R`` checks it). With ``population="evaluation_set"`` the item part is left
out: the paired t interval over seeds, which speaks of the drawn validation items only.

With several subset draws the draw is the unit of the seed part (the per-draw means of the per-seed
differences): seeds of one draw share its subset, so they are not independent replicates of the task.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats.items.partial_pairs import partially_paired_contrast, seed_item_summary
from freezestats.stats.items.run_pairs import WHOLE, contrast_method, pairs_at_size, unit_differences, unit_of
from freezestats.stats.items.task_two_part import (
    DEFAULT_FAILURE_RATES,
    FailureParts,
    FailureRates,
    failure_parts,
    with_failure_part,
)
from freezestats.stats.items.uncertainty import item_variance, run_pseudo_values
from freezestats.tasks.metrics import METRIC_RANGES

__all__ = ["POPULATIONS", "TASK_CONTRAST_COLUMNS", "crossed_contrast", "task_level_contrasts"]

Population = Literal["task", "evaluation_set"]

#: What each population's numbers speak of, in the words every table, sentence and caption uses.
POPULATIONS: dict[str, str] = {
    "task": "the task (new seeds and new evaluation items)",
    "evaluation_set": "this evaluation set (new seeds, the same evaluation items)",
}

TASK_CONTRAST_COLUMNS = [
    "train_size",
    "frozen_layers",
    "reference",
    "estimate",
    "se_seed",
    "df_seed",
    "se_item",
    "df_item",
    "se",
    "df",
    "item_share",
    "ci_low",
    "ci_high",
    "se_lower",
    "df_lower",
    "se_upper",
    "df_upper",
    "lower_tail",
    "p_fail",
    "p_fail_reference",
    "failure_sides",
    "n_pairs",
    "n_items",
    "population",
    "method",
]


def crossed_contrast(differences: np.ndarray, per_seed: np.ndarray | None = None) -> dict[str, float]:
    """Estimate, standard errors and df of one contrast from its S x I table of paired per-item differences.

    ``per_seed`` are the per-unit differences of the reported metric (default: the table's row means, which is
    the same thing for accuracy); the estimate is their mean and the seed part their paired-t variance. Returns
    ``estimate, se_seed, df_seed, se_item, df_item, se, df, n_items``: ``se`` and ``df`` speak of the task.

    >>> d = np.array([[0.0, 1.0, 0.0, -1.0], [1.0, 1.0, 0.0, 0.0], [0.0, 1.0, -1.0, 0.0]])
    >>> out = crossed_contrast(d)
    >>> round(out["estimate"], 4), round(out["se_seed"], 4), round(out["se"], 4)
    (0.1667, 0.1667, 0.3333)
    """
    d = np.asarray(differences, dtype=float)
    if d.ndim != 2 or d.shape[0] < 2 or d.shape[1] < 2:
        raise ModelFitError(f"crossed_contrast: need >= 2 paired seeds and >= 2 items, but got shape {d.shape}.")
    units = d.mean(axis=1) if per_seed is None else np.asarray(per_seed, dtype=float)
    if units.ndim != 1 or len(units) < 2:
        raise ModelFitError(f"crossed_contrast: need >= 2 per-seed differences, but got {len(np.atleast_1d(units))}.")
    v_seed = float(np.var(units, ddof=1) / len(units))
    df_seed = float(len(units) - 1)
    return seed_item_summary(float(units.mean()), (v_seed, df_seed), item_variance(d), d.shape[1])


def task_level_contrasts(
    runs: pd.DataFrame,
    items: pd.DataFrame | None,
    *,
    response: str,
    metric: str,
    reference: int = 0,
    population: Population = "task",
    confidence: float = 0.95,
    failure_rates: FailureRates = DEFAULT_FAILURE_RATES,
) -> pd.DataFrame:
    """Every depth against ``reference`` at every train size, from that pair of cells alone.

    Parameters
    ----------
    runs
        One task's grid runs (the results table): ``trial``, ``train_size``, ``frozen_layers``, the pairing keys
        (``seed``, and ``subset_draw`` / ``order_seed`` where present) and the ``response`` column.
    items
        Their per-item predictions (:func:`freezestats.results.item_predictions.item_predictions`); needed for
        ``population="task"``, ignored otherwise.
    response, metric
        The analysed response (``heldout``, ``best_dev`` or ``final_dev``) and the task's metric.
    reference
        The depth every other depth is compared with (0: full fine-tuning).
    population
        ``"task"``: seeds and items both vary (:data:`POPULATIONS`). ``"evaluation_set"``: seeds only, the
        paired t interval.
    confidence
        Level of the two-sided per-comparison interval ``ci_low, ci_high``, kept within the contrast's range
        (:data:`~freezestats.tasks.metrics.METRIC_RANGES`: within -1..1 for accuracy).
    failure_rates
        Where the task has failed runs, the model of the pair's failure rates in the failure part
        (:data:`~freezestats.stats.items.task_two_part.FAILURE_RATES`). ``"pooled_joint"`` (the default,
        :data:`~freezestats.stats.items.task_two_part.DEFAULT_FAILURE_RATES`): the binomial GLMM of the pair's
        runs with a random intercept per size, the failure part's interval from the two rates drawn jointly and
        averaged over the level x size SD (:mod:`~freezestats.stats.failures.sd_integration`): on 400 simulated
        studies no contrast shown outside the 93-97% band, and a familywise error at the margin of 0.015 over 800
        null studies, since each test reads the failure part at its own level. ``"pooled"``: the same GLMM with
        each rate's Wilson interval joined by MOVER, the default until this one's error was fixed: above the band
        at 24 of 30 contrasts (7 shown above), familywise error 0.025. ``"slope"``, Firth's depth x log2-size
        logistic fit, whose rates follow their fall with train size: it ends the large sizes' over-coverage but
        under-covers deep depths whose flagged rates are not log-linear in size
        (``bench/results/coverage_task_level_slope.txt``: 0.74-0.78 at 100 examples for depths 4-6).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`TASK_CONTRAST_COLUMNS`, one row per (train size, depth other than the reference) that has
        two or more paired runs. ``item_share`` is the item part's share of the variance (0 for the evaluation
        set). ``failure_sides`` says how a two-part contrast's failure part got its interval
        (:data:`~freezestats.stats.items.task_two_part.FAILURE_SIDES`), including where ``"pooled_joint"`` fell
        back to Wilson-MOVER; ``lower_tail`` its lower SE and df with the failure part read at each one-sided
        level of :data:`~freezestats.stats.inference.tail_matched.TAIL_ALPHAS`, for tests at their own level
        (:mod:`~freezestats.stats.inference.tail_matched`; None where there is no failure part, or the slope
        model's). A contrast with fewer than two pairs is left out (nothing to estimate its spread from).
    """
    if population not in POPULATIONS:
        raise ModelFitError(
            f"task_level_contrasts: `population` must be one of {list(POPULATIONS)}, got {population!r}."
        )
    if population == "task" and items is None:
        raise ModelFitError("task_level_contrasts: population='task' needs the runs' per-item predictions.")
    phi = run_pseudo_values(items, response, metric) if population == "task" else {}
    parts = _FailureModels(runs, response, int(reference), failure_rates)
    low, high = METRIC_RANGES.get(metric, (-np.inf, np.inf))
    span = high - low  # no contrast of the metric lies further from 0: an interval with df near 0 stops there
    rows = []
    for size, at_size in runs.groupby("train_size", sort=True):
        for depth in sorted(set(at_size["frozen_layers"].astype(int)) - {int(reference)}):
            pairs = pairs_at_size(at_size, depth, reference, response)
            if len(unit_differences(pairs)) < 2:
                continue
            out = _contrast(pairs, phi, (int(size), depth, int(reference)), parts(depth), population, confidence)
            lower = stats.t.ppf(0.5 + confidence / 2, out["df_lower"]) * out["se_lower"]
            upper = stats.t.ppf(0.5 + confidence / 2, out["df_upper"]) * out["se_upper"]
            var = out["se"] ** 2
            rows.append(
                {
                    "train_size": int(size),
                    "frozen_layers": depth,
                    "reference": int(reference),
                    **out,
                    "item_share": out["se_item"] ** 2 / var if var > 0 else 0.0,
                    "ci_low": max(out["estimate"] - lower, -span),
                    "ci_high": min(out["estimate"] + upper, span),
                    "n_items": out.get("n_items", 0) if population == "task" else 0,
                    "population": population,
                }
            )
    if not rows:
        raise ModelFitError("task_level_contrasts: no depth has two or more runs paired with the reference's.")
    return pd.DataFrame(rows)[TASK_CONTRAST_COLUMNS]


class _FailureModels:
    """Each depth's failure model, fitted on its runs and the reference's only (every size), once per depth.

    Only the two cells' own depths enter, so a depth's contrast, failure part included, is the same whichever
    other depths the study ran: pooling the rates over every depth of the task moved a 97.5% bound by a median
    1.3-2.4 points when the other depths were removed (``bench/pooling_task_level.py``)."""

    def __init__(self, runs: pd.DataFrame, response: str, reference: int, failure_rates: FailureRates) -> None:
        self._runs, self._response, self._reference, self._rates = runs, response, reference, failure_rates
        self._fitted: dict[int, FailureParts | None] = {}

    def __call__(self, depth: int) -> FailureParts | None:
        if depth not in self._fitted:
            own = self._runs[self._runs["frozen_layers"].astype(int).isin([depth, self._reference])]
            try:
                self._fitted[depth] = failure_parts(own, self._response, self._rates)
            except ModelFitError:  # a failure pattern the GLMM cannot fit: the contrast from all its pairs
                self._fitted[depth] = None
        return self._fitted[depth]


def _contrast(
    pairs: pd.DataFrame,
    phi: dict[int, pd.Series],
    cell: tuple[int, int, int],
    parts: FailureParts | None,
    population: Population,
    confidence: float,
) -> dict:
    """One contrast (``cell`` is size, depth, reference): the healthy runs' plus the failure part where the task
    has failed runs (the depth whole where its runs mostly failed), else all the pairs (``method``: see
    :func:`~freezestats.stats.items.run_pairs.contrast_method`).

    The healthy part compares each cell's own healthy runs, paired by seed where both of a seed's runs are healthy
    (:mod:`~freezestats.stats.items.partial_pairs`): the pairs where both are healthy alone are a selection that
    biases the contrast when the flag follows the seed's skill."""
    size, depth, _ = cell
    every = pd.Series(True, index=pairs.index)
    method = contrast_method(pairs, parts is not None)
    keep = ~pairs["failed"] if method == "two-part" else every
    keep_ref = ~pairs["failed_ref"] if method.startswith("two-part") else every
    if keep.equals(keep_ref):
        use = pairs[keep]
        units = unit_differences(use).to_numpy()
        if population == "task":
            out = crossed_contrast(_item_differences(use, phi, size, depth), per_seed=units)
        else:
            out = _seed_only(units)
        out["n_pairs"] = len(use)
    else:
        out = _partial_contrast(pairs, keep.to_numpy(), keep_ref.to_numpy(), phi if population == "task" else None,
                                (size, depth))  # fmt: skip
    if method != "all runs" and parts is not None:
        whole = method == WHOLE
        return {**with_failure_part(out, parts, cell, confidence, whole_depth=whole), "method": method}
    return {**out, "se_lower": out["se"], "df_lower": out["df"], "se_upper": out["se"], "df_upper": out["df"],
            "lower_tail": None, "p_fail": 0.0, "p_fail_reference": 0.0, "failure_sides": "none",
            "method": method}  # fmt: skip


def _partial_contrast(
    pairs: pd.DataFrame,
    keep: np.ndarray,
    keep_ref: np.ndarray,
    phi: dict[int, pd.Series] | None,
    where: tuple[object, int],
) -> dict:
    """The depth's kept runs against the reference's kept runs, each cell's own, paired where a unit keeps both
    (:func:`~freezestats.stats.items.partial_pairs.partially_paired_contrast`). The unit is the seed, or the
    subset draw with several draws (its runs' mean). ``where`` is (size, depth), for messages."""
    unit = unit_of(pairs)
    sides = [(unit[keep], pairs.loc[keep, "trial"], pairs.loc[keep, "value"]),
             (unit[keep_ref], pairs.loc[keep_ref, "trial_ref"], pairs.loc[keep_ref, "value_ref"])]  # fmt: skip
    grouped = [
        pd.DataFrame({"unit": units, "trial": trials.to_numpy(), "value": scores.to_numpy()})
        .groupby("unit", sort=True)
        .agg(value=("value", "mean"), trials=("trial", list))
        for units, trials, scores in sides
    ]
    position = {u: j for j, u in enumerate(grouped[1].index)}
    shared = [(i, position[u]) for i, u in enumerate(grouped[0].index) if u in position]
    values = [side["value"].to_numpy() for side in grouped]
    items = _unit_items([side["trials"] for side in grouped], phi, where) if phi is not None else (None, None)
    out = partially_paired_contrast(values[0], values[1], shared, *items)
    out["n_pairs"] = len(shared)
    return out


def _unit_items(
    tables: list[pd.Series], phi: dict[int, pd.Series], where: tuple[object, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Each side's units x items table of pseudo-values (a unit's runs averaged), on the items every run scored."""
    common = _scored_items([t for side in tables for runs in side for t in runs], phi, where)
    return tuple(
        np.vstack([np.mean([phi[t].loc[common].to_numpy() for t in runs], axis=0) for runs in side]) for side in tables
    )


def _item_differences(pairs: pd.DataFrame, phi: dict[int, pd.Series], size: object, depth: int) -> np.ndarray:
    """The S x I table of per-item pseudo-value differences of the pairs, on the items every one of them scored."""
    usable = list(zip(pairs["trial"], pairs["trial_ref"], strict=True))
    common = _scored_items([t for pair in usable for t in pair], phi, (size, depth))
    return np.vstack([phi[a].loc[common].to_numpy() - phi[b].loc[common].to_numpy() for a, b in usable])


def _scored_items(trials: list[int], phi: dict[int, pd.Series], where: tuple[object, int]) -> pd.Index:
    """The items every one of ``trials`` scored; refuses runs without stored predictions (``where``: size, depth)."""
    missing = sorted({t for t in trials if t not in phi})
    if missing:
        size, depth = where
        raise ModelFitError(
            f"{len(missing)} runs of frozen_layers={depth} or its reference at train_size={size} (trials "
            f"{missing[:3]}) have no stored predictions, so the items' part of the task-level interval cannot be "
            "estimated."
        )
    common = phi[trials[0]].index
    for t in trials[1:]:
        common = common.intersection(phi[t].index)
    return common


def _seed_only(units: np.ndarray) -> dict[str, float]:
    """The paired t contrast over seeds: what varies is the seed, the evaluation items stay the drawn ones."""
    se = float(np.std(units, ddof=1) / np.sqrt(len(units)))
    df = float(len(units) - 1)
    return {"estimate": float(units.mean()), "se_seed": se, "df_seed": df, "se_item": 0.0, "df_item": float("inf"),
            "se": se, "df": df}  # fmt: skip

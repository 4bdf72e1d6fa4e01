"""All tasks in one model: does the effect of freezing depend on the task?

The per-task models (:mod:`freezestats.stats.models`) answer "what does freezing cost on this task". A
study with several tasks also asks whether the answer transfers; this module fits one mixed model with a
task term and tests the task × freezing interaction.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import statsmodels.formula.api as smf
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats._checks import normalize_results

__all__ = ["PooledFit", "fit_pooled", "task_interaction_test"]

_FULL = "{y} ~ C(task) * C(frozen_layers, Treatment(0)) * C(train_size)"
_NO_TASK_BY_FREEZE = "{y} ~ C(task) * C(train_size) + C(frozen_layers, Treatment(0)) * C(train_size)"


@dataclass(frozen=True)
class PooledFit:
    """A mixed model of all tasks: tidy ``fixed_effects`` and ``variance_components``, and its warnings."""

    result: object
    formula: str
    fixed_effects: pd.DataFrame
    variance_components: pd.DataFrame
    converged: bool
    warnings: tuple[str, ...]


def _prepare(data: pd.DataFrame, response: str, include_failed: bool) -> pd.DataFrame:
    needed = ["task", "frozen_layers", "train_size", "seed", response]
    if data is None or len(data) == 0:
        raise ModelFitError("The results table is empty: nothing to fit.")
    missing = [c for c in needed if c not in data.columns]
    if missing:
        raise ModelFitError(f"The results table lacks column(s) {missing}.")
    data = normalize_results(data)
    frame = data[data["role"] == "grid"]
    if "state" in frame.columns:
        frame = frame[frame["state"] == "complete"]
    if not include_failed and "failed" in frame.columns:
        frame = frame[~frame["failed"].astype(bool)]
    frame = frame.dropna(subset=[response])
    if frame["task"].nunique() < 2:
        raise ModelFitError(
            f"A pooled model needs at least 2 tasks, but the table has {sorted(frame['task'].unique())}; "
            "use the per-task model (fit_mixed)."
        )
    if 0 not in set(frame["frozen_layers"]):
        raise ModelFitError(
            "The pooled model uses frozen_layers = 0 (full fine-tuning) as reference, but no run has it."
        )
    cells = frame.groupby(["task", "frozen_layers", "train_size"]).size()
    expected = frame["task"].nunique() * frame["frozen_layers"].nunique() * frame["train_size"].nunique()
    if len(cells) < expected:
        raise ModelFitError(
            f"Every task must have every (frozen_layers, train_size) cell for the task × freezing model, but only "
            f"{len(cells)} of {expected} cells have runs."
        )
    if frame["seed"].nunique() < 2:
        raise ModelFitError("A single seed leaves no seed variance to model; run more seeds (grid.seeds).")
    frame = frame.copy()
    frame["seed_group"] = frame["task"].astype(str) + ":" + frame["seed"].astype(str)
    return frame


def _mixed(frame: pd.DataFrame, formula: str, reml: bool) -> tuple[object, list[str]]:
    caught: list[str] = []
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        model = smf.mixedlm(formula, frame, groups=frame["seed_group"])
        result = None
        for method in ("bfgs", "lbfgs", "powell"):
            try:
                result = model.fit(reml=reml, method=method)
            except (np.linalg.LinAlgError, ValueError):
                continue
            if result.converged:
                break
    caught.extend(str(w.message) for w in seen if "boundary" not in str(w.message).lower())
    if result is None:
        raise ModelFitError(f"The pooled mixed model could not be fitted with any optimizer ({formula}).")
    if not result.converged:
        caught.append("the optimizer did not converge")
    return result, caught


def fit_pooled(data: pd.DataFrame, response: str = "best_dev", *, include_failed: bool = True) -> PooledFit:
    """Fit ``response ~ task * frozen_layers * train_size`` over all tasks, with a seed intercept per task.

    Returns
    -------
    PooledFit
        ``fixed_effects`` (``term, estimate, se, ci_low, ci_high, z, p_val``) and ``variance_components``
        (``component, variance, sd`` for ``seed`` and ``residual``).

    Notes
    -----
    Seeds are nested in tasks (each task's runs are separate fine-tunings), so the random intercept is
    per (task, seed). The fixed part is the full cell-means model, so its fitted cell means equal each
    task's own; what pooling adds is one residual variance and the test of :func:`task_interaction_test`.
    Failed runs are kept unless ``include_failed=False``. Reference levels: the first task in sorted order,
    frozen_layers = 0, the smallest train size.
    """
    frame = _prepare(data, response, include_failed)
    formula = _FULL.format(y=response)
    result, caught = _mixed(frame, formula, reml=True)
    ci = result.conf_int()
    names = list(result.fe_params.index)
    fixed = pd.DataFrame(
        {
            "term": names,
            "estimate": result.fe_params.to_numpy(),
            "se": result.bse_fe.to_numpy(),
            "ci_low": ci.loc[names, 0].to_numpy(),
            "ci_high": ci.loc[names, 1].to_numpy(),
            "z": result.tvalues.loc[names].to_numpy(),
            "p_val": result.pvalues.loc[names].to_numpy(),
        }
    )
    seed_var = float(result.cov_re.iloc[0, 0])
    components = pd.DataFrame(
        {
            "component": ["seed", "residual"],
            "variance": [seed_var, float(result.scale)],
            "sd": [np.sqrt(seed_var), np.sqrt(float(result.scale))],
        }
    )
    return PooledFit(result, formula, fixed, components, bool(result.converged), tuple(caught))


def task_interaction_test(data: pd.DataFrame, response: str = "best_dev") -> pd.DataFrame:
    """Likelihood-ratio test: does the effect of freezing (at each size) differ between tasks?

    Compares, by ML, the full model with a model in which the freezing effects (and their dependence on size)
    are shared by all tasks while each task keeps its own size profile.

    Returns one row: ``test, lr_stat, df, p_val, llf_full, llf_reduced``.
    """
    frame = _prepare(data, response, include_failed=True)
    full, _ = _mixed(frame, _FULL.format(y=response), reml=False)
    reduced, _ = _mixed(frame, _NO_TASK_BY_FREEZE.format(y=response), reml=False)
    lr = max(0.0, 2 * (full.llf - reduced.llf))
    df = len(full.fe_params) - len(reduced.fe_params)
    return pd.DataFrame(
        [
            {
                "test": "task:frozen_layers (+ task:frozen_layers:train_size)",
                "lr_stat": lr,
                "df": df,
                "p_val": float(stats.chi2.sf(lr, df)),
                "llf_full": float(full.llf),
                "llf_reduced": float(reduced.llf),
            }
        ]
    )

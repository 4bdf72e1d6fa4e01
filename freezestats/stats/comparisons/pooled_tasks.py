r"""All tasks in one model: does the effect of freezing depend on the task?

The per-task models (:mod:`freezestats.stats.models`) answer "what does freezing cost on this task". A
study with several tasks also asks whether the answer transfers; this module fits one mixed model with a
task term; :mod:`.task_interaction` tests the task × freezing interaction in it.

The model is the per-task default (:mod:`.mixed_grouped`) side by side: a mean per (task, frozen_layers,
train_size) cell, a residual variance per task × train size (the run-to-run spread differs between tasks as
much as between sizes), a seed intercept per task (``(1 | task:seed)``: seed 1 of SST-2 and seed 1 of CoLA are
different fine-tunings) and a seed-by-size intercept per task (``(1 | task:seed:train_size)``, dropped when
estimated at zero, as in the per-task model). In nlme:
``lme(y ~ task * frozen_layers * train_size, random = ~ 1 | task_seed / train_size, weights = varIdent(~ 1 |
task:train_size))``. It is fitted by :mod:`freezestats.stats.models.reml`, since statsmodels has one residual
variance.

Tasks are only pooled when their responses are on one scale: a freezing effect of 0.05 in MCC is not one of
0.05 in accuracy. Tasks whose ``metric`` differs are refused unless ``standardize=True``, which divides each
task's response by that task's own SD (over its analysed runs, after centring on its mean); the test is then
of effects in SD units, and every output says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import patsy

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.input_table import normalize_results
from freezestats.stats.design.model_frame import _BOUNDARY_TOL, _coef_table, _indicators
from freezestats.stats.inference.ftest import (
    ComponentModel,
)
from freezestats.stats.models.reml import Component, RemlFit

__all__ = ["PooledFit", "fit_pooled"]

_FULL = "task * frozen_layers * train_size"
_NO_TASK_BY_FREEZE = "task * train_size + frozen_layers * train_size"
_DROP_ORDER = ("task:seed:train_size", "task:seed")
_DEFAULT_FLOOR = 1e-8


@dataclass(frozen=True, eq=False)
class PooledFit:
    """A mixed model of all tasks (see the module docstring).

    Attributes
    ----------
    result
        The :class:`freezestats.stats.models.reml.RemlFit` (variances, estimates, their covariance, information).
    formula
        The model in nlme-like notation; ends with ``[response z-scored per task]`` when standardized.
    fixed_effects
        ``term, estimate, se, ci_low, ci_high, z, p_val`` (Wald z, as :class:`MixedFit` shows them).
    variance_components
        ``component, variance, sd, task, train_size, at_floor``: ``task:seed``, ``task:seed:train_size`` and
        one ``residual:<task>@<size>`` per task × train size; a random term estimated at zero is listed with
        variance 0 and ``at_floor`` (it was dropped).
    converged
        Whether the optimiser met its criterion.
    warnings
        One sentence per note (dropped terms, floored variances, standardization, convergence).
    standardized
        Whether each task's response was z-scored before pooling.
    response_sd
        The SD each task's response was divided by (empty unless standardized).
    """

    result: RemlFit
    formula: str
    fixed_effects: pd.DataFrame
    variance_components: pd.DataFrame
    converged: bool
    warnings: tuple[str, ...]
    standardized: bool = False
    response_sd: dict[str, float] = field(default_factory=dict)
    design_info: patsy.DesignInfo | None = None
    levels: dict[str, list] = field(default_factory=dict)
    method: str = "REML"

    @property
    def params(self) -> np.ndarray:
        return self.result.beta.copy()

    @property
    def cov_params(self) -> np.ndarray:
        return self.result.cov_beta.copy()

    @property
    def df_method(self) -> str:
        return "satterthwaite"

    @property
    def llf(self) -> float:
        return self.result.loglik

    def contrast_df(self, contrasts: np.ndarray) -> np.ndarray:
        """Satterthwaite df of each row of ``contrasts`` (as :meth:`MixedFit.contrast_df`)."""
        return self.result.satterthwaite_df(np.atleast_2d(np.asarray(contrasts, dtype=float)))

    def cell_means(self) -> pd.DataFrame:
        """Fitted mean and its SE of every (task, frozen_layers, train_size) cell (on the modelled scale)."""
        grid = pd.MultiIndex.from_product(
            [self.levels["task"], self.levels["frozen_layers"], self.levels["train_size"]],
            names=["task", "frozen_layers", "train_size"],
        ).to_frame(index=False)
        coded = _categorical(grid, self.levels)
        (x,) = patsy.build_design_matrices([self.design_info], coded, return_type="matrix")
        x = np.asarray(x)
        estimate = x @ self.result.beta
        se = np.sqrt(np.einsum("ij,jk,ik->i", x, self.result.cov_beta, x))
        return grid.assign(estimate=estimate, se=se)


def _categorical(frame: pd.DataFrame, levels: dict[str, list]) -> pd.DataFrame:
    out = frame.copy()
    for name, values in levels.items():
        out[name] = pd.Categorical(out[name], categories=values)
    return out


@dataclass(frozen=True)
class _Pooled:
    frame: pd.DataFrame  # analysed runs; task / frozen_layers / train_size Categorical (reference first)
    response: str
    levels: dict[str, list]
    floors: dict[str, float]  # residual floor per task (on the modelled scale)
    notes: tuple[str, ...]
    standardized: bool
    response_sd: dict[str, float]


def _prepare(data: pd.DataFrame, response: str, include_failed: bool, standardize: bool) -> _Pooled:
    needed = ["task", "frozen_layers", "train_size", "seed", response]
    if not isinstance(data, pd.DataFrame) or len(data) == 0:
        raise ModelFitError("The results table is empty: nothing to fit.")
    missing = [c for c in needed if c not in data.columns]
    if missing:
        raise ModelFitError(f"The results table lacks column(s) {missing}.")
    data = normalize_results(data)
    frame = data[data["role"] == "grid"]
    if "state" in frame.columns:
        frame = frame[frame["state"] == "complete"]
    if not include_failed and "failed" in frame.columns:
        frame = frame[~frame["failed"].fillna(False).astype(bool)]
    frame = frame.assign(**{response: pd.to_numeric(frame[response], errors="coerce")})
    frame = frame[np.isfinite(frame[response].astype(float))]
    tasks = sorted(frame["task"].astype(str).unique())
    if len(tasks) < 2:
        raise ModelFitError(
            f"A pooled model needs at least 2 tasks, but the table has {tasks}; use the per-task model (fit_mixed)."
        )
    _check_metrics(frame, tasks, standardize)
    if 0 not in set(frame["frozen_layers"].astype(int)):
        raise ModelFitError(
            "The pooled model uses frozen_layers = 0 (full fine-tuning) as reference, but no run has it."
        )
    cells = frame.groupby(["task", "frozen_layers", "train_size"]).size()
    expected = len(tasks) * frame["frozen_layers"].nunique() * frame["train_size"].nunique()
    if len(cells) < expected:
        raise ModelFitError(
            f"Every task must have every (frozen_layers, train_size) cell for the task × freezing model, but only "
            f"{len(cells)} of {expected} cells have runs."
        )
    if frame["seed"].nunique() < 2:
        raise ModelFitError("A single seed leaves no seed variance to model; run more seeds (grid.seeds).")
    frame = frame.copy()
    frame["task"] = frame["task"].astype(str)
    frame["frozen_layers"] = frame["frozen_layers"].astype(int)
    frame["train_size"] = frame["train_size"].astype(int)
    frame["seed"] = frame["seed"].astype(int)
    frame[response] = frame[response].astype(float)
    notes: list[str] = []
    scales: dict[str, float] = {}
    floors = {t: _floor(frame[frame["task"] == t]) for t in tasks}
    if standardize:
        for t in tasks:
            rows = frame["task"] == t
            values = frame.loc[rows, response]
            sd = float(values.std(ddof=1))
            if not sd > 0:
                raise ModelFitError(f"{response} is constant across the runs of task {t!r}, so it cannot be z-scored.")
            frame.loc[rows, response] = (values - float(values.mean())) / sd
            scales[t] = sd
            floors[t] /= sd**2
        notes.append(
            f"responses z-scored per task before pooling (each task's {response} centred on its mean and divided by "
            "its SD over the task's runs: "
            + ", ".join(f"{t} {sd:.3g}" for t, sd in scales.items())
            + "); effects and the task × freezing test are in SD units."
        )
    levels = {
        "task": tasks,
        "frozen_layers": [0, *sorted(k for k in frame["frozen_layers"].unique() if k != 0)],
        "train_size": sorted(int(n) for n in frame["train_size"].unique()),
    }
    frame = _categorical(frame, levels).reset_index(drop=True)
    return _Pooled(frame, response, levels, floors, tuple(notes), standardize, scales)


def _check_metrics(frame: pd.DataFrame, tasks: list[str], standardize: bool) -> None:
    """Refuse to pool tasks scored by different metrics, unless their responses are standardized."""
    if standardize or "metric" not in frame.columns:
        return
    metrics = {
        t: sorted(frame.loc[frame["task"].astype(str) == t, "metric"].dropna().astype(str).unique()) for t in tasks
    }
    if len({m for ms in metrics.values() for m in ms}) > 1:
        named = ", ".join(f"{t}: {'/'.join(ms) or '?'}" for t, ms in metrics.items())
        raise ModelFitError(
            f"cannot pool tasks whose primary metrics differ ({named}): a freezing effect in one metric is not one "
            "in another; compare the tasks one at a time, or pass standardize=True to z-score each task's response."
        )


def _floor(frame: pd.DataFrame) -> float:
    """One evaluation item, squared, as the per-task model's residual floor (:mod:`.mixed_grouped`)."""
    if "n_eval" in frame.columns:
        n_eval = pd.to_numeric(frame["n_eval"], errors="coerce").dropna()
        if len(n_eval) and float(n_eval.max()) > 0:
            return (1.0 / float(n_eval.max())) ** 2
    return _DEFAULT_FLOOR


def _random_terms(pooled: _Pooled) -> list[Component]:
    frame = pooled.frame
    task_seed = frame["task"].astype(str) + ":" + frame["seed"].astype(str)
    terms = [Component("task:seed", "random", z=_indicators(task_seed))]
    if len(pooled.levels["train_size"]) > 1:
        terms.append(
            Component(
                "task:seed:train_size", "random", z=_indicators(task_seed + ":" + frame["train_size"].astype(str))
            )
        )
    return terms


def _model(pooled: _Pooled, formula: str, random: list[Component]) -> tuple[ComponentModel, patsy.DesignInfo]:
    frame = pooled.frame
    x = patsy.dmatrix(formula, frame, return_type="dataframe")
    tasks = frame["task"].astype(str).to_numpy()
    sizes = frame["train_size"].astype(int).to_numpy()
    residuals = [
        Component(f"residual:{t}@{n}", "residual", mask=(tasks == t) & (sizes == n), lower=pooled.floors[t])
        for t in pooled.levels["task"]
        for n in pooled.levels["train_size"]
    ]
    groups = pd.Series(tasks).astype(str) + ":" + frame["seed"].astype(str)
    blocks = tuple(np.flatnonzero(groups.to_numpy() == g) for g in groups.unique())
    y = frame[pooled.response].to_numpy(dtype=float)
    model = ComponentModel(y, x.to_numpy(dtype=float), tuple(x.columns), (*random, *residuals), blocks)
    return model, x.design_info


def _negligible(components: tuple[Component, ...], fit: RemlFit, name: str) -> bool:
    """lme4's isSingular rule, as in :mod:`.mixed_grouped`."""
    values = {c.name: v for c, v in zip(components, fit.theta, strict=True)}
    smallest = min(v for c, v in zip(components, fit.theta, strict=True) if c.kind == "residual")
    return smallest > 0 and math.sqrt(max(values[name], 0.0) / smallest) < _BOUNDARY_TOL


def fit_pooled(
    data: pd.DataFrame,
    response: str = "best_dev",
    *,
    include_failed: bool = True,
    standardize: bool = False,
    reml: bool = True,
) -> PooledFit:
    """Fit ``response ~ task * frozen_layers * train_size`` over all tasks (see the module docstring).

    Parameters
    ----------
    data
        The results table with two or more tasks (grid runs, state complete).
    response
        The per-run response column.
    include_failed
        Keep failed (collapsed) runs, default ``True``.
    standardize
        z-score each task's response by its own SD before pooling; required when the tasks' ``metric``
        differs (e.g. ``mcc`` and ``accuracy``).
    reml
        REML (default) or ML.

    Returns
    -------
    PooledFit

    Raises
    ------
    ModelFitError
        Fewer than 2 tasks, tasks with different metrics (without ``standardize``), a missing cell or column,
        one seed, or no reference level ``frozen_layers = 0``.

    Notes
    -----
    The fixed part is the full cell-means model, so its fitted cell means equal each task's own; what pooling
    adds is the test of :func:`~.task_interaction.task_interaction_test` (and one variance for the seed terms).
    Reference levels: the first task in sorted order, frozen_layers = 0, the smallest train size. Random terms
    estimated at zero are dropped, finest first, and the model refitted; residual variances are floored at one
    evaluation item, :math:`(1/n_{eval})^2` (on the z-scored scale when standardized).
    """
    pooled = _prepare(data, response, include_failed, standardize)
    random = _random_terms(pooled)
    dropped: list[str] = []
    while True:
        model, design_info = _model(pooled, _FULL, random)
        fit = model.fit(reml=reml)
        zero = [
            c.name
            for c, bound in zip(model.components, fit.at_bound, strict=True)
            if c.kind == "random" and (bound or _negligible(model.components, fit, c.name))
        ]
        if not zero:
            break
        name = next(n for n in _DROP_ORDER if n in zero)
        dropped.append(name)
        random = [c for c in random if c.name != name]
    return _to_fit(pooled, model, design_info, fit, dropped, reml)


def _to_fit(
    pooled: _Pooled,
    model: ComponentModel,
    design_info: patsy.DesignInfo,
    fit: RemlFit,
    dropped: list[str],
    reml: bool,
) -> PooledFit:
    rows = []
    for c, v, bound in zip(model.components, fit.theta, fit.at_bound, strict=True):
        task, size = None, None
        if c.kind == "residual":
            task, size = c.name.removeprefix("residual:").rsplit("@", 1)
        rows.append(
            {
                "component": c.name,
                "variance": float(v),
                "sd": math.sqrt(max(float(v), 0.0)),
                "task": task,
                "train_size": float(size) if size is not None else math.nan,
                "at_floor": bool(bound),
            }
        )
    rows += [
        {"component": n, "variance": 0.0, "sd": 0.0, "task": None, "train_size": math.nan, "at_floor": True}
        for n in dropped
    ]
    components = pd.DataFrame(rows, columns=["component", "variance", "sd", "task", "train_size", "at_floor"])
    notes = list(pooled.notes)
    notes += [
        f"the {n} variance was estimated at zero, so that random term was dropped and the model refitted without it."
        for n in dropped
    ]
    floored = components[components["at_floor"] & components["component"].str.startswith("residual")]
    if len(floored):
        notes.append(
            f"{len(floored)} residual variance(s) ({', '.join(floored['component'])}) sit at the floor of one "
            "evaluation item: their runs gave (nearly) identical scores."
        )
    if not fit.converged:
        notes.append(f"the optimizer did not converge (gradient {fit.gradient_norm:.2g}): treat the fit as unreliable.")
    se = np.sqrt(np.diag(fit.cov_beta))
    fixed = _coef_table(list(model.column_names), fit.beta, se, df=None)
    terms = " + ".join(f"(1 | {c.name})" for c in model.components if c.kind == "random")
    formula = (
        f"{pooled.response} ~ {_FULL}"
        + (f" + {terms}" if terms else "")
        + ", weights = varIdent(~1 | task:train_size)"
        + (" [response z-scored per task]" if pooled.standardized else "")
    )
    return PooledFit(
        result=fit,
        formula=formula,
        fixed_effects=fixed,
        variance_components=components,
        converged=bool(fit.converged),
        warnings=tuple(notes),
        standardized=pooled.standardized,
        response_sd=dict(pooled.response_sd),
        design_info=design_info,
        levels=pooled.levels,
        method="REML" if reml else "ML",
    )

"""Models of one task's results table: a linear mixed model, OLS with seed-clustered errors, a binomial GLMM.

All three model the same fixed effects, one mean per (frozen_layers, train_size) cell, in treatment coding::

    response ~ C(frozen_layers) * C(train_size)

The reference levels are ``frozen_layers = 0`` (nothing frozen, i.e. full fine-tuning; the smallest level when 0
is not in the data) and the smallest ``train_size``. The intercept is that reference cell's mean, a
``frozen_layers[T.k]`` coefficient is "k frozen layers minus none" at the smallest size, and an interaction
coefficient ``frozen_layers[T.k]:train_size[T.n]`` is how much that difference changes at size ``n``. Treatment
coefficients are rarely the question; :mod:`freezestats.stats.emm` turns any fit into cell means and contrasts
with correct standard errors.

Only runs with ``role == 'grid'`` and ``state == 'complete'`` are analysed (when those columns exist): the
learning-rate search runs are not part of the design.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import numpy as np
import pandas as pd
import patsy
from scipy import stats

from freezestats.exceptions import ModelFitError

if TYPE_CHECKING:
    from statsmodels.genmod.bayes_mixed_glm import BayesMixedGLMResults
    from statsmodels.regression.linear_model import RegressionResultsWrapper
    from statsmodels.regression.mixed_linear_model import MixedLMResults

__all__ = [
    "RESPONSES",
    "FitDiagnostics",
    "FixedEffectsFit",
    "GlmmFit",
    "MixedFit",
    "OlsFit",
    "fit_glmm",
    "fit_mixed",
    "fit_ols",
    "interaction_test",
]

RESPONSES: tuple[str, ...] = ("best_dev", "final_dev", "heldout")
"""The per-run responses a model can be fitted to."""

FIXED_FORMULA = "C(frozen_layers) * C(train_size)"
_PATSY_FORMULA = "frozen_layers * train_size"  # the two columns are ordered Categoricals, reference level first
_OPTIMIZERS: tuple[str, ...] = ("bfgs", "lbfgs", "cg", "powell", "nm")
_GTOL = 1e-8  # gradient tolerance of the gradient-based optimizers (scipy's default 1e-5 leaves ~1e-5 relative error)
_BOUNDARY_TOL = 1e-4  # lme4's isSingular tolerance on a random-effect SD relative to the residual SD
_FEW_CLUSTERS = 20
_FEW_SEEDS = 5
_SM_BOUNDARY_MESSAGE = "The MLE may be on the boundary of the parameter space."


# --------------------------------------------------------------------------------------------------------------
# Fit objects


@dataclass(frozen=True)
class FitDiagnostics:
    """How a fit went: convergence, boundary estimates, the data it saw, and every warning raised on the way.

    Attributes
    ----------
    converged
        Whether the optimizer reported convergence (always ``True`` for OLS, which has a closed form).
    boundary
        A variance component was estimated at (numerically) zero: its SD is below ``1e-4`` times the residual SD,
        the tolerance of lme4's ``isSingular``. The model then reduces to one without that component.
    singular
        statsmodels reported a singular random-effects covariance or a Hessian of the variance parameters that is
        not negative definite: their standard errors (not used for the fixed effects) are unreliable.
    optimizer
        The optimizer whose result is reported (``"closed form"`` for OLS).
    method
        ``"REML"``, ``"ML"``, ``"OLS"``, or the name of the approximation (GLMM).
    warnings
        One explicit sentence per problem: optimizer failures and retries, boundary estimates, few clusters,
        runs dropped, and statsmodels' own warnings (prefixed ``statsmodels``).
    library_warnings
        Every warning statsmodels raised, verbatim, including the ones that :attr:`warnings` replaces by a more
        precise statement (statsmodels flags a "boundary" whenever a variance is below 0.01 on the response scale,
        which every accuracy-scale fit trips; :attr:`boundary` uses the relative criterion above instead).
    n_obs
        Runs used in the fit.
    n_seeds, n_subset_draws
        Distinct seeds and training-subset draws among them.
    n_failed
        Failed runs among the runs used (``0`` when ``include_failed=False``).
    n_excluded
        Runs of the task left out: failed runs when ``include_failed=False``, and runs with a missing response.
    llf, aic, bic
        Log-likelihood (REML or ML, as fitted), and the information criteria where defined (``nan`` for REML fits,
        whose likelihoods are not comparable across fixed effects, and for the variational GLMM).
    """

    converged: bool
    boundary: bool
    singular: bool
    optimizer: str
    method: str
    warnings: tuple[str, ...]
    library_warnings: tuple[str, ...]
    n_obs: int
    n_seeds: int
    n_subset_draws: int
    n_failed: int
    n_excluded: int
    llf: float
    aic: float
    bic: float


@runtime_checkable
class FixedEffectsFit(Protocol):
    """What :mod:`freezestats.stats.emm` needs from a fit: the fixed effects, their covariance and a df rule.

    :class:`MixedFit` and :class:`OlsFit` implement it; :class:`GlmmFit` does not (its variational posterior has
    no covariance between coefficients).
    """

    @property
    def response(self) -> str: ...

    @property
    def task(self) -> str: ...

    @property
    def design_info(self) -> patsy.DesignInfo: ...

    @property
    def frozen_levels(self) -> tuple[int, ...]: ...

    @property
    def train_sizes(self) -> tuple[int, ...]: ...

    @property
    def params(self) -> np.ndarray: ...

    @property
    def cov_params(self) -> np.ndarray: ...

    @property
    def df_method(self) -> str: ...

    def contrast_df(self, contrasts: np.ndarray) -> np.ndarray:
        """Degrees of freedom of the t reference distribution of each row of ``contrasts`` (``inf``: normal)."""
        ...


@dataclass(frozen=True, eq=False)
class MixedFit:
    r"""A linear mixed model fitted by :func:`fit_mixed`.

    Attributes
    ----------
    result
        The statsmodels ``MixedLMResults``.
    response, task
        What was modelled.
    formula
        The model in lme4 notation, e.g. ``best_dev ~ C(frozen_layers) * C(train_size) + (1 | seed)``.
    design_info
        The patsy design of the fixed effects (used to build contrast rows).
    frozen_levels, train_sizes
        The factor levels in model order (reference level first).
    fixed_effects
        ``term, estimate, se, ci_low, ci_high, z, p_val``: Wald z statistics and 95% normal intervals with the
        standard errors of :attr:`cov_params` (see :func:`fit_mixed` for why the marginal means use t instead).
    variance_components
        ``component, variance, sd`` for ``seed``, ``subset_draw`` (when modelled) and ``residual``.
    icc_seed
        Share of the within-cell variance of a run due to the seed:
        :math:`\sigma^2_{seed} / (\sigma^2_{seed} + \sigma^2_{subset} + \sigma^2)`.
    diagnostics
        :class:`FitDiagnostics`.
    """

    result: MixedLMResults
    response: str
    task: str
    formula: str
    design_info: patsy.DesignInfo
    frozen_levels: tuple[int, ...]
    train_sizes: tuple[int, ...]
    fixed_effects: pd.DataFrame
    variance_components: pd.DataFrame
    icc_seed: float
    diagnostics: FitDiagnostics
    _variance_model: _VarianceModel

    @property
    def params(self) -> np.ndarray:
        """Fixed-effect estimates, in the order of ``design_info.column_names``."""
        return np.asarray(self.result.fe_params, dtype=float)

    @property
    def cov_params(self) -> np.ndarray:
        r"""Covariance of the fixed-effect estimates, :math:`(X' \hat V^{-1} X)^{-1}` (lme4's ``vcov``).

        statsmodels' ``result.cov_params()`` inverts its joint observed Hessian of fixed effects and variance
        parameters instead; the two agree in balanced designs and differ slightly (~1e-3 relative) otherwise.
        """
        return self._variance_model.cov_beta.copy()

    @property
    def df_method(self) -> str:
        return "satterthwaite"

    def contrast_df(self, contrasts: np.ndarray) -> np.ndarray:
        r"""Satterthwaite degrees of freedom of each row :math:`l` of ``contrasts`` (as lmerTest computes them).

        .. math:: \nu = 2 (l' C l)^2 / (g' A g), \quad g = \partial (l' C(\theta) l) / \partial \theta

        with :math:`C(\theta) = (X' V(\theta)^{-1} X)^{-1}` and :math:`A` the inverse observed information of
        the variance parameters :math:`\theta` (REML or ML, as fitted). Components at the boundary are held
        fixed.
        """
        return self._variance_model.satterthwaite_df(np.atleast_2d(np.asarray(contrasts, dtype=float)))


@dataclass(frozen=True, eq=False)
class OlsFit:
    """A least-squares fit by :func:`fit_ols`.

    Attributes
    ----------
    result
        The statsmodels ``RegressionResults``.
    response, task, design_info, frozen_levels, train_sizes
        As for :class:`MixedFit`.
    cov_type
        ``"cluster"`` (CR1, clustered by seed) or ``"nonrobust"`` (classical OLS).
    inference_df
        Degrees of freedom of every t test: ``G - 1`` (cluster) or ``n - p`` (nonrobust).
    fixed_effects
        ``term, estimate, se, ci_low, ci_high, t, df, p_val`` (95% t intervals).
    diagnostics
        :class:`FitDiagnostics`.
    """

    result: RegressionResultsWrapper
    response: str
    task: str
    formula: str
    design_info: patsy.DesignInfo
    frozen_levels: tuple[int, ...]
    train_sizes: tuple[int, ...]
    cov_type: str
    inference_df: float
    fixed_effects: pd.DataFrame
    diagnostics: FitDiagnostics

    @property
    def params(self) -> np.ndarray:
        return np.asarray(self.result.params, dtype=float)

    @property
    def cov_params(self) -> np.ndarray:
        return np.asarray(self.result.cov_params(), dtype=float)

    @property
    def df_method(self) -> str:
        return "clusters - 1" if self.cov_type == "cluster" else "residual"

    def contrast_df(self, contrasts: np.ndarray) -> np.ndarray:
        """``G - 1`` (G seeds) for cluster-robust errors, ``n - p`` for classical OLS; the same for every row."""
        rows = np.atleast_2d(contrasts).shape[0]
        return np.full(rows, self.inference_df)


@dataclass(frozen=True, eq=False)
class GlmmFit:
    r"""A binomial mixed model fitted by :func:`fit_glmm` (variational Bayes).

    Attributes
    ----------
    result
        The statsmodels ``BayesMixedGLMResults``.
    task, formula, design_info, frozen_levels, train_sizes
        As for :class:`MixedFit`.
    approximation
        ``"variational Bayes (statsmodels BinomialBayesMixedGLM.fit_vb)"``.
    fixed_effects
        ``term, post_mean, post_sd, ci_low, ci_high`` on the logit scale; the interval is
        ``post_mean ± 1.96 post_sd``.
    variance_components
        ``component, log_sd_mean, log_sd_sd, sd`` for ``seed`` and ``run``: the posterior of the log standard
        deviation of each random intercept, and :math:`\exp` of its mean.
    diagnostics
        :class:`FitDiagnostics`.
    """

    result: BayesMixedGLMResults
    task: str
    formula: str
    design_info: patsy.DesignInfo
    frozen_levels: tuple[int, ...]
    train_sizes: tuple[int, ...]
    approximation: str
    fixed_effects: pd.DataFrame
    variance_components: pd.DataFrame
    diagnostics: FitDiagnostics


# --------------------------------------------------------------------------------------------------------------
# Data preparation and validation


@dataclass(frozen=True)
class _Prepared:
    frame: pd.DataFrame  # the runs to fit, frozen_layers / train_size as Categoricals (reference first)
    task: str
    frozen_levels: tuple[int, ...]
    train_sizes: tuple[int, ...]
    n_seeds: int
    n_subset_draws: int
    n_failed: int
    n_excluded: int
    notes: tuple[str, ...]


def _prepare(
    data: pd.DataFrame,
    response: str,
    *,
    task: str | None,
    include_failed: bool,
    caller: str,
    need_seeds: int = 2,
    extra_columns: tuple[str, ...] = (),
) -> _Prepared:
    """Validate a results table and return one task's complete grid runs, ready for patsy."""
    if not isinstance(data, pd.DataFrame):
        raise ModelFitError(f"{caller} needs the results table as a pandas DataFrame, but got {type(data).__name__}.")
    if len(data) == 0:
        raise ModelFitError(
            f"{caller} needs at least one run, but the results table is empty; run the study first "
            "(`freezestats run`) or check the file you loaded."
        )
    if response not in RESPONSES:
        raise ModelFitError(f"`response` must be one of {list(RESPONSES)}, but got response={response!r}.")
    required = ["task", "frozen_layers", "train_size", "seed", "failed", response, *extra_columns]
    missing = [c for c in required if c not in data.columns]
    if missing:
        raise ModelFitError(
            f"the results table must have the columns {required}, but {missing} are missing "
            f"(columns present: {list(data.columns)}); pass the table from `freezestats results`."
        )
    frame = data
    if "role" in frame.columns:
        frame = frame[frame["role"] == "grid"]
    if "state" in frame.columns:
        frame = frame[frame["state"] == "complete"]
    if len(frame) == 0:
        raise ModelFitError(
            f"{caller} analyses runs with role='grid' and state='complete', but none of the {len(data)} runs is "
            "one; the learning-rate search runs (role='search') are not part of the design."
        )
    tasks = sorted(frame["task"].astype(str).unique())
    if task is None:
        if len(tasks) > 1:
            raise ModelFitError(
                f"the results table holds several tasks {tasks}; models are fitted one task at a time, so pass "
                f"task=... (one of {tasks})."
            )
        task = tasks[0]
    elif task not in tasks:
        raise ModelFitError(f"`task` must be one of the tasks in the results table {tasks}, but got task={task!r}.")
    frame = frame[frame["task"].astype(str) == task]
    if "model" in frame.columns and frame["model"].nunique() > 1:
        models = sorted(frame["model"].astype(str).unique())
        raise ModelFitError(
            f"the runs of task {task!r} come from several models {models}; a model comparison is not part of "
            "this design, so filter the table to one model first, e.g. data[data['model'] == ...]."
        )
    notes: list[str] = []
    failed = frame["failed"].fillna(False).astype(bool)
    n_task = len(frame)
    if not include_failed:
        if failed.all():
            raise ModelFitError(
                f"include_failed=False leaves no runs: all {n_task} runs of task {task!r} failed (collapsed to the "
                "majority baseline); fit with include_failed=True or look at the failure rates instead."
            )
        if failed.any():
            notes.append(
                f"excluded {int(failed.sum())} failed runs (include_failed=False): estimates are conditional on "
                "a run not failing."
            )
        frame = frame[~failed]
    values = pd.to_numeric(frame[response], errors="coerce")
    for column in extra_columns:
        values = values.where(pd.to_numeric(frame[column], errors="coerce").notna())
    present = values.notna() & np.isfinite(values.astype(float))
    if not present.any():
        raise ModelFitError(
            f"every run of task {task!r} has a missing {response}"
            + (f" or {', '.join(extra_columns)}" if extra_columns else "")
            + "; choose another response."
        )
    if not present.all():
        notes.append(f"dropped {int((~present).sum())} runs with a missing {response} (listwise deletion).")
    frame = frame[present].copy()
    frame[response] = values[present].astype(float)
    for column in extra_columns:
        frame[column] = pd.to_numeric(frame[column]).astype(float)
    frame["frozen_layers"] = frame["frozen_layers"].astype(int)
    frame["train_size"] = frame["train_size"].astype(int)
    frame["seed"] = frame["seed"].astype(int)
    frame["subset_draw"] = frame["subset_draw"].fillna(0).astype(int) if "subset_draw" in frame.columns else 0
    frame["failed"] = frame["failed"].fillna(False).astype(bool)

    frozen_sorted = sorted(frame["frozen_layers"].unique())
    reference = 0 if 0 in frozen_sorted else frozen_sorted[0]
    frozen_levels = (reference, *[k for k in frozen_sorted if k != reference])
    train_sizes = tuple(sorted(frame["train_size"].unique()))
    counts = frame.groupby(["frozen_layers", "train_size"]).size()
    empty = [(k, n) for k in frozen_sorted for n in train_sizes if (k, n) not in counts.index]
    if empty:
        shown = ", ".join(f"(frozen_layers={k}, train_size={n})" for k, n in empty[:6])
        raise ModelFitError(
            f"every (frozen_layers, train_size) cell needs at least one run for the interaction model, but "
            f"{len(empty)} cells of task {task!r} have none: {shown}"
            + (" ..." if len(empty) > 6 else "")
            + (
                "; failed runs were excluded (include_failed=False), so try include_failed=True,"
                if not include_failed and failed.any()
                else ";"
            )
            + " finish those cells or drop their frozen level / train size from the table."
        )
    n_seeds = int(frame["seed"].nunique())
    if n_seeds < need_seeds:
        raise ModelFitError(
            f"a seed random effect needs at least 2 seeds, but task {task!r} has {n_seeds} "
            f"(seed={sorted(frame['seed'].unique())}), so the seed variance cannot be estimated; run more seeds, "
            "or use fit_ols(..., cov_type='nonrobust'), which assumes independent runs."
        )
    if frame[response].nunique() == 1:
        raise ModelFitError(
            f"{response} is constant ({float(frame[response].iloc[0])!r}) across all {len(frame)} runs of task "
            f"{task!r}, so there is no variation to model; check the runs (did every run fail?) or choose another "
            "response."
        )
    n_cells = len(frozen_levels) * len(train_sizes)
    if len(frame) <= n_cells:
        raise ModelFitError(
            f"the interaction model has one mean per cell, so it needs more runs than cells, but task {task!r} "
            f"has {len(frame)} runs for {n_cells} cells; run more seeds."
        )
    frame["frozen_layers"] = pd.Categorical(frame["frozen_layers"], categories=list(frozen_levels))
    frame["train_size"] = pd.Categorical(frame["train_size"], categories=list(train_sizes))
    return _Prepared(
        frame=frame.reset_index(drop=True),
        task=task,
        frozen_levels=tuple(int(k) for k in frozen_levels),
        train_sizes=tuple(int(n) for n in train_sizes),
        n_seeds=n_seeds,
        n_subset_draws=int(frame["subset_draw"].nunique()),
        n_failed=int(frame["failed"].sum()),
        n_excluded=n_task - len(frame),
        notes=tuple(notes),
    )


def _design(prepared: _Prepared, formula: str = _PATSY_FORMULA) -> pd.DataFrame:
    return patsy.dmatrix(formula, prepared.frame, return_type="dataframe")


def _indicators(values: pd.Series) -> np.ndarray:
    codes, _ = pd.factorize(values, sort=True)
    out = np.zeros((len(values), codes.max() + 1))
    out[np.arange(len(values)), codes] = 1.0
    return out


def _coef_table(names: list[str], estimate: np.ndarray, se: np.ndarray, df: float | None) -> pd.DataFrame:
    stat = estimate / se
    if df is None:
        crit = stats.norm.ppf(0.975)
        p = 2 * stats.norm.sf(np.abs(stat))
    else:
        crit = stats.t.ppf(0.975, df)
        p = 2 * stats.t.sf(np.abs(stat), df)
    table = pd.DataFrame(
        {
            "term": names,
            "estimate": estimate,
            "se": se,
            "ci_low": estimate - crit * se,
            "ci_high": estimate + crit * se,
        }
    )
    if df is None:
        table["z"] = stat
    else:
        table["t"] = stat
        table["df"] = float(df)
    table["p_val"] = p
    return table


# --------------------------------------------------------------------------------------------------------------
# Linear mixed model


class _VarianceModel:
    r"""The variance structure :math:`V = \sum_k \theta_k Z_k Z_k' + \sigma^2 I` at the estimates, for df."""

    def __init__(
        self,
        y: np.ndarray,
        x: np.ndarray,
        z: list[np.ndarray],
        theta: np.ndarray,
        *,
        reml: bool,
        free: np.ndarray,
    ) -> None:
        self.y, self.x, self.reml = y, x, reml
        n = len(y)
        self.dv = [zk @ zk.T for zk in z] + [np.eye(n)]  # dV/dtheta_k
        self.theta = theta
        self.free = free  # components not at the boundary
        v = sum(t * d for t, d in zip(theta, self.dv, strict=True))
        vinv = np.linalg.inv(v)
        vinv_x = vinv @ x
        self.cov_beta = np.linalg.inv(x.T @ vinv_x)
        self.w = vinv_x @ self.cov_beta  # V^-1 X C
        p_mat = vinv - self.w @ vinv_x.T
        self._info = self._observed_information(p_mat, vinv)

    def _observed_information(self, p_mat: np.ndarray, vinv: np.ndarray) -> np.ndarray:
        # -d2 l / d theta_k d theta_l, V linear in theta:
        #   REML: y'P Vk P Vl P y - tr(P Vk P Vl) / 2;   ML (profiled): same with tr(V^-1 Vk V^-1 Vl).
        idx = np.flatnonzero(self.free)
        py = p_mat @ self.y
        trace_base = p_mat if self.reml else vinv
        m = [trace_base @ self.dv[k] for k in idx]
        pvk_py = [p_mat @ (self.dv[k] @ py) for k in idx]
        info = np.empty((len(idx), len(idx)))
        for a in range(len(idx)):
            for b in range(len(idx)):
                quad = float(pvk_py[a] @ (self.dv[idx[b]] @ py))
                info[a, b] = quad - 0.5 * float(np.sum(m[a] * m[b].T))
        return info

    def satterthwaite_df(self, contrasts: np.ndarray) -> np.ndarray:
        idx = np.flatnonzero(self.free)
        phi = np.einsum("ij,jk,ik->i", contrasts, self.cov_beta, contrasts)
        cw = contrasts @ self.w.T  # rows l' C X' V^-1
        grad = np.column_stack([np.einsum("ij,jk,ik->i", cw, self.dv[k], cw) for k in idx])
        a = np.linalg.inv(self._info)
        denom = np.einsum("ij,jk,ik->i", grad, a, grad)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(denom > 0, 2 * phi**2 / denom, np.inf)


def _fit_mixedlm(
    y: np.ndarray,
    x: pd.DataFrame,
    prepared: _Prepared,
    reml: bool,
) -> tuple[MixedLMResults, str, list[str], list[str], list[str]]:
    """Fit with the first optimizer in :data:`_OPTIMIZERS` that converges.

    Returns the result, the optimizer's name, notes on failed attempts, every statsmodels warning, and the
    warnings of the reported attempt.
    """
    from statsmodels.regression.mixed_linear_model import MixedLM, VCSpec

    frame = prepared.frame
    crossed = prepared.n_subset_draws > 1

    def build() -> MixedLM:
        if not crossed:
            return MixedLM(y, x, groups=frame["seed"].to_numpy())
        names = ["seed", "subset_draw"]
        mats = [[_indicators(frame[name])] for name in names]
        colnames = [[[f"{name}[{v}]" for v in sorted(frame[name].unique())]] for name in names]
        return MixedLM(y, x, groups=np.zeros(len(y)), exog_vc=VCSpec(names, colnames, mats))

    notes: list[str] = []
    raw: list[str] = []  # every statsmodels warning of every attempt
    reported: list[str] = []  # those of the attempt whose result is returned
    last: Any = None
    last_name = ""
    for name in _OPTIMIZERS:
        options = {"gtol": _GTOL} if name in ("bfgs", "lbfgs", "cg") else {}
        result = None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                result = build().fit(reml=reml, method=[name], **options)
            except (np.linalg.LinAlgError, ValueError, FloatingPointError, ZeroDivisionError) as err:
                notes.append(f"optimizer {name!r} stopped with {type(err).__name__}: {err}; tried the next one.")
        messages = [f"statsmodels ({name}): {w.category.__name__}: {w.message}" for w in caught]
        raw.extend(messages)
        if result is None:
            continue
        last, last_name, reported = result, name, messages
        if result.converged:
            return result, name, notes, raw, reported
        notes.append(f"optimizer {name!r} did not converge; tried the next one.")
    if last is None:
        raise ModelFitError(
            f"every optimizer {list(_OPTIMIZERS)} failed to fit the mixed model of task {prepared.task!r}: "
            + " ".join(notes)
            + " Check the table for duplicated or degenerate runs, or use fit_ols."
        )
    notes.append(
        f"no optimizer converged; reporting the last one ({last_name!r}); its estimates may be off: treat the fit "
        "as unreliable."
    )
    return last, last_name, notes, raw, reported


def _mixed_from_prepared(prepared: _Prepared, response: str, reml: bool) -> MixedFit:
    x = _design(prepared)
    y = prepared.frame[response].to_numpy(dtype=float)
    result, optimizer, notes, raw, reported = _fit_mixedlm(y, x, prepared, reml)
    crossed = prepared.n_subset_draws > 1

    scale = float(result.scale)
    if crossed:
        components = ["seed", "subset_draw"]
        variances = [float(v) for v in np.asarray(result.vcomp)]
        z = [_indicators(prepared.frame[c]) for c in components]
    else:
        components = ["seed"]
        variances = [float(np.asarray(result.cov_re)[0, 0])]
        z = [_indicators(prepared.frame["seed"])]
    variances = [max(v, 0.0) for v in variances]
    warn_list = list(prepared.notes) + notes
    if prepared.n_seeds < _FEW_SEEDS:
        warn_list.append(
            f"only {prepared.n_seeds} seeds: the seed variance rests on {prepared.n_seeds - 1} degree(s) of freedom, "
            "so intervals for cell means are wide (small Satterthwaite df) and the variance estimate itself is "
            "rough; contrasts within a train size, which cancel the seed effect, are not affected."
        )
    boundary = False
    free = []
    for name, var in zip(components, variances, strict=True):
        rel = math.sqrt(var / scale) if scale > 0 else 0.0
        at_boundary = rel < _BOUNDARY_TOL
        free.append(not at_boundary)
        if at_boundary:
            boundary = True
            warn_list.append(
                f"boundary (singular) fit: the {name} variance is estimated at {var:.3g} (SD {rel:.2g} x the "
                f"residual SD, below lme4's tolerance {_BOUNDARY_TOL:g}), so the data show no {name}-to-{name} "
                "variation beyond the residual; the model is then the one without this component, and "
                "intervals treat it as known to be 0."
            )
    free.append(True)
    singular = False
    for message in reported:
        if message.endswith(_SM_BOUNDARY_MESSAGE):
            continue  # replaced by the relative check above (see FitDiagnostics.library_warnings)
        if "singular" in message.lower() or "positive definite" in message.lower():
            singular = True
        warn_list.append(message)

    vc_names = [*components, "residual"]
    vc_values = [*variances, scale]
    variance_components = pd.DataFrame(
        {"component": vc_names, "variance": vc_values, "sd": np.sqrt(vc_values)},
    )
    icc_seed = variances[0] / float(sum(vc_values))
    variance_model = _VarianceModel(
        y, x.to_numpy(dtype=float), z, np.asarray(vc_values), reml=reml, free=np.asarray(free)
    )
    fe = np.asarray(result.fe_params, dtype=float)
    fixed = _coef_table(list(x.columns), fe, np.sqrt(np.diag(variance_model.cov_beta)), df=None)
    llf = float(result.llf)
    k_params = len(fe) + len(vc_values)
    aic = bic = math.nan
    if not reml:
        aic = -2 * llf + 2 * k_params
        bic = -2 * llf + math.log(len(y)) * k_params
    random_terms = " + (1 | subset_draw)" if crossed else ""
    diagnostics = FitDiagnostics(
        converged=bool(result.converged),
        boundary=boundary,
        singular=singular,
        optimizer=optimizer,
        method="REML" if reml else "ML",
        warnings=tuple(warn_list),
        library_warnings=tuple(raw),
        n_obs=len(y),
        n_seeds=prepared.n_seeds,
        n_subset_draws=prepared.n_subset_draws,
        n_failed=prepared.n_failed,
        n_excluded=prepared.n_excluded,
        llf=llf,
        aic=aic,
        bic=bic,
    )
    return MixedFit(
        result=result,
        response=response,
        task=prepared.task,
        formula=f"{response} ~ {FIXED_FORMULA} + (1 | seed){random_terms}",
        design_info=x.design_info,
        frozen_levels=prepared.frozen_levels,
        train_sizes=prepared.train_sizes,
        fixed_effects=fixed,
        variance_components=variance_components,
        icc_seed=icc_seed,
        diagnostics=diagnostics,
        _variance_model=variance_model,
    )


def fit_mixed(
    data: pd.DataFrame,
    response: str = "best_dev",
    *,
    task: str | None = None,
    include_failed: bool = True,
    reml: bool = True,
) -> MixedFit:
    r"""Fit the linear mixed model of one task: a mean per (frozen_layers, train_size) cell, random seed intercept.

    Parameters
    ----------
    data
        The results table (one row per run, the columns of :func:`freezestats.results.results_table`).
    response
        ``"best_dev"``, ``"final_dev"`` or ``"heldout"``.
    task
        The task to model; may be left out when the table holds one task.
    include_failed
        Keep failed (collapsed) runs, default ``True``; see Notes.
    reml
        Restricted maximum likelihood (default) or maximum likelihood (for likelihood-ratio tests of fixed
        effects, see :func:`interaction_test`).

    Returns
    -------
    MixedFit
        With ``fixed_effects`` (``term, estimate, se, ci_low, ci_high, z, p_val``), ``variance_components``
        (``component, variance, sd``), ``icc_seed`` and ``diagnostics`` (:class:`FitDiagnostics`).

    Raises
    ------
    ModelFitError
        The table is empty, lacks a column, holds several tasks (and ``task`` is not given) or models, has a
        cell without runs, a single seed, a constant response, or no optimizer could fit it.

    Notes
    -----
    Model, for run :math:`i` in cell :math:`(k, n)` with seed :math:`s` and subset draw :math:`d`:

    .. math::

        y_i = \mu_{kn} + u_{s} + v_{d} + \varepsilon_i, \quad
        u_s \sim N(0, \sigma^2_{seed}),\; v_d \sim N(0, \sigma^2_{subset}),\; \varepsilon_i \sim N(0, \sigma^2)

    in lme4 notation ``response ~ C(frozen_layers) * C(train_size) + (1 | seed) [+ (1 | subset_draw)]``, in the
    treatment coding described in :mod:`freezestats.stats.models`. The seed intercept is shared by every cell
    of the task (the same seed number means the same initialisation of the head and the same data order), so
    contrasts between cells are estimated within seed. The subset-draw intercept is crossed with seed and only
    modelled when the table has more than one draw; with one draw it is confounded with the intercept.

    Fitting: statsmodels ``MixedLM``; with one draw the usual ``groups=seed`` form, with several draws the
    crossed form (one group holding every run, with a variance component for seed and one for subset draw).
    Optimizers are tried in the order ``bfgs`` (statsmodels' default), ``lbfgs``, ``cg`` (gradient based, fast),
    then ``powell`` and ``nm`` (derivative-free, slower but robust); the first that converges is reported, and
    every failure is listed in ``diagnostics.warnings``.

    Inference: ``fixed_effects`` shows Wald z tests, as statsmodels and lme4 print them. With 5 seeds a normal
    reference is anti-conservative for anything involving the seed variance (a cell mean), so
    :func:`freezestats.stats.estimated_marginal_means` and the contrast functions use t with Satterthwaite
    degrees of freedom (:meth:`MixedFit.contrast_df`), as lmerTest and emmeans do.

    Missing data: runs whose response is missing are dropped (listwise deletion) and counted in
    ``diagnostics.n_excluded``. Failed runs (``failed=True``, collapsed to the majority baseline) are included
    by default: they are what fine-tuning at that setting produces, and dropping them makes every estimate
    conditional on success, which flatters fragile settings. They also make residuals bimodal, so report the
    failure rate per cell alongside and check the conclusions with ``include_failed=False``.

    The covariance of the fixed effects is :math:`(X'\hat V^{-1}X)^{-1}` at the estimated variances, as in lme4.

    Checked against lme4 (``lmer(..., REML = TRUE)``), lmerTest and emmeans in R on
    ``tests/data/stats_fixture.csv`` (``tests/data/lme4_reference.R``): fixed effects and marginal means agree to
    1e-14, their standard errors to 1e-9, variance components to 1e-7 (relative), Satterthwaite df to 1e-6.

    References
    ----------
    Pinheiro, J. C. & Bates, D. M. (2000). *Mixed-Effects Models in S and S-PLUS*. Springer.
    Bates, D., Mächler, M., Bolker, B. & Walker, S. (2015). Fitting linear mixed-effects models using lme4.
    *Journal of Statistical Software* 67(1).
    Kuznetsova, A., Brockhoff, P. B. & Christensen, R. H. B. (2017). lmerTest package: tests in linear mixed
    effects models. *Journal of Statistical Software* 82(13).

    Examples
    --------
    >>> from freezestats.stats import fit_mixed, simulate_results
    >>> fit = fit_mixed(simulate_results(rng=1))
    >>> fit.variance_components["component"].tolist()
    ['seed', 'residual']
    >>> fit.diagnostics.converged, fit.diagnostics.method
    (True, 'REML')
    """
    prepared = _prepare(data, response, task=task, include_failed=include_failed, caller="fit_mixed")
    return _mixed_from_prepared(prepared, response, reml)


# --------------------------------------------------------------------------------------------------------------
# OLS with seed-clustered errors


def fit_ols(
    data: pd.DataFrame,
    response: str = "best_dev",
    *,
    task: str | None = None,
    include_failed: bool = True,
    cov_type: Literal["cluster", "nonrobust"] = "cluster",
) -> OlsFit:
    r"""Fit the cell-means model of one task by OLS, with standard errors clustered by seed.

    Parameters
    ----------
    data, response, task, include_failed
        As for :func:`fit_mixed`.
    cov_type
        ``"cluster"`` (default): cluster-robust (CR1) covariance with the runs of a seed as a cluster, and t
        tests on ``G - 1`` degrees of freedom (G seeds). ``"nonrobust"``: classical OLS, which assumes runs are
        independent (no seed effect), t on ``n - p`` degrees of freedom.

    Returns
    -------
    OlsFit
        With ``fixed_effects`` (``term, estimate, se, ci_low, ci_high, t, df, p_val``) and ``diagnostics``.

    Raises
    ------
    ModelFitError
        As for :func:`fit_mixed`; a single seed is only accepted with ``cov_type="nonrobust"``.

    Notes
    -----
    Same fixed effects and coding as :func:`fit_mixed` (``response ~ C(frozen_layers) * C(train_size)``), no
    random effects. In a balanced design (every seed, and every draw, in every cell) the model is saturated in
    the cells and the OLS estimates equal the mixed model's GLS estimates exactly: both are the raw cell means.
    Only the standard errors differ.

    The cluster-robust covariance is statsmodels' CR1,
    :math:`\frac{G}{G-1}\frac{N-1}{N-p}(X'X)^{-1} \sum_g X_g' e_g e_g' X_g (X'X)^{-1}`, with t on ``G - 1``
    degrees of freedom (Cameron & Miller 2015, Sec. VI). It is consistent as the number of clusters grows; with
    few clusters (5 seeds) it is noisy and anti-conservative even after the correction (its rank is at most
    ``G - 1``, so at most ``G - 1`` contrasts can be tested jointly). Prefer :func:`fit_mixed`, which models the
    seed correlation; use this fit as a check that does not rely on normal random effects. With fewer than
    20 clusters ``diagnostics.warnings`` says so.

    Missing data: as :func:`fit_mixed` (listwise deletion; failed runs included by default).

    References
    ----------
    Cameron, A. C. & Miller, D. L. (2015). A practitioner's guide to cluster-robust inference. *Journal of
    Human Resources* 50(2), 317-372.
    """
    import statsmodels.api as sm

    if cov_type not in ("cluster", "nonrobust"):
        raise ModelFitError(f"`cov_type` must be 'cluster' or 'nonrobust', but got cov_type={cov_type!r}.")
    clustered = cov_type == "cluster"
    prepared = _prepare(
        data, response, task=task, include_failed=include_failed, caller="fit_ols", need_seeds=2 if clustered else 1
    )
    x = _design(prepared)
    y = prepared.frame[response].to_numpy(dtype=float)
    model = sm.OLS(y, x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if clustered:
            groups = prepared.frame["seed"].to_numpy()
            result = model.fit(
                cov_type="cluster",
                cov_kwds={"groups": groups, "use_correction": True, "df_correction": True},
                use_t=True,
            )
        else:
            result = model.fit()
    raw = [f"statsmodels: {w.category.__name__}: {w.message}" for w in caught]
    notes = list(prepared.notes) + raw
    if clustered and prepared.n_seeds < _FEW_CLUSTERS:
        notes.append(
            f"only {prepared.n_seeds} clusters (seeds): cluster-robust standard errors are anti-conservative with "
            f"fewer than about {_FEW_CLUSTERS} clusters even with the CR1 correction and t({prepared.n_seeds - 1}) "
            "reference; prefer fit_mixed for inference."
        )
    df = float(result.df_resid_inference) if clustered else float(result.df_resid)
    params = np.asarray(result.params, dtype=float)
    se = np.asarray(result.bse, dtype=float)
    fixed = _coef_table(list(x.columns), params, se, df=df)
    diagnostics = FitDiagnostics(
        converged=True,
        boundary=False,
        singular=bool(np.linalg.matrix_rank(x.to_numpy()) < x.shape[1]),
        optimizer="closed form",
        method="OLS",
        warnings=tuple(notes),
        library_warnings=tuple(raw),
        n_obs=len(y),
        n_seeds=prepared.n_seeds,
        n_subset_draws=prepared.n_subset_draws,
        n_failed=prepared.n_failed,
        n_excluded=prepared.n_excluded,
        llf=float(result.llf),
        aic=float(result.aic),
        bic=float(result.bic),
    )
    return OlsFit(
        result=result,
        response=response,
        task=prepared.task,
        formula=f"{response} ~ {FIXED_FORMULA}",
        design_info=x.design_info,
        frozen_levels=prepared.frozen_levels,
        train_sizes=prepared.train_sizes,
        cov_type=cov_type,
        inference_df=df,
        fixed_effects=fixed,
        diagnostics=diagnostics,
    )


# --------------------------------------------------------------------------------------------------------------
# Binomial GLMM


VB_APPROXIMATION = "variational Bayes (statsmodels BinomialBayesMixedGLM.fit_vb)"
# L-BFGS-B with tight tolerances: statsmodels' default BFGS reaches the same optimum (to ~1e-5) but its dense
# inverse-Hessian updates over the ~2 x (35 + 2 + runs) variational parameters are several times slower.
_VB_OPTIONS = {"ftol": 1e-14, "gtol": 1e-8, "maxiter": 20_000}


def _binomial_counts_model(
    successes: np.ndarray,
    trials: np.ndarray,
    x: pd.DataFrame,
    *,
    seeds: np.ndarray,
    fe_prior_sd: float,
    vc_prior_sd: float,
    expand: bool = False,
) -> Any:
    """``BinomialBayesMixedGLM`` with a seed and a run (observation-level) random intercept.

    statsmodels' class takes 0/1 responses. A run with ``k`` correct out of ``n`` contributes
    ``k E[eta] + n E[-log(1 + exp(eta))]`` to the variational objective (ELBO), exactly the sum over its ``n``
    Bernoulli rows, which share the linear predictor ``eta``. So instead of expanding every run into ``n_eval``
    rows (150,000 rows for the blog grid, minutes per fit), the subclass below keeps one row per run and weights
    the expectation by ``n``; ``expand=True`` builds the expanded 0/1 model instead (the tests check that both
    give the same posterior).
    """
    from scipy import sparse
    from statsmodels.genmod.bayes_mixed_glm import BinomialBayesMixedGLM

    n_runs = len(successes)
    seed_codes, seed_levels = pd.factorize(pd.Series(seeds), sort=True)
    if expand:
        counts = trials.astype(np.int64)
        run_index = np.repeat(np.arange(n_runs), counts)
        offsets = np.arange(len(run_index)) - np.repeat(np.cumsum(counts) - counts, counts)
        endog = (offsets < successes[run_index]).astype(float)
    else:
        run_index = np.arange(n_runs)
        endog = successes
    rows = np.arange(len(run_index))
    ones = np.ones(len(rows))
    z_seed = sparse.csr_matrix((ones, (rows, seed_codes[run_index])), shape=(len(rows), len(seed_levels)))
    z_run = sparse.csr_matrix((ones, (rows, run_index)), shape=(len(rows), n_runs))
    kwargs = {
        "exog": x.to_numpy(dtype=float)[run_index],
        "exog_vc": sparse.hstack([z_seed, z_run]).tocsr(),
        "ident": np.r_[np.zeros(len(seed_levels), dtype=int), np.ones(n_runs, dtype=int)],
        "vcp_p": vc_prior_sd,
        "fe_p": fe_prior_sd,
        "fep_names": list(x.columns),
        "vcp_names": ["seed", "run"],
        "vc_names": [f"seed[{s}]" for s in seed_levels] + [f"run[{i}]" for i in range(n_runs)],
    }
    if expand:
        return BinomialBayesMixedGLM(endog, **kwargs)

    class _BinomialCounts(BinomialBayesMixedGLM):
        def __init__(self, successes: np.ndarray, trials: np.ndarray, **kw: Any) -> None:
            # Skip BinomialBayesMixedGLM's 0/1 check; the rest of the set-up is the base class's.
            super(BinomialBayesMixedGLM, self).__init__(successes, family=_binomial_family(), **kw)
            self.trials = trials

        def vb_elbo(self, vb_mean: np.ndarray, vb_sd: np.ndarray) -> float:
            fep_mean, vcp_mean, vc_mean = self._unpack(vb_mean)
            fep_sd, vcp_sd, vc_sd = self._unpack(vb_sd)
            tm, tv = self._lp_stats(fep_mean, fep_sd, vc_mean, vc_sd)

            def h(z: np.ndarray) -> np.ndarray:
                return -self.trials * np.logaddexp(0.0, tm + np.sqrt(tv) * z)

            return self.vb_elbo_base(h, tm, fep_mean, vcp_mean, vc_mean, fep_sd, vcp_sd, vc_sd)

        def vb_elbo_grad(self, vb_mean: np.ndarray, vb_sd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            from scipy.special import expit

            fep_mean, vcp_mean, vc_mean = self._unpack(vb_mean)
            fep_sd, vcp_sd, vc_sd = self._unpack(vb_sd)
            tm, tv = self._lp_stats(fep_mean, fep_sd, vc_mean, vc_sd)

            def h(z: np.ndarray) -> np.ndarray:
                return -self.trials * expit(tm + np.sqrt(tv) * z)

            return self.vb_elbo_grad_base(h, tm, tv, fep_mean, vcp_mean, vc_mean, fep_sd, vcp_sd, vc_sd)

    return _BinomialCounts(endog, trials, **kwargs)


def _binomial_family() -> Any:
    from statsmodels.genmod import families

    return families.Binomial()


def fit_glmm(
    data: pd.DataFrame,
    *,
    task: str | None = None,
    include_failed: bool = True,
    fe_prior_sd: float = 10.0,
    vc_prior_sd: float = 1.0,
    rng: int = 0,
) -> GlmmFit:
    r"""Fit a binomial (logit) mixed model to the number of correct evaluation examples per run.

    Parameters
    ----------
    data, task, include_failed
        As for :func:`fit_mixed`. Needs ``n_correct`` and ``n_eval`` (classification tasks).
    fe_prior_sd
        Standard deviation of the normal prior of each fixed effect (logit scale); the default 10 is flat
        over any plausible accuracy.
    vc_prior_sd
        Standard deviation of the normal prior of the log standard deviation of each random intercept.
    rng
        Seed of the starting values of the variational fit.

    Returns
    -------
    GlmmFit
        With ``fixed_effects`` (``term, post_mean, post_sd, ci_low, ci_high``, logit scale),
        ``variance_components`` (``component, log_sd_mean, log_sd_sd, sd``), ``approximation`` and
        ``diagnostics``.

    Raises
    ------
    ModelFitError
        As for :func:`fit_mixed`, or ``n_correct`` is missing (regression tasks have no correct count).

    Notes
    -----
    Model: ``n_correct ~ Binomial(n_eval, p)`` with

    .. math:: \operatorname{logit} p_i = \mu_{kn} + u_s + w_i, \quad u_s \sim N(0, \sigma^2_{seed}),\;
        w_i \sim N(0, \sigma^2_{run})

    with the fixed effects and coding of :func:`fit_mixed`, a random intercept for seed, and an
    observation-level random intercept :math:`w_i` for the run. Without :math:`w_i` the binomial variance of
    the evaluation set (SD about 0.011 at 88% accuracy on 872 examples) would be the only run-to-run variation,
    while seeds of a fine-tuning run typically differ by several points: the intervals would be far too narrow
    (Harrison 2014). ``n_correct`` counts the final checkpoint's correct predictions, so this models
    ``final_dev``, not ``best_dev``.

    Fitting: statsmodels' ``BinomialBayesMixedGLM`` needs 0/1 responses, so each run is expanded into
    ``n_eval`` Bernoulli rows (``n_correct`` ones), and fitted with ``fit_vb``, a *mean-field* variational Bayes
    approximation: the posterior is approximated by independent normals, so posterior correlations (between
    coefficients, and between cell means and the seed intercepts) are ignored and posterior SDs are typically
    too small. That is why :class:`GlmmFit` offers no covariance and the marginal-mean functions refuse it; read
    it as a check of the direction and rough size of effects on the logit scale, and use :func:`fit_mixed` for
    intervals. Intervals are ``post_mean ± 1.96 post_sd``.

    Missing data: runs missing ``n_correct`` (or the response) are dropped, as in :func:`fit_mixed`.

    References
    ----------
    Blei, D. M., Kucukelbir, A. & McAuliffe, J. D. (2017). Variational inference: a review for statisticians.
    *Journal of the American Statistical Association* 112(518), 859-877.
    Harrison, X. A. (2014). Using observation-level random effects to model overdispersion in count data in
    ecology and evolution. *PeerJ* 2:e616.
    """
    prepared = _prepare(
        data,
        "final_dev",
        task=task,
        include_failed=include_failed,
        caller="fit_glmm",
        extra_columns=("n_correct", "n_eval"),
    )
    frame = prepared.frame
    x = _design(prepared)
    successes = frame["n_correct"].to_numpy(dtype=float)
    trials = frame["n_eval"].to_numpy(dtype=float)
    bad = (successes < 0) | (successes > trials) | (trials < 1) | (successes != np.round(successes))
    if bad.any():
        raise ModelFitError(
            f"`n_correct` must be an integer in 0..n_eval (n_eval >= 1), but {int(bad.sum())} runs of task "
            f"{prepared.task!r} violate it (e.g. n_correct={successes[bad][0]!r}, n_eval={trials[bad][0]!r})."
        )
    if (successes == 0).all() or (successes == trials).all():
        raise ModelFitError(
            f"every evaluation example of task {prepared.task!r} is "
            f"{'wrong' if (successes == 0).all() else 'correct'} in every run, so a binomial model has nothing "
            "to estimate."
        )
    model = _binomial_counts_model(
        successes,
        trials,
        x,
        seeds=frame["seed"].to_numpy(),
        fe_prior_sd=fe_prior_sd,
        vc_prior_sd=vc_prior_sd,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = model.fit_vb(rng=rng, fit_method="L-BFGS-B", minim_opts=_VB_OPTIONS)
    raw = [f"statsmodels: {w.category.__name__}: {w.message}" for w in caught]
    retvals = result.optim_retvals
    converged = bool(getattr(retvals, "success", True))
    notes = list(prepared.notes) + raw
    if not converged:
        notes.append(
            f"the variational optimizer did not converge ({getattr(retvals, 'message', '')}); the posterior "
            "summaries may be off."
        )
    notes.append(
        "mean-field variational Bayes ignores posterior correlations, so posterior SDs of the fixed effects are "
        "typically too small; use fit_mixed for intervals."
    )
    mean = np.asarray(result.fe_mean, dtype=float)
    sd = np.asarray(result.fe_sd, dtype=float)
    crit = stats.norm.ppf(0.975)
    fixed = pd.DataFrame(
        {
            "term": list(x.columns),
            "post_mean": mean,
            "post_sd": sd,
            "ci_low": mean - crit * sd,
            "ci_high": mean + crit * sd,
        }
    )
    vcp_mean = np.asarray(result.vcp_mean, dtype=float)
    vcp_sd = np.asarray(result.vcp_sd, dtype=float)
    variance_components = pd.DataFrame(
        {"component": ["seed", "run"], "log_sd_mean": vcp_mean, "log_sd_sd": vcp_sd, "sd": np.exp(vcp_mean)}
    )
    diagnostics = FitDiagnostics(
        converged=converged,
        boundary=False,
        singular=False,
        optimizer="L-BFGS-B (variational objective)",
        method=VB_APPROXIMATION,
        warnings=tuple(notes),
        library_warnings=tuple(raw),
        n_obs=len(frame),
        n_seeds=prepared.n_seeds,
        n_subset_draws=prepared.n_subset_draws,
        n_failed=prepared.n_failed,
        n_excluded=prepared.n_excluded,
        llf=math.nan,
        aic=math.nan,
        bic=math.nan,
    )
    return GlmmFit(
        result=result,
        task=prepared.task,
        formula=f"cbind(n_correct, n_eval - n_correct) ~ {FIXED_FORMULA} + (1 | seed) + (1 | run)",
        design_info=x.design_info,
        frozen_levels=prepared.frozen_levels,
        train_sizes=prepared.train_sizes,
        approximation=VB_APPROXIMATION,
        fixed_effects=fixed,
        variance_components=variance_components,
        diagnostics=diagnostics,
    )


# --------------------------------------------------------------------------------------------------------------
# Likelihood-ratio test of the interaction


def interaction_test(data: pd.DataFrame, response: str = "best_dev", *, task: str | None = None) -> pd.DataFrame:
    r"""Likelihood-ratio test of the frozen_layers × train_size interaction in the mixed model.

    Parameters
    ----------
    data, response, task
        As for :func:`fit_mixed`; failed runs are included.

    Returns
    -------
    pandas.DataFrame
        One row (index ``"frozen_layers:train_size"``) with columns

        * ``test``: ``"LRT frozen_layers:train_size"``
        * ``lr_stat``: :math:`2(\ell_{full} - \ell_{reduced})`
        * ``df``: number of interaction coefficients, :math:`(K - 1)(N - 1)`
        * ``p_val``: upper tail of :math:`\chi^2_{df}`
        * ``llf_full``, ``llf_reduced``: maximised ML log-likelihoods

    Raises
    ------
    ModelFitError
        As for :func:`fit_mixed`, or one of the two models does not converge.

    Notes
    -----
    Full model ``C(frozen_layers) * C(train_size)``, reduced model ``C(frozen_layers) + C(train_size)``, both
    with the random effects of :func:`fit_mixed`, and both fitted by maximum likelihood: REML likelihoods of
    models with different fixed effects are not comparable (Pinheiro & Bates 2000, Sec. 2.4.2). The
    :math:`\chi^2` reference is asymptotic; with few seeds it tends to be anti-conservative for fixed effects
    (same reference), so treat p values near the threshold with care. Missing data as :func:`fit_mixed`.

    References
    ----------
    Pinheiro, J. C. & Bates, D. M. (2000). *Mixed-Effects Models in S and S-PLUS*. Springer, Sec. 2.4.
    """
    prepared = _prepare(data, response, task=task, include_failed=True, caller="interaction_test")
    full = _mixed_from_prepared(prepared, response, reml=False)
    llf_reduced, reduced_converged, k_reduced, reduced_warnings = _mixed_reduced(prepared, response)
    for label, converged, messages in (
        ("full", full.diagnostics.converged, full.diagnostics.warnings),
        ("reduced", reduced_converged, tuple(reduced_warnings)),
    ):
        if not converged:
            raise ModelFitError(
                f"the likelihood-ratio test needs both ML fits to converge, but the {label} model of task "
                f"{prepared.task!r} did not ({'; '.join(messages)}); try fit_mixed(..., reml=False) to inspect it."
            )
    llf_full = full.diagnostics.llf
    df = len(full.params) - k_reduced
    lr = max(2.0 * (llf_full - llf_reduced), 0.0)
    return pd.DataFrame(
        {
            "test": ["LRT frozen_layers:train_size"],
            "lr_stat": [lr],
            "df": [df],
            "p_val": [float(stats.chi2.sf(lr, df)) if df > 0 else math.nan],
            "llf_full": [llf_full],
            "llf_reduced": [llf_reduced],
        },
        index=["frozen_layers:train_size"],
    )


def _mixed_reduced(prepared: _Prepared, response: str) -> tuple[float, bool, int, list[str]]:
    """ML fit of the additive model: log-likelihood, convergence, number of fixed effects, warnings."""
    x = _design(prepared, "frozen_layers + train_size")
    y = prepared.frame[response].to_numpy(dtype=float)
    result, _, notes, _, reported = _fit_mixedlm(y, x, prepared, reml=False)
    return float(result.llf), bool(result.converged), x.shape[1], notes + reported

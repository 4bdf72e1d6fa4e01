"""The linear mixed model of one task: the per-train-size variance model (default) and the pooled one."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.exceptions import ModelFitError

if TYPE_CHECKING:
    from statsmodels.regression.mixed_linear_model import MixedLMResults

from freezestats.stats._checks import unreplicated_cells
from freezestats.stats._design import (
    _BOUNDARY_TOL,
    _FEW_SEEDS,
    FIXED_FORMULA,
    FitDiagnostics,
    _coef_table,
    _design,
    _indicators,
    _prepare,
    _Prepared,
)
from freezestats.stats._mixed_fit import MixedFit
from freezestats.stats.mixed_grouped import GROUPED_VARIANCES, fit_grouped

_OPTIMIZERS: tuple[str, ...] = ("bfgs", "lbfgs", "cg", "powell", "nm")
_GTOL = 1e-8  # gradient tolerance of the gradient-based optimizers (scipy's default 1e-5 leaves ~1e-5 relative error)
_SM_BOUNDARY_MESSAGE = "The MLE may be on the boundary of the parameter space."


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
        beta=np.asarray(result.fe_params, dtype=float),
        variance="pooled",
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
    variance: str = "per_size",
) -> MixedFit:
    r"""Fit the linear mixed model of one task: a mean per (frozen_layers, train_size) cell and the seed structure.

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
    variance
        ``"per_size"`` (default): one residual variance per train size, with ``(1 | seed) + (1 | seed:train_size)``
        (:mod:`freezestats.stats.mixed_grouped`; nlme's ``lme(random = ~1 | seed/size, weights =
        varIdent(~1 | size))``). ``"per_cell"``: one residual variance per cell. ``"pooled"``: one residual
        variance and ``(1 | seed)``, the model below, which lme4 fits too.

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
    if variance not in (*GROUPED_VARIANCES, "pooled"):
        raise ModelFitError(
            f"`variance` must be one of {[*GROUPED_VARIANCES, 'pooled']}, but got variance={variance!r}."
        )
    # a per-cell variance needs two runs a cell: without failed runs, a level with a lone healthy run leaves the fit
    # (with a note), as a level with none does; with them, a lone run is refused below
    prepared = _prepare(
        data, response, task=task, include_failed=include_failed, caller="fit_mixed",
        min_healthy_runs=2 if variance == "per_cell" else 1,
    )  # fmt: skip
    if variance == "per_cell" and include_failed:
        _require_replicated_cells(prepared)
    if variance == "pooled":
        return _mixed_from_prepared(prepared, response, reml)
    return fit_grouped(prepared, response, reml=reml, variance=variance)


def _require_replicated_cells(prepared: _Prepared) -> None:
    """A per-cell residual variance needs two runs in its cell: with one, REML puts it near zero and the cell's
    intervals shrink to what the seed variance alone allows (a one-run cell's EMM SE was 0.019 against 0.032 under
    per-size variances in a simulated study). A study still running has such cells; the per-size model does not
    need them replicated."""
    lone = [f"frozen {k} at n = {n}" for (k,), n, _ in unreplicated_cells(prepared.frame, ["frozen_layers"])]
    if lone:
        raise ModelFitError(
            "fit_mixed: variance='per_cell' gives every cell its own residual variance, which a cell with one run "
            f"cannot estimate ({', '.join(lone)}); use variance='per_size' (the default) or run more seeds."
        )


# --------------------------------------------------------------------------------------------------------------
# Likelihood-ratio test of the interaction


def interaction_test(
    data: pd.DataFrame,
    response: str = "best_dev",
    *,
    task: str | None = None,
    method: str = "F",
    variance: str = "per_size",
    n_boot: int = 1000,
    rng: int | np.random.Generator | None = 0,
    progress: Callable[[int, int], object] | None = None,
    fit: MixedFit | None = None,
) -> pd.DataFrame:
    r"""Test of the frozen_layers × train_size interaction: does the cost of freezing depend on the train size?

    Parameters
    ----------
    data, response, task
        As for :func:`fit_mixed`; failed runs are included.
    method
        ``"F"`` (default): Wald F test of the :math:`(K-1)(N-1)` interaction coefficients in the REML fit of
        :func:`fit_mixed` (``variance`` as given: by default a residual variance per train size, ``(1 | seed) +
        (1 | seed:train_size)``), with Satterthwaite's denominator df by lmerTest's rule for multi-df
        hypotheses (:func:`freezestats.stats.ftest.wald_f_test`). One fit, nothing refitted.
        ``"lrt"``: :math:`\chi^2` likelihood-ratio test of ML fits of the full and the additive model
        (``C(frozen_layers) + C(train_size)``), both with the same variance structure.
        ``"bootstrap"``: the same likelihood ratio referred to ``n_boot`` parametric-bootstrap draws from the ML
        fit of the additive model, each refitted by both models,
        :math:`p = (1 + \#\{LR^* \ge LR\}) / (n_{boot} + 1)` (pbkrtest's ``PBmodcomp``); two ML fits per draw.
    variance
        The residual variance structure, as for :func:`fit_mixed` (``"per_size"``, ``"per_cell"`` or
        ``"pooled"``; ``"bootstrap"`` needs one of the first two).
    n_boot, rng, progress
        For ``method="bootstrap"``: the number of draws, their random seed, and a callback
        ``progress(done, n_boot)`` called after each draw (the CLI shows a progress bar with it).
    fit
        The REML :func:`fit_mixed` of the same task, when at hand: ``method="F"`` then fits nothing.

    Returns
    -------
    pandas.DataFrame
        One row (index ``"frozen_layers:train_size"``) with columns

        * ``test``: ``"frozen_layers:train_size"``
        * ``f_stat``, ``num_df``, ``den_df``: the F statistic and its df (NaN for the likelihood-ratio methods,
          except ``num_df``)
        * ``p_val``: upper tail of :math:`F(q, \nu)`, of :math:`\chi^2_{df}`, or the bootstrap p value
        * ``method``: ``"F (Satterthwaite)"``, ``"LRT (chi-square, ML)"`` or
          ``"parametric bootstrap LRT (ML, <n> draws)"``
        * ``lr_stat``: :math:`2(\ell_{full} - \ell_{reduced})` (NaN for the F test)
        * ``df``: number of interaction coefficients, :math:`(K - 1)(N - 1)` (= ``num_df``)
        * ``llf_full``, ``llf_reduced``: maximised ML log-likelihoods (NaN for the F test)

    Raises
    ------
    ModelFitError
        As for :func:`fit_mixed`; an unknown ``method``; for the likelihood-ratio methods, an ML fit that does
        not converge.

    Notes
    -----
    Why F by default: the :math:`\chi^2` reference treats the variances as known. With 5 seeds and a residual
    variance per train size, each variance rests on a few degrees of freedom, and the LRT of 24-30
    coefficients rejects a true null far more often than its level (see ``tests/test_stats_ftest.py``); the F
    test's denominator df carry that uncertainty. Likelihood ratios compare ML fits: REML likelihoods of models
    with different fixed effects are not comparable (Pinheiro & Bates 2000, Sec. 2.4.2). The bootstrap is
    exact up to Monte Carlo error under the fitted null, and costs two ML fits per draw.

    Checked against R on ``tests/data/hetero_fixture.csv`` (``tests/data/ftest_reference.R``): the F test
    against lmerTest's ``contest`` / ``anova(ddf = "Satterthwaite")`` on a homoscedastic lmer model, the LRT
    of the per-size model against nlme's ``anova(additive, full)`` of ML fits.

    References
    ----------
    Pinheiro, J. C. & Bates, D. M. (2000). *Mixed-Effects Models in S and S-PLUS*. Springer, Sec. 2.4.
    Kuznetsova, A., Brockhoff, P. B. & Christensen, R. H. B. (2017). lmerTest package: tests in linear mixed
    effects models. *Journal of Statistical Software* 82(13).
    Halekoh, U. & Højsgaard, S. (2014). A Kenward-Roger approximation and parametric bootstrap methods for
    tests in linear mixed models: the R package pbkrtest. *Journal of Statistical Software* 59(9).
    """
    from freezestats.stats.ftest import bootstrap_lrt, grouped_model, lrt, lrt_method, result_row, wald_f_test

    label = "frozen_layers:train_size"
    if method not in ("F", "lrt", "bootstrap"):
        raise ModelFitError(f"`method` must be one of ['F', 'lrt', 'bootstrap'], but got method={method!r}.")
    if variance not in (*GROUPED_VARIANCES, "pooled"):
        raise ModelFitError(
            f"`variance` must be one of {[*GROUPED_VARIANCES, 'pooled']}, but got variance={variance!r}."
        )
    if method == "F":
        if fit is None:
            fit = fit_mixed(data, response, task=task, variance=variance)
        names = [n for n in fit.design_info.column_names if n.startswith("frozen_layers[") and ":train_size[" in n]
        f = wald_f_test(fit, names, test=label).iloc[0]
        return result_row(
            label,
            f_stat=f["f_stat"],
            num_df=f["num_df"],
            den_df=f["den_df"],
            p_val=f["p_val"],
            method=f["method"],
            index=label,
        )
    prepared = _prepare(data, response, task=task, include_failed=True, caller="interaction_test")
    if variance == "pooled":
        if method == "bootstrap":
            raise ModelFitError(
                "method='bootstrap' refits the per-size (or per-cell) model; use variance='per_size' or 'per_cell'."
            )
        full = _mixed_from_prepared(prepared, response, reml=False)
        llf_reduced, reduced_converged, k_reduced, reduced_warnings = _mixed_reduced(prepared, response)
        for name, converged, messages in (
            ("full", full.diagnostics.converged, full.diagnostics.warnings),
            ("reduced", reduced_converged, tuple(reduced_warnings)),
        ):
            if not converged:
                raise ModelFitError(
                    f"the likelihood-ratio test needs both ML fits to converge, but the {name} model of task "
                    f"{prepared.task!r} did not ({'; '.join(messages)}); try fit_mixed(..., reml=False) to inspect it."
                )
        llf_full = full.diagnostics.llf
        df = len(full.params) - k_reduced
        lr = max(2.0 * (llf_full - llf_reduced), 0.0)
        out = {"lr_stat": lr, "df": df, "llf_full": llf_full, "llf_reduced": llf_reduced}
        out["p_val"] = float(stats.chi2.sf(lr, df)) if df > 0 else math.nan
    else:
        full_model = grouped_model(prepared, response, variance=variance)
        reduced_model = grouped_model(prepared, response, "frozen_layers + train_size", variance=variance)
        if method == "lrt":
            out = lrt(full_model, reduced_model)
        else:
            out = bootstrap_lrt(full_model, reduced_model, n_boot=n_boot, rng=rng, progress=progress)
    return result_row(
        label,
        num_df=out["df"],
        p_val=out["p_val"],
        method=lrt_method(method, out.get("n_boot")),
        lr_stat=out["lr_stat"],
        llf_full=out["llf_full"],
        llf_reduced=out["llf_reduced"],
        index=label,
    )


def _mixed_reduced(prepared: _Prepared, response: str) -> tuple[float, bool, int, list[str]]:
    """ML fit of the additive model: log-likelihood, convergence, number of fixed effects, warnings."""
    x = _design(prepared, "frozen_layers + train_size")
    y = prepared.frame[response].to_numpy(dtype=float)
    result, _, notes, _, reported = _fit_mixedlm(y, x, prepared, reml=False)
    return float(result.llf), bool(result.converged), x.shape[1], notes + reported

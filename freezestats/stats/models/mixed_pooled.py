"""The pooled-variance linear mixed model (``fit_mixed(..., variance="pooled")``), fitted by statsmodels.

One residual variance for every run, ``(1 | seed)``, and ``(1 | subset_draw)`` when the table has several
subset draws: the model lme4 fits too, and the one the R checks in ``tests/data/lme4_reference.R`` pin down.
It is one of the two implementations :func:`freezestats.stats.models.mixed.fit_mixed` chooses between, the other being
the per-size model of :mod:`freezestats.stats.models.mixed_grouped`; it is kept apart from
:mod:`freezestats.stats.models.mixed`
so that module holds only the entry points (the fit and the interaction test) that pick an implementation, and
so that this one's statsmodels-specific machinery (the optimizer fallback, reading warnings and boundary fits
off a ``MixedLMResults``, the variance structure for Satterthwaite df) sits in one place. Not to be confused
with :mod:`freezestats.stats.comparisons.pooled_tasks`, which pools *tasks* in one model.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from freezestats.exceptions import ModelFitError

if TYPE_CHECKING:
    from statsmodels.regression.mixed_linear_model import MixedLMResults

from freezestats.stats.design.model_frame import (
    _BOUNDARY_TOL,
    _FEW_SEEDS,
    FIXED_FORMULA,
    FitDiagnostics,
    _coef_table,
    _design,
    _indicators,
    _Prepared,
)
from freezestats.stats.models.mixed_fit import MixedFit

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


def _free_components(components: list[str], variances: list[float], scale: float, warn_list: list[str]) -> list[bool]:
    """Which variances are free (the residual always is, last): one at lme4's relative boundary is held at 0,
    and ``warn_list`` says so in words."""
    free = []
    for name, var in zip(components, variances, strict=True):
        rel = math.sqrt(var / scale) if scale > 0 else 0.0
        free.append(rel >= _BOUNDARY_TOL)
        if rel < _BOUNDARY_TOL:
            warn_list.append(
                f"boundary (singular) fit: the {name} variance is estimated at {var:.3g} (SD {rel:.2g} x the "
                f"residual SD, below lme4's tolerance {_BOUNDARY_TOL:g}), so the data show no {name}-to-{name} "
                "variation beyond the residual; the model is then the one without this component, and "
                "intervals treat it as known to be 0."
            )
    return [*free, True]


def _library_messages(reported: list[str], warn_list: list[str]) -> bool:
    """statsmodels' own warnings into ``warn_list`` (its absolute boundary message is replaced by the relative
    check of :func:`_free_components`; see FitDiagnostics.library_warnings); True when one says singular."""
    singular = False
    for message in reported:
        if message.endswith(_SM_BOUNDARY_MESSAGE):
            continue
        if "singular" in message.lower() or "positive definite" in message.lower():
            singular = True
        warn_list.append(message)
    return singular


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
    free = _free_components(components, variances, scale, warn_list)
    boundary = not all(free[:-1])
    singular = _library_messages(reported, warn_list)

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

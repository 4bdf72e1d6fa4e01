"""Least squares with seed-clustered standard errors: the model-free cross-check of the mixed model."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd
import patsy

from freezestats.exceptions import ModelFitError

if TYPE_CHECKING:
    from statsmodels.regression.linear_model import RegressionResultsWrapper

from freezestats.stats.design.model_frame import (
    _FEW_CLUSTERS,
    FIXED_FORMULA,
    FitDiagnostics,
    _coef_table,
    _design,
    _prepare,
    standard_errors,
)


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
    # Not result.bse: statsmodels takes np.sqrt of the diagonal, which warns and gives NaN at -1e-20.
    variances = np.diag(np.asarray(result.cov_params(), dtype=float))
    se = standard_errors(variances)
    if (np.abs(variances) < 1e-12).any():
        notes.append(
            "some coefficients have a zero standard error (every run of their cells scored the same, e.g. "
            "collapsed to the majority class): OLS gives them no interval (NaN); the mixed model floors each "
            "residual variance at one evaluation item's resolution instead"
        )
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

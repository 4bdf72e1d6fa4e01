"""The fit object of the linear mixed models, whatever their variance structure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import pandas as pd
import patsy

from freezestats.stats.design.model_frame import FitDiagnostics

if TYPE_CHECKING:
    from statsmodels.regression.mixed_linear_model import MixedLMResults

__all__ = ["MixedFit", "VarianceModelLike"]


class VarianceModelLike(Protocol):
    """The fitted variance structure: the fixed effects' covariance and Satterthwaite's df for contrasts."""

    cov_beta: np.ndarray

    def satterthwaite_df(self, contrasts: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True, eq=False)
class MixedFit:
    r"""A linear mixed model fitted by :func:`fit_mixed`.

    Attributes
    ----------
    result
        The statsmodels ``MixedLMResults`` of the pooled model; ``None`` for the grouped-variance models, which
        freezestats fits itself (:mod:`freezestats.stats.models.reml`).
    variance
        The residual variance structure: ``"per_size"`` (one per train size, the default), ``"per_cell"`` or
        ``"pooled"`` (one for all runs).
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
        ``component, variance, sd, train_size, at_floor``: ``seed``, ``seed:train_size`` (grouped models),
        ``subset_draw`` / ``subset_draw:train_size`` (when modelled) and the residual variance(s): ``residual``
        (pooled) or ``residual:<size>`` / ``residual:<frozen>@<size>``; ``at_floor`` marks a residual variance
        held at its floor and a random effect estimated at zero (dropped).
    icc_seed
        Share of the within-cell variance of a run due to the seed:
        :math:`\sigma^2_{seed} / (\sigma^2_{seed} + \sigma^2_{subset} + \sigma^2)`; in the grouped models the
        residual and the seed-by-size variances are averaged over the groups first.
    diagnostics
        :class:`FitDiagnostics`.
    """

    result: MixedLMResults | None
    beta: np.ndarray
    variance: str
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
    _variance_model: VarianceModelLike

    @property
    def params(self) -> np.ndarray:
        """Fixed-effect estimates, in the order of ``design_info.column_names``."""
        return self.beta.copy()

    @property
    def cov_params(self) -> np.ndarray:
        r"""Covariance of the fixed-effect estimates, :math:`(X' \hat V^{-1} X)^{-1}` (lme4's ``vcov``).

        statsmodels' ``result.cov_params()`` inverts its joint observed Hessian of fixed effects and variance
        parameters instead; the two agree in balanced designs and differ slightly (~1e-3 relative) otherwise.
        nlme's ``vcov`` of a ``varIdent`` model is this matrix too.
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

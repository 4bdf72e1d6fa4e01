r"""The accuracies of a binomial GLMM's cells: conditional (random effects at zero) and population-average.

Kept apart from :mod:`freezestats.stats.models.glmm`, which fits the model: this module only reads a fitted
:class:`~freezestats.stats.models.glmm.GlmmFit` and integrates its logits over the seed and run effects.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import patsy
from scipy import stats
from scipy.special import expit

from freezestats.exceptions import ModelFitError
from freezestats.stats.models.glmm import GlmmFit
from freezestats.stats.models.marginal import marginal_probability, marginal_probability_derivative

__all__ = ["marginal_accuracy"]

_MARGINAL_NODES = 200  # Gauss-Hermite nodes: error < 1e-12 up to a total SD of 3, ~3e-10 at 4 (40 nodes: ~4e-6 at 3)


def marginal_accuracy(fit: GlmmFit, *, confidence: float = 0.95) -> pd.DataFrame:
    r"""Accuracy of every (frozen_layers, train_size) cell from a GLMM: conditional and population-average.

    :func:`freezestats.stats.estimated_marginal_means` of a :class:`GlmmFit` gives *conditional logits*
    (the log-odds of a run whose seed and run effects are zero). This function gives accuracies; its ``marginal``
    column, the expected accuracy of a new run of the cell, is the one to show as "accuracy".

    Parameters
    ----------
    fit
        A :class:`GlmmFit`.
    confidence
        Coverage of the interval.

    Returns
    -------
    pandas.DataFrame
        One row per cell, sorted by ``train_size`` then ``frozen_layers`` (as ``estimated_marginal_means``), with

        * ``frozen_layers``, ``train_size`` (int)
        * ``conditional``: :math:`\operatorname{expit}(x'\hat\beta)`, the accuracy at random effects = 0 (a
          typical seed's typical run); it is farther from 0.5 than the average run
        * ``marginal``: :math:`E[\operatorname{expit}(x'\hat\beta + u)]`, :math:`u \sim N(0, \hat\sigma^2_{seed}
          + \hat\sigma^2_{run,n} [+ \hat\sigma^2_{subset}])`, the population-average accuracy over seeds and
          runs at that train size (:func:`~freezestats.stats.models.marginal.marginal_probability`, Gauss–Hermite)
        * ``se``: delta-method standard error of ``marginal``, :math:`g'(\eta) \sqrt{x' \hat V x}` with
          :math:`g' =` :func:`~freezestats.stats.models.marginal.marginal_probability_derivative`
        * ``ci_low``, ``ci_high``: interval of ``marginal``

    Raises
    ------
    ModelFitError
        ``fit`` is not a :class:`GlmmFit`, or ``confidence`` is not in (0, 1).

    Notes
    -----
    Interval: :math:`g(\eta) = E[\operatorname{expit}(\eta + u)]` is strictly increasing in :math:`\eta` (its
    derivative :math:`E[p(1-p)]` is positive), so the interval is the Wald interval of the linear predictor,
    :math:`x'\hat\beta \pm z\,\sqrt{x'\hat V x}`, transformed by :math:`g`: it always lies in (0, 1) and is
    asymmetric near the bounds, unlike the delta-method interval ``marginal ± z se`` (which is never used; ``se`` is
    reported for reference). Both hold the variance components at their estimates: the uncertainty of the SDs
    moves ``marginal`` too (more the larger they are) and is not propagated, and the seed SD rests on few seeds,
    so with 5 seeds the interval is anti-conservative.

    Quadrature with 200 Gauss–Hermite nodes: error below 1e-12 for a total SD up to 3 on the logit scale, ~3e-10
    at 4.
    """
    if not isinstance(fit, GlmmFit):
        raise ModelFitError(f"marginal_accuracy needs a GlmmFit from fit_glmm, but got {type(fit).__name__}.")
    if not 0 < confidence < 1:
        raise ModelFitError(f"`confidence` must be in (0, 1), but got confidence={confidence!r}.")
    cells = pd.DataFrame(
        [(k, n) for n in fit.train_sizes for k in sorted(fit.frozen_levels)],
        columns=["frozen_layers", "train_size"],
    )
    grid = pd.DataFrame(
        {
            "frozen_layers": pd.Categorical(cells["frozen_layers"], categories=list(fit.frozen_levels)),
            "train_size": pd.Categorical(cells["train_size"], categories=list(fit.train_sizes)),
        }
    )
    (rows,) = patsy.build_design_matrices([fit.design_info], grid)
    rows = np.asarray(rows, dtype=float)
    eta = rows @ fit.params
    eta_se = np.sqrt(np.einsum("ij,jk,ik->i", rows, fit.cov_params, rows))
    variance = np.array([fit.random_effect_variance(int(n)) for n in cells["train_size"]])
    crit = stats.norm.ppf(0.5 + confidence / 2)
    marginal = marginal_probability(eta, variance, _MARGINAL_NODES)
    slope = marginal_probability_derivative(eta, variance, _MARGINAL_NODES)
    return cells.assign(
        conditional=expit(eta),
        marginal=marginal,
        se=slope * eta_se,
        ci_low=marginal_probability(eta - crit * eta_se, variance, _MARGINAL_NODES),
        ci_high=marginal_probability(eta + crit * eta_se, variance, _MARGINAL_NODES),
    )

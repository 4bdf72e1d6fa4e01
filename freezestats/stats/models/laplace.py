r"""Maximum-likelihood binomial GLMM by glmer's joint Laplace approximation, and marginal accuracies.

Why this module exists
----------------------
A run's accuracy is ``k`` correct answers out of ``n`` evaluation items, so its sampling noise is binomial and
known; what a mixed model has to estimate is the spread of the runs' *true* accuracies around their cell mean (a
run-level random effect) and the spread shared by all runs of one seed (a seed random effect). statsmodels'
variational Bayes fit of this model gives posterior SDs several times too narrow, so the fixed effects'
uncertainty is understated. This module fits the same model by maximum likelihood with the Laplace
approximation that ``lme4::glmer(..., nAGQ = 1)`` uses, and reproduces glmer's estimates, standard errors and
deviance (``tests/test_stats_laplace.py`` checks them against ``tests/data/glmer_reference.json``).

Model
-----
For observation (run) ``i`` with ``k_i`` successes out of ``n_i`` trials::

    k_i ~ Binomial(n_i, expit(eta_i)),    eta_i = x_i' beta + sum over terms t of b_t[code_t(i)],
    b_t[l] ~ N(0, sd_t[variance_index_t[l]]^2), independent.

A :class:`RandomTerm` is a scalar random intercept with one level code per observation; each of its levels may
use a different variance parameter. freezestats uses a seed term (one variance) and a run-level term whose
variance differs by train size (in lme4:
``(0 + dummy(train_size, "50") | run) + (0 + dummy(train_size, "200") | run) + ...``, one variance each).

Fitting (lme4's parametrisation; Bates et al. 2015, Pinheiro & Chao 2006)
------------------------------------------------------------------------
Write ``b = Lambda u`` with ``Lambda = diag(theta)`` (``theta`` = the SDs, one per level, as the level's variance
parameter says; binomial has no residual scale, so ``theta`` *is* the SD) and ``u ~ N(0, I)``. For given
``(theta, beta)``, penalised iteratively reweighted least squares (PIRLS, here plain Newton with step halving)
finds the conditional mode ``u_hat`` of ``-2 log p(y | u) + ||u||^2``. The Laplace approximation of
``-2 log L(theta, beta)`` is then

    D(theta, beta) = -2 log p(y | u_hat) + ||u_hat||^2 + log det(Lambda Z' W Z Lambda + I),

with ``W = diag(n_i p_i (1 - p_i))`` at the mode and ``p(y | u)`` the full binomial likelihood (binomial
coefficients included, as glmer's ``logLik``). ``D`` is minimised over ``(theta, beta)`` *jointly*, as glmer's
second stage does (the first stage, ``nAGQ = 0``, only supplies starting values there; here a GLM does). The
optimiser is L-BFGS-B with ``theta >= 0`` and an analytic gradient (envelope theorem for the mode, implicit
differentiation of ``u_hat`` for the determinant), followed by projected Newton steps on a finite-difference
Hessian, so the optimum is located to ~1e-8 rather than to a stopping rule.

Standard errors
---------------
``cov_beta`` is glmer's ``vcov(fit, use.hessian = TRUE)``: twice the inverse of the Hessian of ``D`` over
``(theta, beta)`` (central differences of the analytic gradient), beta block. It accounts for the estimation of
``theta``. ``cov_beta_conditional`` is ``use.hessian = FALSE``: the inverse of the Schur complement
``X'WX - X'WZ Lambda (Lambda Z'WZ Lambda + I)^{-1} Lambda Z'WX`` at the mode, i.e. the covariance of ``beta``
given ``theta``; it is smaller when ``beta`` and ``theta`` are correlated in the likelihood. A SD estimated at zero
(on the boundary) is held fixed at zero in the Hessian: the deviance is even in each SD, so its cross-derivatives
with ``beta`` vanish there and dropping it changes nothing but avoids inverting a near-singular matrix.

Marginal vs conditional probabilities
-------------------------------------
``expit(x' beta)`` is the accuracy of a run whose random effects are all zero: estimated marginal means computed
at random effects = 0 are *conditional* on a typical seed and run. The population-average accuracy over seeds and
runs is :func:`marginal_probability` (:mod:`freezestats.stats.models.marginal`), ``E[expit(x' beta + u)]`` with
``u ~ N(0, sum of the variances averaged over)``; it lies closer to 0.5 than the conditional one, by an amount
that grows with the variance.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import linalg

from freezestats.exceptions import ModelFitError
from freezestats.stats.models.laplace_layout import RandomTerm, _Layout, _layout, _validate
from freezestats.stats.models.laplace_problem import _LaplaceProblem
from freezestats.stats.models.laplace_steps import (
    _escape_from_zero,
    _glm_start,
    _minimise,
    _newton_polish,
    _projected_gradient,
)

__all__ = [
    "LaplaceFit",
    "RandomTerm",
    "fit_binomial_laplace",
]

_BOUNDARY_TOL = 1e-4  # an SD below this is reported on the boundary (lme4's isSingular tolerance on theta)
_MAX_RESTARTS = 5  # L-BFGS-B runs, restarting each time an SD is stuck at zero on a saddle point


# --------------------------------------------------------------------------------------------------------------
# Public objects (RandomTerm is in freezestats.stats.models.laplace_layout, with the input checks)


@dataclass(frozen=True)
class LaplaceFit:
    """A binomial GLMM fitted by :func:`fit_binomial_laplace` (maximum likelihood, Laplace approximation).

    Attributes
    ----------
    beta
        Fixed effects, in the column order of ``x``.
    cov_beta
        Their covariance from the Hessian of the Laplace deviance over (SDs, beta), as glmer's
        ``vcov(fit, use.hessian = TRUE)``; the SEs are ``sqrt(diag(cov_beta))``.
    cov_beta_conditional
        The covariance of ``beta`` given the SDs (glmer's ``use.hessian = FALSE``, from the PIRLS
        decomposition); ``None`` if it could not be computed.
    sd
        Random-effect SDs on the logit scale, in term order, then ``variance_names`` order.
    sd_names
        Their names (the terms' ``variance_names``, concatenated).
    deviance
        ``-2 * loglik`` (glmer's ``-2 * logLik(fit)``, binomial coefficients included).
    loglik
        The maximised Laplace log-likelihood.
    converged
        The projected gradient of the deviance is below the tolerance and the Hessian of the free parameters is
        positive definite.
    boundary
        Names of the SDs estimated at (numerically) zero: the model reduces to one without those components.
    n_iterations
        Optimiser iterations (L-BFGS-B, then Newton polishing).
    modes
        Conditional modes of the random effects on the logit scale, ``b = Lambda u_hat`` (glmer's ``ranef``), all
        terms stacked in term order, levels in code order.
    warnings
        Everything that went wrong short of an error (non-convergence, a Hessian that is not positive definite...).
    """

    beta: np.ndarray
    cov_beta: np.ndarray
    cov_beta_conditional: np.ndarray | None
    sd: np.ndarray
    sd_names: tuple[str, ...]
    deviance: float
    loglik: float
    converged: bool
    boundary: tuple[str, ...]
    n_iterations: int
    modes: np.ndarray
    warnings: tuple[str, ...]


# --------------------------------------------------------------------------------------------------------------
# Fitting


def fit_binomial_laplace(
    successes: Any,
    trials: Any,
    x: Any,
    terms: Sequence[RandomTerm],
    *,
    tol: float = 1e-6,
    given_sd: Mapping[str, float] | None = None,
) -> LaplaceFit:
    """Fit a binomial GLMM by maximum likelihood with glmer's joint Laplace approximation (``nAGQ = 1``).

    Parameters
    ----------
    successes, trials
        Per observation: successes ``k_i`` (correct answers) out of ``n_i`` trials (evaluation items).
    x
        Fixed-effects design matrix, ``(n_obs, n_beta)``, full column rank (e.g. from :func:`patsy.dmatrix`).
    terms
        The random intercepts (:class:`RandomTerm`), at least one.
    tol
        Convergence tolerance on the largest component of the projected gradient of the deviance. The fit is
        polished by Newton steps well past it (to ``tol * 1e-3`` where possible), so that estimates are accurate
        to ~1e-8, not to an optimiser's stopping rule.
    given_sd
        SDs held at a given positive value instead of estimated, by variance name: a normal prior on those
        effects (glmmTMB's ``map``). A factor with two levels cannot estimate its SD, and an estimate near zero
        pools the two completely (:mod:`freezestats.stats.failures.pooled_rates`). Left out of ``cov_beta``'s
        Hessian, as boundary SDs are.

    Returns
    -------
    LaplaceFit
        Estimates, glmer-style covariances, deviance, boundary SDs and diagnostics. Problems short of an error are
        reported in ``converged`` and ``warnings``, never as NaN.

    Raises
    ------
    ModelFitError
        The input violates an invariant (shapes, ``0 <= successes <= trials``, integer counts, a design matrix
        of full rank, a response that varies, well-formed random terms).

    Notes
    -----
    Starting values: ``beta`` from a binomial GLM without random effects, every SD 1 (glmer's default ``theta``).
    The deviance is minimised by L-BFGS-B (SDs bounded below by 0) with the analytic gradient, then by projected
    Newton steps; the Hessian for ``cov_beta`` is taken at the final point. A SD below 1e-4 (lme4's
    ``isSingular`` tolerance) is reported in ``boundary``.
    """
    k, n, design = _validate(successes, trials, x)
    if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol > 0):
        raise ModelFitError(f"`tol` must be a positive number, but got tol={tol!r}.")
    layout, sd_names = _layout(terms, k.shape[0])
    given = _given(given_sd or {}, sd_names)
    # The matrices are small (q <= a few hundred): a multithreaded BLAS only adds synchronisation, which costs 20x
    # on a machine whose cores are busy (e.g. with a fine-tuning job).
    with _single_threaded_blas():
        return _fit(k, n, design, layout, sd_names, tol, given)


def _single_threaded_blas() -> contextlib.AbstractContextManager[Any]:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _given(given_sd: Mapping[str, float], sd_names: tuple[str, ...]) -> np.ndarray:
    """The given SDs per variance parameter (NaN where estimated); refuses unknown names and non-positive SDs."""
    unknown = sorted(set(given_sd) - set(sd_names))
    bad = {name: v for name, v in given_sd.items() if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0)}
    if unknown or bad:
        raise ModelFitError(
            f"`given_sd` must name variance parameters of the terms {list(sd_names)} with positive SDs, but got "
            f"unknown {unknown} and non-positive {bad}."
        )
    return np.array([float(given_sd.get(name, np.nan)) for name in sd_names])


def _fit(
    k: np.ndarray,
    n: np.ndarray,
    design: np.ndarray,
    layout: _Layout,
    sd_names: tuple[str, ...],
    tol: float,
    given: np.ndarray,
) -> LaplaceFit:
    """The body of :func:`fit_binomial_laplace`, on validated input (``given``: SDs held, NaN where estimated)."""
    problem = _LaplaceProblem(k, n, design, layout)
    is_given = ~np.isnan(given)
    warnings: list[str] = []

    start = np.concatenate([np.where(is_given, given, 1.0), _glm_start(k, n, design)])
    iterations = 0
    for restart in range(_MAX_RESTARTS):
        result = _minimise(problem, start, tol, given)
        params, deviance, gradient, hessian, polish_iterations = _newton_polish(problem, result.x, tol, given)
        iterations += int(result.nit) + polish_iterations
        escape = _escape_from_zero(problem, params, hessian)
        if escape is None:
            break
        if restart == _MAX_RESTARTS - 1:
            warnings.append(f"An SD is at zero on a saddle point of the deviance after {_MAX_RESTARTS} restarts.")
        start = escape
    state = problem.state(params)
    deviance = state.deviance
    theta, beta = problem.split(params)

    projected = _projected_gradient(params, gradient, given)
    gradient_ok = bool(np.max(np.abs(projected)) <= tol)
    if not gradient_ok:
        warnings.append(
            f"The optimiser stopped with a projected gradient of {np.max(np.abs(projected)):.3g} > tol={tol:g} "
            f"(L-BFGS-B: {result.message})."
        )
    if not state.pirls_converged:
        warnings.append("PIRLS did not find the conditional mode of the random effects at the optimum.")
    if problem.pirls_failures:
        warnings.append(f"PIRLS failed to converge in {problem.pirls_failures} deviance evaluations.")

    boundary = tuple(name for name, value in zip(sd_names, theta, strict=True) if value < _BOUNDARY_TOL)
    keep = np.concatenate([(theta >= _BOUNDARY_TOL) & ~is_given, np.ones(design.shape[1], dtype=bool)])
    conditional = problem.conditional_cov(state)
    hessian_ok = False
    cov_beta: np.ndarray | None = None
    sub = hessian[np.ix_(keep, keep)]
    if np.all(np.isfinite(sub)) and np.min(np.linalg.eigvalsh(sub)) > 0.0:
        cov_full = 2.0 * linalg.inv(sub)
        cov_beta = cov_full[-design.shape[1] :, -design.shape[1] :]
        cov_beta = (cov_beta + cov_beta.T) / 2.0
        hessian_ok = True
    else:
        warnings.append(
            "The Hessian of the Laplace deviance is not positive definite at the optimum: cov_beta falls back to "
            "the conditional covariance (glmer's use.hessian = FALSE)."
        )
        cov_beta = conditional
    if cov_beta is None:
        raise ModelFitError(
            "The fixed effects' covariance must be computable, but neither the Hessian nor the PIRLS "
            "decomposition is positive definite at the optimum."
        )
    modes = np.empty(layout.q)
    modes[layout.to_public] = state.lam * state.u
    return LaplaceFit(
        beta=beta.copy(),
        cov_beta=cov_beta,
        cov_beta_conditional=conditional,
        sd=theta.copy(),
        sd_names=sd_names,
        deviance=float(deviance),
        loglik=float(-deviance / 2.0),
        converged=bool(gradient_ok and hessian_ok and state.pirls_converged),
        boundary=boundary,
        n_iterations=iterations,
        modes=modes,
        warnings=tuple(warnings),
    )

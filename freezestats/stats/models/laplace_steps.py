"""The optimiser's steps of :mod:`freezestats.stats.models.laplace`: the GLM start, L-BFGS-B over the SDs and
fixed effects, the projected Newton polish, and the escape from an SD stuck at zero on a saddle.

Why apart: the fit's public face (its model, its result, its warnings) reads on its own, and these steps are
where the optimisation's care lives. Every step takes ``given``, the SDs held at given values (NaN where
estimated): L-BFGS-B holds them by bounds, Newton leaves them out of its free set.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg, optimize
from scipy.special import expit

from freezestats.stats.models.laplace_problem import _LaplaceProblem

_NEWTON_POLISH_STEPS = 20


def _glm_start(k: np.ndarray, n: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Binomial GLM by Newton's method from the empirical logits: glmer's starting fixed effects.

    Where the GLM is separated (e.g. every failure at the smallest size), it has no finite optimum and Newton's
    steps run off towards infinite logits; the start then stops before linear predictors beyond +-30, and the
    random effects' fit, whose penalty keeps the modes finite, takes it from there.
    """
    eta = np.log((k + 0.5) / (n - k + 0.5))
    beta = np.linalg.lstsq(x, eta, rcond=None)[0]
    for _ in range(50):
        mu = expit(x @ beta)
        w = n * mu * (1.0 - mu)
        step = np.linalg.lstsq(x.T @ (w[:, None] * x), x.T @ (k - n * mu), rcond=None)[0]
        if not np.all(np.isfinite(step)) or np.max(np.abs(x @ (beta + step))) > 30.0:
            break
        beta = beta + step
        if np.max(np.abs(step)) < 1e-10:
            break
    return beta


def _projected_gradient(params: np.ndarray, gradient: np.ndarray, given: np.ndarray) -> np.ndarray:
    """The gradient with the SDs held at zero by a positive gradient, and the given SDs, left out."""
    n_theta = len(given)
    projected = gradient.copy()
    at_bound = ((params[:n_theta] <= 0.0) & (gradient[:n_theta] > 0.0)) | ~np.isnan(given)
    projected[:n_theta][at_bound] = 0.0
    return projected


def _free_mask(params: np.ndarray, gradient: np.ndarray, given: np.ndarray) -> np.ndarray:
    """Parameters that Newton moves: all fixed effects, and every SD not given and not pinned at zero by a positive
    gradient."""
    n_theta = len(given)
    free = np.ones(params.shape[0], dtype=bool)
    free[:n_theta] = ~((params[:n_theta] <= 0.0) & (gradient[:n_theta] >= 0.0)) & np.isnan(given)
    return free


def _newton_polish(
    problem: _LaplaceProblem, params: np.ndarray, tol: float, given: np.ndarray
) -> tuple[np.ndarray, float, np.ndarray, np.ndarray, int]:
    """Projected Newton steps on the finite-difference Hessian, from the L-BFGS-B optimum (given SDs stay put)."""
    n_theta = problem.layout.n_theta
    value, gradient = problem.value_and_gradient(params)
    hessian, hessian_at = problem.hessian(params), params
    iterations = 0
    for _ in range(_NEWTON_POLISH_STEPS):
        free = _free_mask(params, gradient, given)
        if np.max(np.abs(_projected_gradient(params, gradient, given))) <= tol * 1e-3:
            break
        try:
            step_free = -linalg.solve(hessian[np.ix_(free, free)], gradient[free], assume_a="sym")
        except (linalg.LinAlgError, ValueError):
            break
        step = np.zeros_like(params)
        step[free] = step_free
        accepted = False
        for _ in range(30):
            trial = params + step
            trial[:n_theta] = np.maximum(trial[:n_theta], 0.0)
            trial_value, trial_gradient = problem.value_and_gradient(trial)
            if trial_value <= value + 1e-10 * max(1.0, abs(value)):
                accepted = True
                break
            step /= 2.0
        if not accepted:
            break
        iterations += 1
        moved = float(np.max(np.abs(trial - params)))
        params, value, gradient = trial, trial_value, trial_gradient
        if float(np.max(np.abs(params - hessian_at))) > 1e-3:
            hessian, hessian_at = problem.hessian(params), params
        if moved < 1e-12:
            break
    if float(np.max(np.abs(params - hessian_at))) > 1e-7:  # the SEs want the Hessian at the optimum
        hessian = problem.hessian(params)
    return params, value, gradient, hessian, iterations


def _minimise(problem: _LaplaceProblem, start: np.ndarray, tol: float, given: np.ndarray) -> optimize.OptimizeResult:
    n_theta = problem.layout.n_theta
    bounds = [(0.0, None) if np.isnan(v) else (v, v) for v in given] + [(None, None)] * problem.p
    result = optimize.minimize(
        problem.value_and_gradient,
        start,
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"maxiter": 2000, "maxfun": 5000, "ftol": 1e-15, "gtol": tol * 1e-2, "maxcor": 20},
    )
    result.x = np.asarray(result.x, dtype=float)
    result.x[:n_theta] = np.maximum(result.x[:n_theta], 0.0)
    # An SD that L-BFGS-B left just above zero: take zero if that is no worse (lme4's check.boundary).
    for j in range(n_theta):
        if 0.0 < result.x[j] < 1e-5:
            trial = result.x.copy()
            trial[j] = 0.0
            if problem.state(trial).deviance <= problem.state(result.x).deviance:
                result.x = trial
    return result


def _escape_from_zero(problem: _LaplaceProblem, params: np.ndarray, hessian: np.ndarray) -> np.ndarray | None:
    """A better start when an SD sits at zero on a saddle, or ``None`` when every zero SD is a local minimum.

    The deviance is even in every SD, so its gradient vanishes at SD = 0 and a gradient-based optimiser that lands
    there (L-BFGS-B projects overshooting steps onto the bound) never leaves. Zero is a minimum in that direction
    only if the curvature there is >= 0; the cross-derivatives with all other parameters vanish at zero (by the
    same symmetry), so the diagonal of the Hessian decides.
    """
    n_theta = problem.layout.n_theta
    scale = max(1.0, float(np.max(np.abs(hessian))))
    saddle = [j for j in range(n_theta) if params[j] == 0.0 and hessian[j, j] < -1e-8 * scale]
    if not saddle:
        return None
    start = params.copy()
    for j in saddle:
        candidates = []
        for value in (0.02, 0.05, 0.1, 0.2, 0.5, 1.0):
            trial = start.copy()
            trial[j] = value
            candidates.append((problem.state(trial).deviance, value))
        start[j] = min(candidates)[1]
    return start

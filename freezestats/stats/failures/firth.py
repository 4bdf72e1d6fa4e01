"""Firth's penalised-likelihood logistic regression, with profile intervals and likelihood-ratio p values.

Failed runs cluster: at the smallest sizes and deepest freezes every run of a cell can fail, and then the
maximum-likelihood logistic fit diverges (separation). Firth's penalty (the Jeffreys prior, ``0.5 log det I``)
keeps the estimates finite; its intervals come from the profile penalised likelihood, not from Wald's
``estimate ± z se``, which is far off near separation (Heinze & Schemper 2002; the algorithm of R's logistf).
statsmodels has no Firth penalty, hence this module; ``tests/test_stats_failures.py`` checks it by its estimating
equations, its derivatives and closed forms (the Haldane correction of a 2x2 table, the add-a-half proportion).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import optimize, special, stats

__all__ = ["FIRTH_MAX_ITER", "FirthFit", "firth_table", "fit_firth", "profile_interval"]

FIRTH_MAX_ITER = 100
_FIRTH_MAX_STEP = 5.0  # logistf's maxstep
_FIRTH_HALVINGS = 25
_FIRTH_XTOL = 1e-10
_FIRTH_GTOL = 1e-8
_PROFILE_EXPANSIONS = 30


def firth_table(design: np.ndarray, y: np.ndarray, level: float, notes: list[str]) -> pd.DataFrame:
    """Firth fit with profile penalised-likelihood intervals and likelihood-ratio p values."""
    fit = fit_firth(design, y)
    if not fit.converged:
        notes.append(f"Firth's iteration did not converge in {FIRTH_MAX_ITER} steps")
    se = np.sqrt(np.diag(fit.cov))
    crit = float(stats.chi2.ppf(level, 1))
    low, high, p_val = [], [], []
    for j in range(design.shape[1]):
        lo, hi = profile_interval(design, y, fit, j, crit)
        low.append(lo)
        high.append(hi)
        at_zero = fit_firth(design, y, fixed={j: 0.0}, start=fit.beta).penalised_loglik
        p_val.append(float(stats.chi2.sf(max(2.0 * (fit.penalised_loglik - at_zero), 0.0), 1)))
    return pd.DataFrame(
        {"estimate": fit.beta, "se": se, "ci_low": low, "ci_high": high, "z": fit.beta / se, "p_val": p_val}
    )


@dataclass(frozen=True)
class FirthFit:
    beta: np.ndarray
    cov: np.ndarray  # inverse Fisher information I(beta)^{-1}
    penalised_loglik: float
    score: np.ndarray  # the modified score U*(beta) (all coefficients, fixed ones included)
    iterations: int
    converged: bool


@dataclass(frozen=True)
class _Point:
    """Firth's objective at one ``beta``: penalised log-likelihood, modified score, information and its inverse."""

    beta: np.ndarray
    penalised: float
    score: np.ndarray
    information: np.ndarray
    inverse: np.ndarray
    p: np.ndarray


def _firth_point(x: np.ndarray, y: np.ndarray, beta: np.ndarray) -> _Point:
    r"""Penalised log-likelihood :math:`\ell + \frac12\log\det I` and the modified score :math:`U^*` at ``beta``."""
    eta = x @ beta
    p = special.expit(eta)
    w = p * (1.0 - p)
    information = x.T @ (x * w[:, None])
    loglik = float(np.sum(y * eta - np.logaddexp(0.0, eta)))
    try:
        chol = np.linalg.cholesky(information)
        penalised = loglik + float(np.sum(np.log(np.diag(chol))))  # 0.5 log det I
        inverse = np.linalg.inv(information)
    except np.linalg.LinAlgError:
        penalised, inverse = -np.inf, np.linalg.pinv(information, hermitian=True)
    hat = w * np.einsum("ij,jk,ik->i", x, inverse, x)
    score = x.T @ (y - p + hat * (0.5 - p))
    return _Point(beta, penalised, score, information, inverse, p)


def _firth_hessian(x: np.ndarray, point: _Point) -> np.ndarray:
    r"""Hessian of :math:`\ell^*`: :math:`-I + \frac12 \partial^2 \log\det I`, with :math:`Q = X I^{-1} X^\top`,

    .. math:: \partial^2_{rs} \log\det I = \sum_i w''_i x_{ir} x_{is} Q_{ii}
              - \sum_{i,k} w'_i x_{ir} Q_{ik}^2 w'_k x_{ks}

    where :math:`w = p(1-p)`, :math:`w' = w(1-2p)`, :math:`w'' = w(1-2p)^2 - 2w^2` (derivatives in the linear
    predictor). The double sum is computed without the :math:`n \times n` matrix :math:`Q`: with
    :math:`z_i = x_i \otimes x_i`, :math:`Q_{ik}^2 = z_i^\top (I^{-1} \otimes I^{-1}) z_k`, so it is
    :math:`(A^\top Z)(I^{-1} \otimes I^{-1})(Z^\top A)` with :math:`A = \operatorname{diag}(w') X`, linear in :math:`n`.
    """
    p = point.p
    w = p * (1.0 - p)
    w1 = w * (1.0 - 2.0 * p)
    w2 = w * (1.0 - 2.0 * p) ** 2 - 2.0 * w * w
    q_diag = np.einsum("ij,jk,ik->i", x, point.inverse, x)
    second = (x * (w2 * q_diag)[:, None]).T @ x
    z = np.einsum("ij,ik->ijk", x, x).reshape(len(x), -1)
    az = (x * w1[:, None]).T @ z
    second -= az @ np.kron(point.inverse, point.inverse) @ az.T
    return -point.information + 0.5 * second


def fit_firth(
    x: np.ndarray, y: np.ndarray, *, fixed: dict[int, float] | None = None, start: np.ndarray | None = None
) -> FirthFit:
    r"""Maximise Firth's penalised log-likelihood over the coefficients not in ``fixed``.

    Each iteration takes a Newton step on :math:`\ell^*` (exact Hessian, :func:`_firth_hessian`) where that Hessian
    is negative definite, else the modified-score step :math:`I^{-1}U^*` of Heinze & Schemper (2002); the step's
    largest component is capped at 5 and the step is halved until :math:`\ell^*` does not decrease (logistf's
    safeguards). Both steps have the same fixed point, :math:`U^*(\hat\beta) = 0`.
    """
    beta = np.zeros(x.shape[1]) if start is None else np.array(start, dtype=float)
    fixed = fixed or {}
    for j, value in fixed.items():
        beta[j] = value
    free = np.array([j not in fixed for j in range(x.shape[1])])
    point = _firth_point(x, y, beta)
    converged = not free.any()
    iterations = 0
    while not converged and iterations < FIRTH_MAX_ITER:
        iterations += 1
        step = np.zeros_like(beta)
        step[free] = _ascent_direction(x, point, free)
        largest = np.max(np.abs(step))
        if largest > _FIRTH_MAX_STEP:
            step *= _FIRTH_MAX_STEP / largest
        for _ in range(_FIRTH_HALVINGS):  # step halving while the penalised likelihood decreases
            candidate = _firth_point(x, y, point.beta + step)
            if candidate.penalised >= point.penalised - 1e-12:
                break
            step /= 2.0
        else:
            candidate = _firth_point(x, y, point.beta + step)
        point = candidate
        converged = np.max(np.abs(step)) < _FIRTH_XTOL and np.max(np.abs(point.score[free])) < _FIRTH_GTOL
    return FirthFit(point.beta, point.inverse, point.penalised, point.score, iterations, converged)


def _ascent_direction(x: np.ndarray, point: _Point, free: np.ndarray) -> np.ndarray:
    """Newton step on the free coefficients, or the modified-score (Fisher) step where the Hessian is not < 0."""
    hessian = _firth_hessian(x, point)[np.ix_(free, free)]
    try:
        np.linalg.cholesky(-hessian)
        return np.linalg.solve(-hessian, point.score[free])
    except np.linalg.LinAlgError:
        # Far out on a profile (all fitted probabilities near 0 or 1) the information is numerically
        # singular too; least squares gives the minimum-norm Fisher step there instead of raising.
        return np.linalg.lstsq(point.information[np.ix_(free, free)], point.score[free], rcond=None)[0]


def profile_interval(x: np.ndarray, y: np.ndarray, fit: FirthFit, j: int, crit: float) -> tuple[float, float]:
    """Where the profile penalised log-likelihood of coefficient ``j`` has dropped by ``crit / 2``, on each side."""
    best = fit.penalised_loglik
    se = float(np.sqrt(fit.cov[j, j]))

    def excess(value: float) -> float:
        profile = fit_firth(x, y, fixed={j: value}, start=fit.beta).penalised_loglik
        return 2.0 * (best - profile) - crit

    bounds = []
    for direction in (-1.0, 1.0):
        near, distance = fit.beta[j], se
        found = np.inf
        for _ in range(_PROFILE_EXPANSIONS):
            far = fit.beta[j] + direction * distance
            if excess(far) > 0:
                found = optimize.brentq(excess, min(near, far), max(near, far), xtol=1e-8)
                break
            near, distance = far, 2.0 * distance
        bounds.append(found if np.isfinite(found) else direction * np.inf)
    return bounds[0], bounds[1]

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
runs is :func:`marginal_probability` (:mod:`freezestats.stats.marginal`), ``E[expit(x' beta + u)]`` with
``u ~ N(0, sum of the variances averaged over)``; it lies closer to 0.5 than the conditional one, by an amount
that grows with the variance.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import linalg, optimize
from scipy.special import expit, gammaln, log_expit

from freezestats.exceptions import ModelFitError

__all__ = [
    "LaplaceFit",
    "RandomTerm",
    "fit_binomial_laplace",
]

_PIRLS_TOL = 1e-20  # Newton decrement u' M u of the last PIRLS step, relative to max(1, penalised deviance)
_PIRLS_MAX_ITER = 200
_MAX_STEP_HALVINGS = 40
_HESSIAN_STEP = 1e-4  # central-difference step of the gradient, as lme4's deriv12 (delta = 1e-4)
_BOUNDARY_TOL = 1e-4  # an SD below this is reported on the boundary (lme4's isSingular tolerance on theta)
_NEWTON_POLISH_STEPS = 20
_MAX_RESTARTS = 5  # L-BFGS-B runs, restarting each time an SD is stuck at zero on a saddle point


# --------------------------------------------------------------------------------------------------------------
# Public objects


@dataclass(frozen=True)
class RandomTerm:
    """A scalar random intercept: one level code per observation, and one variance parameter per level.

    Attributes
    ----------
    name
        Label of the grouping, e.g. ``"seed"`` or ``"run"`` (used in messages).
    codes
        Integer level of every observation, ``0 .. n_levels - 1``; ``n_levels`` is ``len(variance_index)``.
    variance_index
        For every level, which of this term's variance parameters it uses (``0 .. len(variance_names) - 1``).
        One parameter for all levels is an ordinary ``(1 | group)``; several let the variance differ between
        groups of levels, e.g. a run-level variance per train size.
    variance_names
        One name per variance parameter, unique over all terms of a fit, e.g. ``("seed",)`` or
        ``("run:50", "run:200", "run:1000")``.
    """

    name: str
    codes: np.ndarray
    variance_index: np.ndarray
    variance_names: tuple[str, ...]


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
# Validation


def _as_vector(values: Any, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1:
        raise ModelFitError(f"`{name}` must be one-dimensional, but got an array of shape {array.shape}.")
    if not np.all(np.isfinite(array)):
        raise ModelFitError(f"`{name}` must be finite, but {int((~np.isfinite(array)).sum())} values are not.")
    return array


def _integer_array(values: Any, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ModelFitError(f"`{name}` must be one-dimensional, but got an array of shape {array.shape}.")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        as_float = np.asarray(array, dtype=float)
        if not np.all(np.isfinite(as_float)) or np.any(as_float != np.round(as_float)):
            raise ModelFitError(f"`{name}` must hold integers, but got dtype {array.dtype} with non-integer values.")
    return np.asarray(array, dtype=np.int64)


@dataclass(frozen=True)
class _Layout:
    """Where each observation's random effects sit in the stacked vector, and which SD each position uses.

    Internally the term with the most levels (the run term, one level per observation) comes first: every term's
    own block of ``Z'WZ`` is diagonal (an observation has one level per term), so that block is eliminated in
    O(levels) and only the other terms' levels (the seeds) need dense algebra. ``to_public`` maps internal
    positions back to the term order of the public API.
    """

    big: int  # index of the term placed first
    positions: tuple[np.ndarray, ...]  # per term (public order): internal position of every observation's level
    theta_of_position: np.ndarray  # per internal position: index into the SD vector
    to_public: np.ndarray  # per internal position: its position in the public (term-order) stacking
    q1: int  # levels of the big term
    q2: int  # levels of all other terms
    pair12: np.ndarray  # flat indices into the (q1, q2) cross block, for Z'WZ by bincount
    pair12_obs: np.ndarray
    pair22: np.ndarray  # flat indices into the (q2, q2) block of the other terms
    pair22_obs: np.ndarray
    n_theta: int

    @property
    def q(self) -> int:
        return self.q1 + self.q2


def _layout(terms: Sequence[RandomTerm], n: int) -> tuple[_Layout, tuple[str, ...]]:
    if len(terms) == 0:
        raise ModelFitError("A GLMM needs at least one random term, but `terms` is empty.")
    codes_of: list[np.ndarray] = []
    theta_of_level: list[np.ndarray] = []
    names: list[str] = []
    for term in terms:
        if not isinstance(term, RandomTerm):
            raise ModelFitError(f"`terms` must hold RandomTerm objects, but got {type(term).__name__}.")
        codes = _integer_array(term.codes, f"{term.name}.codes")
        index = _integer_array(term.variance_index, f"{term.name}.variance_index")
        n_var = len(term.variance_names)
        if codes.shape[0] != n:
            raise ModelFitError(
                f"Random term {term.name!r} must have one code per observation ({n}), but has {codes.shape[0]}."
            )
        n_levels = index.shape[0]
        if n_levels == 0 or codes.min() < 0 or codes.max() >= n_levels:
            raise ModelFitError(
                f"Codes of random term {term.name!r} must lie in 0..{n_levels - 1} (one per entry of "
                f"variance_index), but range over {codes.min()}..{codes.max()}."
            )
        if n_var == 0 or index.min() < 0 or index.max() >= n_var:
            raise ModelFitError(
                f"variance_index of random term {term.name!r} must lie in 0..{n_var - 1} (one per variance name), "
                f"but ranges over {index.min()}..{index.max()}."
            )
        unused = sorted(set(range(n_var)) - set(index[np.unique(codes)].tolist()))
        if unused:
            raise ModelFitError(
                f"Every variance parameter needs observations, but {[term.variance_names[j] for j in unused]} "
                f"of random term {term.name!r} has none."
            )
        codes_of.append(codes)
        theta_of_level.append(len(names) + index)
        names.extend(str(name) for name in term.variance_names)
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise ModelFitError(f"Variance names must be unique over all random terms, but {duplicated} repeat.")

    n_levels = [len(levels) for levels in theta_of_level]
    public_offset = np.concatenate([[0], np.cumsum(n_levels)[:-1]]).astype(np.int64)
    big = int(np.argmax(n_levels))
    order = [big] + [t for t in range(len(terms)) if t != big]
    internal_offset = np.zeros(len(terms), dtype=np.int64)
    offset = 0
    for t in order:
        internal_offset[t] = offset
        offset += n_levels[t]
    positions = tuple(internal_offset[t] + codes_of[t] for t in range(len(terms)))
    q1 = n_levels[big]
    q2 = offset - q1
    others = [t for t in order if t != big]
    pair12 = [positions[big] * q2 + (positions[t] - q1) for t in others]
    pair22 = [(positions[t] - q1) * q2 + (positions[s] - q1) for t in others for s in others]
    layout = _Layout(
        big=big,
        positions=positions,
        theta_of_position=np.concatenate([theta_of_level[t] for t in order]),
        to_public=np.concatenate([public_offset[t] + np.arange(n_levels[t]) for t in order]),
        q1=q1,
        q2=q2,
        pair12=np.concatenate(pair12) if pair12 else np.zeros(0, dtype=np.int64),
        pair12_obs=np.tile(np.arange(n), len(others)),
        pair22=np.concatenate(pair22) if pair22 else np.zeros(0, dtype=np.int64),
        pair22_obs=np.tile(np.arange(n), len(others) ** 2),
        n_theta=len(names),
    )
    return layout, tuple(names)


def _validate(successes: Any, trials: Any, x: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    k = _as_vector(successes, "successes")
    n = _as_vector(trials, "trials")
    design = np.asarray(x, dtype=float)
    if design.ndim != 2:
        raise ModelFitError(f"`x` must be a 2-D design matrix, but got an array of shape {design.shape}.")
    if not (k.shape[0] == n.shape[0] == design.shape[0]):
        raise ModelFitError(
            f"`successes`, `trials` and the rows of `x` must have the same length, but got {k.shape[0]}, "
            f"{n.shape[0]} and {design.shape[0]}."
        )
    if k.shape[0] == 0:
        raise ModelFitError("A GLMM needs at least one observation, but got none.")
    if not np.all(np.isfinite(design)):
        raise ModelFitError(f"`x` must be finite, but {int((~np.isfinite(design)).sum())} entries are not.")
    for name, values in (("successes", k), ("trials", n)):
        if np.any(values != np.round(values)):
            bad = values[values != np.round(values)][0]
            raise ModelFitError(f"`{name}` must be whole numbers, but got {name}={bad:g}.")
    if np.any(n < 1):
        raise ModelFitError(f"`trials` must be >= 1, but got trials={n[n < 1][0]:g}.")
    bad = (k < 0) | (k > n)
    if np.any(bad):
        raise ModelFitError(
            f"`successes` must lie in 0..trials, but {int(bad.sum())} observations violate it "
            f"(e.g. successes={k[bad][0]:g}, trials={n[bad][0]:g})."
        )
    if np.all(k == 0) or np.all(k == n):
        raise ModelFitError(
            "The response must vary: a GLMM cannot be fitted when every observation has "
            f"{'no' if np.all(k == 0) else 'only'} successes."
        )
    rank = np.linalg.matrix_rank(design)
    if rank < design.shape[1]:
        raise ModelFitError(
            f"The design matrix `x` must have full column rank, but has rank {rank} < {design.shape[1]} columns."
        )
    return k, n, design


# --------------------------------------------------------------------------------------------------------------
# The Laplace deviance and its gradient


class _System:
    """``M = Lambda Z'WZ Lambda + I`` in block form, factorised; solves, log det and entries of ``M^-1``.

    With the big term's levels first, ``M = [[D, B], [B', E]]`` where ``D`` is diagonal. Eliminating ``D`` leaves the
    Schur complement ``S = E - B' D^-1 B`` of the other terms' size (the seeds), so a factorisation costs
    O(q1 q2^2 + q2^3) instead of O((q1 + q2)^3). This is the Cholesky factor ``L`` of lme4, in another order.
    """

    def __init__(self, layout: _Layout, lam: np.ndarray, weights: np.ndarray) -> None:
        q1, q2 = layout.q1, layout.q2
        self.q1, self.q2 = q1, q2
        self.lam1, self.lam2 = lam[:q1], lam[q1:]
        self.c11 = np.bincount(layout.positions[layout.big], weights=weights, minlength=q1)
        self.c12 = np.bincount(layout.pair12, weights=weights[layout.pair12_obs], minlength=q1 * q2).reshape(q1, q2)
        self.c22 = np.bincount(layout.pair22, weights=weights[layout.pair22_obs], minlength=q2 * q2).reshape(q2, q2)
        self.d = 1.0 + self.lam1**2 * self.c11
        self.b = self.lam1[:, None] * self.c12 * self.lam2[None, :]
        self.bd = self.b / self.d[:, None]  # D^-1 B
        e = self.lam2[:, None] * self.c22 * self.lam2[None, :] + np.eye(q2)
        schur = e - self.b.T @ self.bd
        self.s_chol = linalg.cholesky((schur + schur.T) / 2.0, lower=True) if q2 else np.zeros((0, 0))
        self.log_det = float(np.sum(np.log(self.d)) + 2.0 * np.sum(np.log(np.diag(self.s_chol))))

    def _s_solve(self, rhs: np.ndarray) -> np.ndarray:
        return linalg.cho_solve((self.s_chol, True), rhs) if self.q2 else rhs

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """``M^-1 rhs`` for a vector or a matrix of columns."""
        top, bottom = rhs[: self.q1], rhs[self.q1 :]
        x2 = self._s_solve(bottom - self.bd.T @ top)
        d = self.d if rhs.ndim == 1 else self.d[:, None]
        x1 = (top - self.b @ x2) / d
        return np.concatenate([x1, x2])

    def inverse_blocks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``diag(M^-1)`` of the big block, the cross block and the other terms' block of ``M^-1``."""
        s_inv = self._s_solve(np.eye(self.q2))
        m12 = -self.bd @ s_inv
        m11_diag = 1.0 / self.d - np.sum(m12 * self.bd, axis=1)
        return m11_diag, m12, s_inv


@dataclass
class _State:
    """Everything at the conditional mode for one (theta, beta)."""

    deviance: float
    u: np.ndarray  # spherical random effects, internal order
    eta: np.ndarray
    lam: np.ndarray
    weights: np.ndarray
    system: _System
    pirls_converged: bool


class _LaplaceProblem:
    """The data of one fit, and the Laplace deviance D(theta, beta) with its analytic gradient."""

    def __init__(self, k: np.ndarray, n: np.ndarray, x: np.ndarray, layout: _Layout) -> None:
        self.k = k
        self.n = n
        self.x = x
        self.layout = layout
        self.p = x.shape[1]
        self.log_choose = float(np.sum(gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)))
        self.u_start = np.zeros(layout.q)
        self.pirls_failures = 0

    # Z and Z' products, without forming Z (each term's block is one-hot).
    def z_times(self, vector: np.ndarray) -> np.ndarray:
        out = np.zeros(self.k.shape[0])
        for positions in self.layout.positions:
            out += vector[positions]
        return out

    def zt_times(self, vector: np.ndarray) -> np.ndarray:
        out = np.zeros(self.layout.q)
        for positions in self.layout.positions:
            out += np.bincount(positions, weights=vector, minlength=self.layout.q)
        return out

    def loglik(self, eta: np.ndarray) -> float:
        return float(np.sum(self.k * log_expit(eta) + (self.n - self.k) * log_expit(-eta))) + self.log_choose

    def split(self, params: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return params[: self.layout.n_theta], params[self.layout.n_theta :]

    def state(self, params: np.ndarray) -> _State:
        """PIRLS (Newton with step halving) for the conditional mode at (theta, beta); the Laplace deviance there."""
        theta, beta = self.split(params)
        lam = theta[self.layout.theta_of_position]
        offset = self.x @ beta
        u = np.where(lam == 0.0, 0.0, self.u_start)
        eta = offset + self.z_times(lam * u)
        pdev = -2.0 * self.loglik(eta) + u @ u
        converged = False
        for _ in range(_PIRLS_MAX_ITER):
            mu = expit(eta)
            half_gradient = u - lam * self.zt_times(self.k - self.n * mu)
            system = _System(self.layout, lam, self.n * mu * (1.0 - mu))
            step = -system.solve(half_gradient)
            decrement = float(-half_gradient @ step)
            if decrement <= _PIRLS_TOL * max(1.0, abs(pdev)):
                converged = True  # the Newton step would change the penalised deviance by ~decrement
                break
            for _ in range(_MAX_STEP_HALVINGS):
                new_u = u + step
                new_eta = offset + self.z_times(lam * new_u)
                new_pdev = -2.0 * self.loglik(new_eta) + new_u @ new_u
                if new_pdev <= pdev + 1e-12 * max(1.0, abs(pdev)):
                    break
                step = step / 2.0
            else:
                break  # no step decreases pdev: not converged
            u, eta, pdev = new_u, new_eta, new_pdev
        mu = expit(eta)
        weights = self.n * mu * (1.0 - mu)
        system = _System(self.layout, lam, weights)
        if not converged:
            self.pirls_failures += 1
        elif np.all(np.isfinite(u)):
            self.u_start = u
        deviance = -2.0 * self.loglik(eta) + float(u @ u) + system.log_det
        return _State(deviance, u, eta, lam, weights, system, converged)

    def gradient(self, state: _State) -> np.ndarray:
        """dD/d(theta, beta): envelope theorem for the mode, implicit differentiation of u_hat for log det.

        With ``A = Z Lambda``, ``M = A'WA + I``, ``r = k - n p``, ``c_i = h_i dw_i/deta_i`` where
        ``h = diag(A M^-1 A')``, ``v = M^-1 A'c`` and ``e = c - W A v``:

        - ``dD/dbeta = X'(e - 2 r)``;
        - ``dD/dtheta_j = sum over levels l using theta_j of
          (Z'e - 2 Z'r)_l u_l + 2 (M^-1 Lambda Z'WZ)_ll + v_l (Z'r)_l``.
        """
        layout, system = self.layout, state.system
        u, lam, w = state.u, state.lam, state.weights
        q1 = layout.q1
        mu = expit(state.eta)
        residual = self.k - self.n * mu
        m11_diag, m12, m22 = system.inverse_blocks()
        big = layout.positions[layout.big]
        others = [positions - q1 for t, positions in enumerate(layout.positions) if t != layout.big]
        lam1, lam2 = system.lam1, system.lam2
        # h_i: the big term's level with itself (M^-1 is diagonal there), with the others, the others together.
        h = lam1[big] ** 2 * m11_diag[big]
        for pos_t in others:
            h += 2.0 * lam1[big] * lam2[pos_t] * m12[big, pos_t]
            for pos_s in others:
                h += lam2[pos_t] * lam2[pos_s] * m22[pos_t, pos_s]
        c = h * w * (1.0 - 2.0 * mu)
        v = system.solve(lam * self.zt_times(c))
        e = c - w * self.z_times(lam * v)
        zt_r = self.zt_times(residual)
        zt_e = self.zt_times(e)
        # diag(M^-1 Lambda C), C = Z'WZ: C's big block is diagonal (c11), its cross block c12, the rest c22.
        diag_top = m11_diag * lam1 * system.c11 + np.sum(m12 * system.c12 * lam2[None, :], axis=1)
        diag_bottom = np.sum(m12 * system.c12 * lam1[:, None], axis=0)
        diag_bottom += np.sum(m22 * system.c22 * lam2[None, :], axis=1)
        diag_minv_lambda_c = np.concatenate([diag_top, diag_bottom])
        per_position = (zt_e - 2.0 * zt_r) * u + 2.0 * diag_minv_lambda_c + v * zt_r
        grad_theta = np.bincount(layout.theta_of_position, weights=per_position, minlength=layout.n_theta)
        grad_beta = self.x.T @ (e - 2.0 * residual)
        return np.concatenate([grad_theta, grad_beta])

    def value_and_gradient(self, params: np.ndarray) -> tuple[float, np.ndarray]:
        state = self.state(params)
        return state.deviance, self.gradient(state)

    def hessian(self, params: np.ndarray) -> np.ndarray:
        """Central differences of the analytic gradient (step 1e-4, as lme4's deriv12), symmetrised."""
        size = params.shape[0]
        hess = np.empty((size, size))
        saved = self.u_start.copy()
        for j in range(size):
            step = np.zeros(size)
            step[j] = _HESSIAN_STEP
            _, g_plus = self.value_and_gradient(params + step)
            self.u_start = saved.copy()
            _, g_minus = self.value_and_gradient(params - step)
            self.u_start = saved.copy()
            hess[:, j] = (g_plus - g_minus) / (2.0 * _HESSIAN_STEP)
        return (hess + hess.T) / 2.0

    def conditional_cov(self, state: _State) -> np.ndarray | None:
        """(X'WX - X'WZ Lambda M^-1 Lambda Z'WX)^-1: glmer's RX-based vcov (``use.hessian = FALSE``)."""
        wx = state.weights[:, None] * self.x
        atwx = np.column_stack([state.lam * self.zt_times(wx[:, j]) for j in range(self.p)])
        schur = self.x.T @ wx - atwx.T @ state.system.solve(atwx)
        try:
            factor = linalg.cholesky((schur + schur.T) / 2.0, lower=True)
        except linalg.LinAlgError:
            return None
        cov = linalg.cho_solve((factor, True), np.eye(self.p))
        return (cov + cov.T) / 2.0


# --------------------------------------------------------------------------------------------------------------
# Fitting


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


def _projected_gradient(params: np.ndarray, gradient: np.ndarray, n_theta: int) -> np.ndarray:
    projected = gradient.copy()
    at_bound = (params[:n_theta] <= 0.0) & (gradient[:n_theta] > 0.0)
    projected[:n_theta][at_bound] = 0.0
    return projected


def _free_mask(params: np.ndarray, gradient: np.ndarray, n_theta: int) -> np.ndarray:
    """Parameters that Newton moves: all fixed effects, and every SD not pinned at zero by a positive gradient."""
    free = np.ones(params.shape[0], dtype=bool)
    free[:n_theta] = ~((params[:n_theta] <= 0.0) & (gradient[:n_theta] >= 0.0))
    return free


def _newton_polish(
    problem: _LaplaceProblem, params: np.ndarray, tol: float
) -> tuple[np.ndarray, float, np.ndarray, np.ndarray, int]:
    """Projected Newton steps on the finite-difference Hessian, from the L-BFGS-B optimum."""
    n_theta = problem.layout.n_theta
    value, gradient = problem.value_and_gradient(params)
    hessian, hessian_at = problem.hessian(params), params
    iterations = 0
    for _ in range(_NEWTON_POLISH_STEPS):
        free = _free_mask(params, gradient, n_theta)
        if np.max(np.abs(_projected_gradient(params, gradient, n_theta))) <= tol * 1e-3:
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


def fit_binomial_laplace(
    successes: Any,
    trials: Any,
    x: Any,
    terms: Sequence[RandomTerm],
    *,
    tol: float = 1e-6,
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
    # The matrices are small (q <= a few hundred): a multithreaded BLAS only adds synchronisation, which costs 20x
    # on a machine whose cores are busy (e.g. with a fine-tuning job).
    with _single_threaded_blas():
        return _fit(k, n, design, layout, sd_names, tol)


def _single_threaded_blas() -> contextlib.AbstractContextManager[Any]:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _minimise(problem: _LaplaceProblem, start: np.ndarray, tol: float) -> optimize.OptimizeResult:
    n_theta = problem.layout.n_theta
    bounds = [(0.0, None)] * n_theta + [(None, None)] * problem.p
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


def _fit(
    k: np.ndarray, n: np.ndarray, design: np.ndarray, layout: _Layout, sd_names: tuple[str, ...], tol: float
) -> LaplaceFit:
    """The body of :func:`fit_binomial_laplace`, on validated input."""
    problem = _LaplaceProblem(k, n, design, layout)
    n_theta = layout.n_theta
    warnings: list[str] = []

    start = np.concatenate([np.ones(n_theta), _glm_start(k, n, design)])
    iterations = 0
    for restart in range(_MAX_RESTARTS):
        result = _minimise(problem, start, tol)
        params, deviance, gradient, hessian, polish_iterations = _newton_polish(problem, result.x, tol)
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

    projected = _projected_gradient(params, gradient, n_theta)
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
    keep = np.concatenate([theta >= _BOUNDARY_TOL, np.ones(design.shape[1], dtype=bool)])
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

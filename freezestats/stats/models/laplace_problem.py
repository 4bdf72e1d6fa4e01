"""The Laplace deviance of the binomial GLMM of :mod:`freezestats.stats.models.laplace`, and its analytic gradient.

:class:`_LaplaceProblem` holds the data of one fit and evaluates ``D(theta, beta)``: PIRLS for the conditional
mode of the random effects, the block-factorised system ``Lambda Z'WZ Lambda + I`` (:class:`_System`), the
analytic gradient and the finite-difference Hessian. It is the numerical core, kept apart from the input checks
(:mod:`freezestats.stats.models.laplace_layout`) and from the optimiser that minimises it
(:mod:`freezestats.stats.models.laplace`, where the model and the method are described).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg
from scipy.special import expit, gammaln, log_expit

from freezestats.stats.models.laplace_layout import _Layout

_PIRLS_TOL = 1e-20  # Newton decrement u' M u of the last PIRLS step, relative to max(1, penalised deviance)
_PIRLS_MAX_ITER = 200
_MAX_STEP_HALVINGS = 40
_HESSIAN_STEP = 1e-4  # central-difference step of the gradient, as lme4's deriv12 (delta = 1e-4)

# scipy.linalg.cholesky and cho_solve spend ~40-80 us a call in argument checks and the batching wrapper that
# scipy >= 1.15 puts around them, against a few us in LAPACK for matrices of the seeds' size; PIRLS makes tens of
# thousands of such calls per analysis. The same LAPACK routines are called directly, with the checks that can
# fire here kept (non-finite input, a matrix that is not positive definite), so the results are the same bits.
_POTRF, _POTRS = linalg.get_lapack_funcs(("potrf", "potrs"), (np.empty((1, 1)),))


def _cholesky_lower(a: np.ndarray) -> np.ndarray:
    """``scipy.linalg.cholesky(a, lower=True)`` without its per-call overhead (float64 ``a``)."""
    if not np.isfinite(a).all():
        raise ValueError("array must not contain infs or NaNs")
    factor, info = _POTRF(a, lower=1, clean=1)
    if info > 0:
        raise linalg.LinAlgError(f"{info}-th leading minor of the array is not positive definite")
    if info < 0:  # pragma: no cover - an argument LAPACK rejects is a bug here, not a property of the data
        raise ValueError(f"LAPACK reported an illegal value in {-info}-th argument on entry to POTRF.")
    return factor


def _cho_solve_lower(factor: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``scipy.linalg.cho_solve((factor, True), rhs)`` without its per-call overhead (float64, finite factor)."""
    if not np.isfinite(rhs).all():
        raise ValueError("array must not contain infs or NaNs")
    solution, info = _POTRS(factor, rhs, lower=1)
    if info != 0:  # pragma: no cover - as above
        raise ValueError(f"illegal value in {-info}th argument of internal potrs")
    return solution


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
        self.s_chol = _cholesky_lower((schur + schur.T) / 2.0) if q2 else np.zeros((0, 0))
        self.log_det = float(np.sum(np.log(self.d)) + 2.0 * np.sum(np.log(np.diag(self.s_chol))))

    def _s_solve(self, rhs: np.ndarray) -> np.ndarray:
        return _cho_solve_lower(self.s_chol, rhs) if self.q2 else rhs

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
            factor = _cholesky_lower((schur + schur.T) / 2.0)
        except linalg.LinAlgError:
            return None
        cov = _cho_solve_lower(factor, np.eye(self.p))
        return (cov + cov.T) / 2.0

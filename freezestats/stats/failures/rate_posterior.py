r"""The failure part's interval: the pair's failure rates drawn jointly from their model, not one cell at a time.

Why not a Wilson interval per cell, joined by MOVER
----------------------------------------------------
The failure part of a contrast, :math:`F = p_k (b_k - h_k) - p_0 (b_0 - h_0)`, is a difference of two rates that
share most of their uncertainty: in the pair's binomial GLMM (:mod:`~freezestats.stats.failures.pooled_rates`)
both cells of a size carry the same intercept and the same size effect, and at a size where the pair's 10 runs
show no failure that shared part is all but unknown (the size SD is 5-6 on the logit on the realistic simulator,
where nearly every run at 50 examples is flagged and 2% at 1000). A Wilson interval per cell at its effective
number of runs gives each rate room up to ~10%, and MOVER (Zou & Donner 2008) cannot take that room back with the
two cells' correlation: a rate near 0 has no room *below* it, so the reference's term cannot offset the depth's.
The lower side of :math:`F` then stayed 4-5 points long at 1000 examples whenever the pair failed at some size,
even for depths that fail exactly as often as full fine-tuning: coverage of the task's truth 0.98-1.00 at
n >= 200 (``bench/results/coverage_task_level.txt``), 2.0 times the width a normal estimate with the observed
spread needs (``bench/results/task_level_interval_parts.txt``). If the shared part is high, both rates are high
together, and their difference is what :math:`F` needs.

What it does instead
--------------------
The quantiles of :math:`F` over the posterior of the model's coefficients :math:`\theta` (intercept and the
random effects whose SD is not zero) given the fitted SDs, the empirical-Bayes distribution that lme4's
prediction intervals and ``merTools::predictInterval`` also simulate from:

.. math:: \pi(\theta \mid y) \propto \prod_c \operatorname{expit}(r_c\theta)^{y_c}\,
          (1 - \operatorname{expit}(r_c\theta))^{m_c - y_c}\, \exp(-\tfrac12 \theta^\top G^{-1} \theta)

with the exact binomial likelihood of each cell's :math:`y_c` failures in :math:`m_c` runs (the Gaussian
approximation at the mode puts far too much mass on high rates for a size with no failure: its curvature there
is the prior's alone), sampled by importance sampling: a multivariate t proposal (8 df) at the Laplace mode and
covariance, moved to the weighted draws' mean and covariance for a few stages, each stage's proposal a defensive
mixture with the first (Hesterberg 1995), so that no region the first covers is lost. The weights are the exact
posterior over the proposal's density; the effective sample size (Kish) is kept, and where it is below
:data:`MIN_ESS` the caller falls back to the Wilson-MOVER sides (conservative). The draws come from a fixed
seed, so an analysis gives the same interval every time.

Measured with the SDs as fitted
-------------------------------
On the realistic simulator (``bench/results/coverage_task_level_joint.txt``, 400 studies, 5 seeds, commit
f30421e) the task-level intervals with these draws at the fitted SDs covered 0.945-0.980 at 500-1000 examples
(Wilson-MOVER: 0.980-1.000), but 0.880-0.922 at 100 examples for depths 1-5, all of it in studies with a
collapse in the contrast, with a familywise error of 0.055 at the margin: where the level x size SD is estimated
at 0, as in most fits of two shallow depths, no cell keeps room of its own. ``failure_rates="pooled_joint"``
therefore averages these draws over that SD (:mod:`~freezestats.stats.failures.sd_integration`); the draws at
the fitted SDs stay available as ``pooled_failure_fit(..., posterior="fitted")``.

References
----------
Hesterberg, T. (1995). Weighted average importance sampling and defensive mixture distributions.
*Technometrics* 37(2), 185-194.
Zou, G. Y. & Donner, A. (2008). Construction of confidence limits about effect measures: a general approach.
*Statistics in Medicine* 27(10), 1693-1702.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special
from threadpoolctl import threadpool_limits

__all__ = ["MIN_ESS", "RatePosterior", "sample_rate_posterior", "weighted_interval"]

Cell = tuple[int, int]  # (frozen_layers, train_size)
#: Below this effective sample size the draws are not trusted for a 2.5% quantile, and the caller falls back.
MIN_ESS = 200.0
_T_DF = 8  # the proposal's degrees of freedom: tails heavier than the normal's, still a usable covariance
_DEFENSIVE = 0.25  # each later stage's share of draws from the first proposal (Hesterberg's defensive mixture)
_INFLATE = 1.2  # the moved proposal's covariance, a little wider than the weighted draws'
_STAGES = 3  # moves of the proposal after the first
_SEED = 0  # the draws' fixed seed: an analysis gives the same interval every time


@dataclass(frozen=True)
class RatePosterior:
    """Weighted draws of the failure model's coefficients, and each cell's linear-predictor row over them."""

    rows: Mapping[Cell, np.ndarray]
    draws: np.ndarray  # (n_draws, n_coefficients)
    weights: np.ndarray  # (n_draws,), summing to 1
    ess: float

    def values(self, terms: Sequence[tuple[Cell, float]]) -> np.ndarray:
        """:math:`\\sum_j w_j\\,P(\\text{fail})_{c_j}` at every draw, for ``terms`` = ``[(cell, w_j), ...]``."""
        value = np.zeros(len(self.weights))
        for cell, weight in terms:
            value += weight * special.expit(self.draws @ self.rows[cell])
        return value

    def interval(self, terms: Sequence[tuple[Cell, float]], confidence: float) -> tuple[float, float]:
        """The equal-tailed ``confidence`` interval of :meth:`values` over the weighted draws."""
        return weighted_interval(self.values(terms), self.weights, confidence)


def weighted_interval(values: np.ndarray, weights: np.ndarray, confidence: float) -> tuple[float, float]:
    """The equal-tailed ``confidence`` interval of weighted draws (the weights need not sum to 1)."""
    order = np.argsort(values)
    cumulative = np.cumsum(weights[order]) / weights.sum()
    tail = (1.0 - confidence) / 2
    ends = np.searchsorted(cumulative, [tail, 1.0 - tail]).clip(0, len(order) - 1)
    low, high = values[order][ends]
    return float(low), float(high)


def sample_rate_posterior(
    rows: Mapping[Cell, np.ndarray],
    counts: Mapping[Cell, tuple[int, int]],
    theta: np.ndarray,
    cov: np.ndarray,
    prior_precision: np.ndarray,
    *,
    n_draws: int = 10_000,
) -> RatePosterior:
    """Importance-sample the coefficients' posterior (module docstring).

    ``rows`` and ``counts`` give each cell's linear-predictor row and its ``(failed, runs)``; ``theta`` and ``cov``
    are the Laplace mode and the inverse Hessian there; ``prior_precision`` is the diagonal of :math:`G^{-1}`
    (0 for the intercept: flat). :data:`_STAGES` moves of the proposal follow the first, and the draws come from a
    fixed seed (:data:`_SEED`).

    >>> rows = {(0, 100): np.array([1.0])}
    >>> post = sample_rate_posterior(rows, {(0, 100): (2, 10)}, np.array([-1.386]), np.array([[0.3125]]),
    ...                              np.zeros(1))
    >>> low, high = post.interval([((0, 100), 1.0)], 0.95)  # flat prior on the logit: a Beta(2, 8) posterior
    >>> round(low, 2), round(high, 2), post.ess > 5000
    (0.03, 0.48, True)
    """
    cells = list(rows)
    design = np.array([rows[c] for c in cells], dtype=float)
    failed = np.array([counts[c][0] for c in cells], dtype=float)
    runs = np.array([counts[c][1] for c in cells], dtype=float)
    rng = np.random.default_rng(_SEED)
    first = (np.asarray(theta, dtype=float), _cholesky(np.asarray(cov, dtype=float)))
    proposals = [(1.0, first)]
    precision = np.asarray(prior_precision, dtype=float)
    # small matrices: a multithreaded BLAS only adds synchronisation. With the second core busy (another process)
    # a call took 0.36 s where one BLAS thread takes 0.017 s (3,000 draws, cProfile of one coverage study)
    with threadpool_limits(limits=1, user_api="blas"):
        for stage in range(_STAGES + 1):
            draws = _draw(proposals, n_draws, rng)
            log_q = special.logsumexp([np.log(share) + _log_t(draws, *p) for share, p in proposals], axis=0)
            eta = draws @ design.T
            log_lik = (failed * -np.logaddexp(0.0, -eta) + (runs - failed) * -np.logaddexp(0.0, eta)).sum(axis=1)
            log_w = log_lik - 0.5 * (draws**2 @ precision) - log_q
            weights = np.exp(log_w - log_w.max())
            weights /= weights.sum()
            if stage < _STAGES:
                mean = weights @ draws
                centred = draws - mean
                moved = (centred * weights[:, None]).T @ centred * _INFLATE
                proposals = [(_DEFENSIVE, first), (1.0 - _DEFENSIVE, (mean, _cholesky(moved)))]
    return RatePosterior(rows=dict(rows), draws=draws, weights=weights, ess=float(1.0 / (weights**2).sum()))


def _cholesky(cov: np.ndarray) -> np.ndarray:
    """A lower Cholesky factor, with a small ridge where rounding leaves ``cov`` not quite positive definite."""
    return np.linalg.cholesky((cov + cov.T) / 2 + 1e-10 * np.eye(len(cov)))


def _draw(proposals: list[tuple[float, tuple[np.ndarray, np.ndarray]]], n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` draws from the mixture of multivariate t proposals, each its share of them."""
    sizes = [round(share * n) for share, _ in proposals]
    sizes[-1] = n - sum(sizes[:-1])
    parts = []
    for size, (_, (mean, chol)) in zip(sizes, proposals, strict=True):
        z = rng.standard_normal((size, len(mean)))
        scale = np.sqrt(rng.chisquare(_T_DF, size) / _T_DF)
        parts.append(mean + (z @ chol.T) / scale[:, None])
    return np.concatenate(parts)


def _log_t(x: np.ndarray, mean: np.ndarray, chol: np.ndarray) -> np.ndarray:
    """The multivariate t log density (``_T_DF`` df), up to the constant all proposals share."""
    z = np.linalg.solve(chol, (x - mean).T).T
    d = len(mean)
    return -0.5 * (_T_DF + d) * np.log1p(np.einsum("ij,ij->i", z, z) / _T_DF) - np.log(np.diag(chol)).sum()

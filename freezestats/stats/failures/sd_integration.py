r"""The joint draws of a pair's failure rates with the level x size SD integrated out, not fixed at its estimate.

Why
---
:mod:`~freezestats.stats.failures.rate_posterior` draws the pair's coefficients given the GLMM's fitted SDs. In
most fits of two shallow depths the level x size SD is estimated at 0 (two levels, five sizes, a handful of
failures), and then no cell keeps a rate of its own: the depth's rate at a size is the reference's moved by one
level effect shared by every size. On the realistic simulator that made the failure part's interval too short
where a collapse is in the contrast, and the task-level intervals covered 0.880-0.922 at 100 examples
(``bench/results/coverage_task_level_joint.txt``). A floor under the SD fixed that size and over-covered the
others (0.963-1.000 at 500-1000 examples, 80 studies).

What it does
------------
It averages the conditional draws over the SD, as INLA integrates over its hyperparameters (Rue, Martino &
Chopin 2009): on a grid of SDs :math:`\sigma_j`, the pair's GLMM is refitted with the SD given
(:func:`~freezestats.stats.failures.pooled_rates.pooled_failure_fit`), and each grid point gets the weight

.. math:: w_j \propto L(\sigma_j)\; \pi(\sigma_j)\; \Delta_j,

the Laplace likelihood there (maximised over the fixed effects and the size SD), a half-normal prior of scale
:data:`PRIOR_SCALE` on the logit scale, and the width of the grid cell it stands for. Its draws enter with weight
:math:`w_j` times their own importance weights. The grid starts at 0.25, not 0: the prior is kept off the
boundary (Chung et al. 2013: an SD estimated at 0 from few groups is a boundary artefact of the likelihood, not
evidence that the cells share one rate), and the mass between 0 and 0.125 is left out.

Measured (``bench/results/coverage_task_level_integrated.txt``, the realistic simulator's 400-study coverage
bench, MC band 0.929-0.971): no contrast below the band (0.938-0.968 at 100 examples, 0.880-0.922 with the SD
fixed at its estimate), 12 of 30 above it (0.973-0.988, mostly shallow depths at 200-1000 examples, whose true
failure part is 0), against 24 of 30 for Wilson-MOVER; but a familywise error of 0.052 at the margin (MC SE
0.011; Wilson-MOVER 0.033), and 0.056 over 800 null studies (MC SE 0.008; Wilson-MOVER 0.035;
``bench/results/fwer_task_level_400_799.txt``), so ``"pooled_joint"`` was not the default. Those errors came
from tests that scaled the failure part's 95% side to their 0.1-1% levels as if it were normal; since each test
reads the side at its own level (:mod:`freezestats.stats.inference.tail_matched`) it errs in 0.015 of the same
800 (``fwer_task_level_0_399.txt``, ``fwer_task_level_joint_400_799.txt``), the 95% intervals unchanged, and it
is the default (:data:`~freezestats.stats.items.task_two_part.DEFAULT_FAILURE_RATES`).

References
----------
Chung, Y., Rabe-Hesketh, S., Dorie, V., Gelman, A. & Liu, J. (2013). A nondegenerate penalized likelihood
estimator for variance parameters in multilevel models. *Psychometrika* 78(4), 685-709.
Rue, H., Martino, S. & Chopin, N. (2009). Approximate Bayesian inference for latent Gaussian models by using
integrated nested Laplace approximations. *JRSS B* 71(2), 319-392.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from freezestats.stats.failures.rate_posterior import MIN_ESS, RatePosterior, weighted_interval

__all__ = ["PRIOR_SCALE", "SD_GRID", "RateMixture", "integrate_over_sd"]

Cell = tuple[int, int]  # (frozen_layers, train_size)
#: The level x size SDs (logit scale) the conditional draws are taken at.
SD_GRID: tuple[float, ...] = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0)
#: The half-normal prior's scale on that SD: a cell's rate may differ from its level's and size's by a factor of
#: about e without surprise.
PRIOR_SCALE = 1.0
#: Refit the pair at a given SD: its log likelihood and a function drawing ``n`` times from that fit's posterior.
FitAt = Callable[[float], tuple[float, Callable[[int], RatePosterior]] | None]
_MIN_WEIGHT = 0.01  # grid points below this share of the weight are not sampled (their draws would hardly count)
_DRAWS = 4_000  # draws per grid point sampled


@dataclass(frozen=True)
class RateMixture:
    """Weighted sets of conditional draws (:class:`RatePosterior`), one per grid point of the SD sampled (``sds``;
    the weights sum to 1 over them)."""

    parts: tuple[tuple[float, RatePosterior], ...]
    sds: tuple[float, ...]

    @property
    def ess(self) -> float:
        """Kish's effective sample size of all draws with their combined weights."""
        weights = np.concatenate([share * part.weights for share, part in self.parts])
        return float(weights.sum() ** 2 / (weights**2).sum())

    def interval(self, terms: Sequence[tuple[Cell, float]], confidence: float) -> tuple[float, float]:
        """As :meth:`RatePosterior.interval`, over every grid point's draws."""
        values = [part.values(terms) for _, part in self.parts]
        weights = [share * part.weights for share, part in self.parts]
        return weighted_interval(np.concatenate(values), np.concatenate(weights), confidence)


def integrate_over_sd(fit_at: FitAt) -> RateMixture | None:
    """The conditional draws averaged over :data:`SD_GRID` (module docstring).

    ``fit_at(sd)`` refits the pair with the level x size SD given and returns the fit's log likelihood and a
    function that draws ``n`` times from that fit's posterior; ``None`` where the fit fails (the grid point is left
    out). Returns ``None`` where no grid point could be fitted, or the draws are too few to trust
    (:data:`~freezestats.stats.failures.rate_posterior.MIN_ESS`).
    """
    grid = np.array(SD_GRID)
    edges = np.concatenate([[grid[0] / 2], (grid[1:] + grid[:-1]) / 2, [grid[-1]]])
    fits = [fit_at(float(sd)) for sd in grid]
    log_weight = np.array([-np.inf if fit is None else fit[0] for fit in fits])
    log_weight += stats.halfnorm.logpdf(grid, scale=PRIOR_SCALE) + np.log(np.diff(edges))
    if not np.isfinite(log_weight).any():
        return None
    share = np.exp(log_weight - special.logsumexp(log_weight))
    kept = [j for j, fit in enumerate(fits) if fit is not None and share[j] >= _MIN_WEIGHT]
    draws = [fits[j][1](_DRAWS) for j in kept]
    log_share = np.log(share[kept])  # the kept points' shares, renormalised
    share_kept = np.exp(log_share - special.logsumexp(log_share))
    parts = tuple((float(w), part) for w, part in zip(share_kept, draws, strict=True))
    mixture = RateMixture(parts=parts, sds=tuple(float(grid[j]) for j in kept))
    return mixture if mixture.ess >= MIN_ESS else None

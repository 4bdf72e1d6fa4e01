r"""The prior of the pair's two level effects in the joint draws, with their SD integrated out instead of given.

Why
---
The pair's failure GLMM (:mod:`~freezestats.stats.failures.pooled_rates`, "Two levels") gives the depth's and the
reference's level effects an SD of 2.5 on the logit, since two levels cannot estimate it and an estimate near 0
pulled deep depths' rates to the reference's. Given at 2.5, though, the SD lets the depth's rate differ from the
reference's by a factor of :math:`e^{\pm 7}` (95%) however closely the pair's failures agree, and a pair that
shows no failure at a large size keeps that room in its failure part: the shallow depths' 95% intervals covered
the task's truth 0.975-0.988 at every size on the realistic simulator (800 studies,
``bench/results/coverage_task_level_joint800.txt``), and given at 1.0 instead the same intervals were up to 11%
shorter (``bench/results/pair_level_sd.txt``). A smaller given SD is no fix: it biased the deep depths.

What it does
------------
Only the difference :math:`d = u_k - u_0` of the two effects reaches the likelihood (their sum trades with the
flat intercept), and with :math:`u_k, u_0` independent :math:`N(0, \sigma^2)` the sum and the difference are
independent, each :math:`N(0, 2\sigma^2)`. The draws keep the sum's prior at the given SD (it cancels against the
intercept) and give the difference the scale mixture

.. math:: \pi(d) = \int_0^\infty N(d;\, 0,\, 2\sigma^2)\; \operatorname{HalfNormal}(\sigma;\, s)\, d\sigma,

a half-normal prior of scale :math:`s` (the given SD) on :math:`\sigma`, integrated on a log-spaced grid: the
same prior variance of :math:`d` as the SD given at :math:`s`, but near 0 where the pair's failures agree
(P(|d| < 1) = 0.43 against 0.22) and with tails heavier where they differ, so a depth that fails more often is
not pulled towards the reference. This is the horseshoe's reasoning (Carvalho, Polson & Scott 2010) with the
half-normal mixing of Gelman (2006); the Laplace fit, the point estimate and the importance sampler's proposal
stay at the given SD, and only the draws' weights change
(:func:`~freezestats.stats.failures.rate_posterior.sample_rate_posterior`); where the draws are averaged over the
level x size SD (:mod:`~freezestats.stats.failures.sd_integration`), each grid point's Laplace weight is
multiplied by the evidence ratio of this prior over the Gaussian one, which its draws estimate.

Measured
--------
On studies 0-239 of the realistic coverage bench (``bench/results/coverage_task_level_joint_levelprior_0_239.txt``,
study by study against the given SD: ``coverage_task_level_levelprior_paired.txt``), the shallow depths'
intervals are 5-10% shorter at 100-1000 examples, the deep depths' within -4%..+2%, 42 contrast-studies start
covering and 15 stop, and the familywise error at the margin is 4 of 240 (given SD: 3). The shallow cells still
over-cover (0.983-0.994 at 200-1000 examples on 360 studies, ``coverage_task_level_joint_levelprior_0_359.txt``;
against the given SD on those 360, 70 contrast-studies start covering and 27 stop, the deep cells at 100 examples
losing 9 and gaining none), so this stays an option (``task_two_part.PAIR_LEVEL_SD_PRIOR``), off: it moves the
shallow intervals without bringing them into the 93-97% band.

References
----------
Carvalho, C. M., Polson, N. G. & Scott, J. G. (2010). The horseshoe estimator for sparse signals. *Biometrika*
97(2), 465-480.
Gelman, A. (2006). Prior distributions for variance parameters in hierarchical models. *Bayesian Analysis* 1(3),
515-534.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special, stats

__all__ = ["LevelPrior"]

_GRID_POINTS = 48
_GRID_SPAN = (0.01, 5.0)  # the grid of sigma, in units of the prior's scale: below 0.01 s the normal is a spike


@dataclass(frozen=True)
class LevelPrior:
    """The log prior of the two level coordinates ``columns`` (reference's, depth's, in either order) of the
    coefficient vector: the sum at the given SD ``scale``, the difference a half-normal(``scale``) mixture."""

    columns: tuple[int, int]
    scale: float

    def log_density(self, draws: np.ndarray) -> np.ndarray:
        """The log prior density of the two columns at every draw (rows of ``draws``): normalised (the sum and
        the difference are a linear map of Jacobian 2), so that it compares with the Gaussian prior it replaces."""
        first, second = draws[:, self.columns[0]], draws[:, self.columns[1]]
        total, difference = first + second, second - first
        sds = self.scale * np.geomspace(*_GRID_SPAN, _GRID_POINTS)
        edges = np.sqrt(sds[1:] * sds[:-1])
        widths = np.diff(np.concatenate([[sds[0] / 2], edges, [sds[-1]]]))
        log_mix = np.log(stats.halfnorm.pdf(sds, scale=self.scale) * widths)
        log_mix -= special.logsumexp(log_mix)
        spread = np.sqrt(2.0) * sds
        log_d = special.logsumexp(log_mix + stats.norm.logpdf(difference[:, None], scale=spread), axis=1)
        return log_d + stats.norm.logpdf(total, scale=np.sqrt(2.0) * self.scale) + np.log(2.0)

r"""The pair's failures paired by seed: a run's chance to collapse shared by the depth and the reference of a seed.

Why
---
Real runs fail by seed. In the 20-seed SST-2 study at 50 examples, frozen -1 and frozen 2 disagreed with full
fine-tuning on 0 and 1 of 20 seeds where independent failures at the cells' own rates would disagree on 8.4 and
8.0 (``bench/results/failure_concordance.txt``): the seeds that escape the majority class do so at every shallow
depth. The pair's failure model (:mod:`~freezestats.stats.failures.pooled_rates`) takes each cell's runs as
independent binomial draws, so it leaves room for the two rates to differ that the pairs themselves rule out,
and on the realistic simulator with seed-shared collapses the shallow depths' intervals are 1.2-2.6 times as wide
as the estimate's spread needs (``bench/results/coverage_task_level_seed_shared.txt``).

The model
---------
A seed's runs at one size share a random intercept :math:`v \sim N(0, \sigma_s^2)` (``(1 | size:seed)`` in
glmer's terms) on top of the pair's model, so a seed *group* (the depth's and the reference's run with the same
seed at a size) has the likelihood

.. math:: L_g(\theta) = \int \prod_{j \in g} \operatorname{expit}(\eta_{c_j} + \sigma_s z)^{y_j}
          (1 - \operatorname{expit}(\eta_{c_j} + \sigma_s z))^{1 - y_j}\, \varphi(z)\, dz,

evaluated by the trapezoidal rule on a grid of :math:`z` (:data:`NODES_SPACING`), and a cell's failure rate for a
new seed is the marginal :math:`P_c = \int \operatorname{expit}(\eta_c + \sigma_s z)\varphi(z)\,dz`. Groups with the
same cells and outcomes have the same likelihood, so they enter once with their count (at most four patterns of a
pair at a size). Concordant pairs then say that the seed, not the depth, fails, and the depth's difference from the
reference rests on the discordant ones. With :math:`\sigma_s = 0` every group factorises and this is the
independent binomial likelihood exactly.

:math:`\sigma_s` is integrated out inside the likelihood, over a grid (:data:`SEED_SD_GRID`, the masses of a
half-normal prior of scale :data:`SEED_SD_SCALE`): :math:`L(\theta) = \sum_\sigma \pi_\sigma \prod_g L_g(\theta,
\sigma)`, so the draws are one importance sample as without pairing, and each draw carries its posterior over
:math:`\sigma_s`. Not estimated: where every pair fails together the likelihood rises without bound in
:math:`\sigma_s` (the pair's Laplace fit with ``(1 | size:seed)`` put it at 56 on the logit for 6 of 6 concordant
failures). Not a sample per grid point either: that took 99 s a simulated study of the coverage bench against 12 s
unpaired; summed inside the likelihood it takes 40 s (AMD EPYC, one process).

Where the seed alone decides
----------------------------
As :math:`\sigma_s` grows, a run fails given its seed exactly when the seed's :math:`z` passes its cell's threshold,
so a seed's runs fail in the order of their cells' rates: the seed draws :math:`u \sim U(0, 1)` and every run whose
cell's rate is above :math:`u` fails (the upper Frechet bound's copula). A group then has the probability
:math:`\max(0, \min_F P - \max_O P)` (failed cells :math:`F`, healthy ones :math:`O`), the large-SD quadrature's
limit (tested at an SD of 50), at no cost beyond the rates. Concordant pairs keep the whole rate difference in the
discordant ones' count: 0 discordant of 5 says :math:`|P_k - P_0| \lesssim 0.45` at that size, and every size's
pairs say it together through the level effect. :data:`SEEDS_DECIDE` adds that limit to the grid.

The coefficients keep their meaning across :math:`\sigma_s`: a run's logit given its seed is
:math:`\eta / \kappa(\sigma_s) + \sigma_s z` (so :math:`\eta_{c_j}` in :math:`L_g` above reads
:math:`\eta_{c_j} / \kappa(\sigma_s)`, and likewise in :math:`P_c`) with
:math:`\kappa(\sigma) = (1 + \pi\sigma^2/8)^{-1/2}`, from the logistic-normal approximation
:math:`E\,\operatorname{expit}(a + \sigma z) \approx \operatorname{expit}(\kappa a)`. So :math:`\eta` stays
(nearly) the marginal logit, the unpaired fit's proposal fits every grid point, and the Gaussian prior on the
effects means the same under each. The rates themselves are computed by the quadrature, not by the approximation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special, stats

__all__ = ["SEEDS_DECIDE", "SEED_SD_GRID", "SEED_SD_SCALE", "SeedGroups", "default_sds", "marginal_rates"]

Cell = tuple[int, int]  # (frozen_layers, train_size)
#: The seed integral's nodes: the trapezoidal rule on [-6.4, 6.4], spacing 1.6 / SD (at most 1). For an integrand
#: analytic near the real line with Gaussian tails it converges geometrically, at a rate set by how close expit's
#: poles come to the real line (pi / SD): with this spacing the marginal rate is within 1e-5 of adaptive
#: quadrature up to a seed SD of 4 on the logit (the grid's largest; 33 nodes there, 13 at an SD of 1) and a seed
#: group's log likelihood within 1e-4, where Gauss-Hermite with 21 nodes was 1e-3 off on the rate. The importance
#: weights need no more: their Monte Carlo error is far larger.
NODES_REACH, NODES_SPACING = 6.4, 1.6


def _nodes(sd: float) -> tuple[np.ndarray, np.ndarray]:
    """The nodes for a seed SD and their log weights (normalised: a seed SD of 0 is exactly expit)."""
    if sd <= 0.0:
        return np.zeros(1), np.zeros(1)
    step = min(NODES_SPACING / sd, 1.0)
    half = np.arange(0.0, NODES_REACH + 1e-9, step)
    nodes = np.concatenate([-half[:0:-1], half])
    log_weights = stats.norm.logpdf(nodes)
    return nodes, log_weights - special.logsumexp(log_weights)


#: the seed SDs (logit) the paired likelihood sums over; 0 is the unpaired model
SEED_SD_GRID: tuple[float, ...] = (0.0, 1.0, 2.0, 4.0)
#: the half-normal prior's scale on the seed SD: a seed may move a run's odds of failing by a factor of e^2
SEED_SD_SCALE = 2.0
#: Whether the grid reaches the limit where the seed alone decides (an infinite seed SD:
#: :meth:`SeedGroups._seeds_decide`), under a half-Cauchy prior of the same scale instead of the half-normal
#: (Gelman 2006's prior for a variance component; a half-normal's mass above an SD of 5 is 0.012, the
#: half-Cauchy's 0.24). Why: real shallow depths fail on the very seeds full fine-tuning fails on (0 of 20 seeds
#: apart, 14 both failed, in the 20-seed SST-2 study), which the grid's largest SD of 4 (a latent seed correlation
#: of 0.83) cannot say, so concordant pairs narrowed the rate difference less than they can.
SEEDS_DECIDE = False


def default_sds() -> tuple[float, ...]:
    """The seed SDs a :class:`SeedGroups` sums over unless told: :data:`SEED_SD_GRID`, and infinity where
    :data:`SEEDS_DECIDE`."""
    return (*SEED_SD_GRID, float("inf")) if SEEDS_DECIDE else SEED_SD_GRID


def marginal_rates(eta: np.ndarray, sd: float) -> np.ndarray:
    """:math:`E_z\\,\\operatorname{expit}(\\eta + sd\\,z)`, elementwise; ``expit(eta)`` where ``sd`` is 0."""
    if sd <= 0.0:
        return special.expit(eta)
    if np.isinf(sd):
        raise ValueError("the marginal rate at an infinite seed SD is expit of the marginal logit: use that")
    nodes, log_weights = _nodes(sd)
    return special.expit(np.asarray(eta, dtype=float)[..., None] + sd * nodes) @ np.exp(log_weights)


def conditional_scale(sd: float) -> float:
    """:math:`1 / \\kappa(sd)`: what the marginal logit is multiplied by to be the logit given the seed."""
    return float(np.sqrt(1.0 + np.pi * sd**2 / 8.0))


def _prior_masses(grid: np.ndarray) -> np.ndarray:
    """The prior's mass of the SD range each grid point stands for (to the midpoints; the last finite point's range
    as far above it as below, so a lone finite point stands for 0 to twice itself; and infinity, where the grid has
    it, every SD above that), normalised: half-normal, or half-Cauchy where the grid reaches infinity
    (:data:`SEEDS_DECIDE`)."""
    finite = grid[np.isfinite(grid)]
    mids = (finite[1:] + finite[:-1]) / 2
    below_last = mids[-1] if len(mids) else 0.0
    edges = np.concatenate([[0.0], mids, [2 * finite[-1] - below_last]])
    prior = stats.halfnorm
    if len(finite) < len(grid):
        edges, prior = np.append(edges, np.inf), stats.halfcauchy
    mass = np.diff(prior.cdf(edges, scale=SEED_SD_SCALE))
    return mass / mass.sum()


@dataclass(frozen=True)
class SeedGroups:
    """The pair's runs as seed groups: every distinct pattern of (cell, failed) runs sharing a seed at a size, with
    how many groups show it; the seed SDs summed over and their prior masses."""

    patterns: tuple[tuple[tuple[Cell, bool], ...], ...]
    counts: np.ndarray  # groups per pattern
    sds: np.ndarray
    log_prior: np.ndarray

    @classmethod
    def of(cls, cells: list[Cell], failed: np.ndarray, groups: np.ndarray,
           sds: tuple[float, ...] | None = None) -> SeedGroups:  # fmt: skip
        """From every run's cell, failure flag and seed group (runs of one group share a seed and a size); ``sds``
        the seed SDs to sum over (default :func:`default_sds`; one SD: that SD given; ``inf``: the seed decides)."""
        members: dict[object, list[tuple[Cell, bool]]] = {}
        for cell, flag, group in zip(cells, np.asarray(failed, dtype=bool).tolist(), groups.tolist(), strict=True):
            members.setdefault(group, []).append((cell, bool(flag)))
        tally: dict[tuple[tuple[Cell, bool], ...], int] = {}
        for runs in members.values():
            pattern = tuple(sorted(runs))
            tally[pattern] = tally.get(pattern, 0) + 1
        grid = np.array(default_sds() if sds is None else sds, dtype=float)
        log_prior = np.log(_prior_masses(grid)) if len(grid) > 1 else np.zeros(1)
        return cls(tuple(tally), np.array(list(tally.values()), dtype=float), grid, log_prior)

    def log_likelihood(self, eta: dict[Cell, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The log likelihood of every draw, summed over the seed SDs with their prior masses, given each cell's
        linear predictor over the draws (``eta[cell]``); and every draw's posterior over the SDs (draws x SDs)."""
        per_sd = np.column_stack([self._at(eta, sd) for sd in self.sds]) + self.log_prior
        total = special.logsumexp(per_sd, axis=1)
        return total, np.exp(per_sd - total[:, None])

    def _at(self, eta: dict[Cell, np.ndarray], sd: float) -> np.ndarray:
        """The log likelihood of every draw at one seed SD."""
        if np.isinf(sd):
            return self._seeds_decide(eta)
        nodes, log_weights = _nodes(sd)
        scale = conditional_scale(sd)
        log_fail, log_ok = {}, {}
        for cell, values in eta.items():  # once a cell: its log rates at every draw and node
            shifted = scale * values[:, None] + sd * nodes
            log_fail[cell] = -np.logaddexp(0.0, -shifted)
            log_ok[cell] = log_fail[cell] - shifted  # log(1 - p) = log p - logit p
        total = np.zeros(len(next(iter(eta.values()))))
        for pattern, count in zip(self.patterns, self.counts, strict=True):
            given_z = log_weights + sum(log_fail[cell] if failed else log_ok[cell] for cell, failed in pattern)
            top = given_z.max(axis=1)  # logsumexp over the nodes (scipy's costs twice this in checks)
            total += count * (top + np.log(np.exp(given_z - top[:, None]).sum(axis=1)))
        return total

    def _seeds_decide(self, eta: dict[Cell, np.ndarray]) -> np.ndarray:
        """The log likelihood of every draw where the seed alone decides (the limit of an infinite seed SD): a seed's
        draw :math:`u \\sim U(0, 1)` fails every run whose cell's rate is above it, so a group with failed cells
        :math:`F` and healthy ones :math:`O` has probability :math:`\\max(0, \\min_F P - \\max_O P)` (the upper
        Frechet bound's copula). A pair that fails the other way round (the depth with the lower rate fails alone)
        has probability 0 here, and the draw's weight rests on the finite SDs."""
        rate = {cell: special.expit(values) for cell, values in eta.items()}
        size = len(next(iter(eta.values())))
        total = np.zeros(size)
        for pattern, count in zip(self.patterns, self.counts, strict=True):
            low = np.zeros(size)
            high = np.ones(size)
            for cell, failed in pattern:
                if failed:
                    high = np.minimum(high, rate[cell])
                else:
                    low = np.maximum(low, rate[cell])
            with np.errstate(divide="ignore"):
                total += count * np.log(np.clip(high - low, 0.0, None))
        return total

    def rates(self, eta: np.ndarray, posterior: np.ndarray) -> np.ndarray:
        """A cell's failure rate for a new seed at every draw: the marginal at each seed SD, averaged over the
        draw's posterior over the SDs (``posterior``, draws x SDs, from :meth:`log_likelihood`)."""
        at_sd = [special.expit(eta) if np.isinf(sd) else marginal_rates(conditional_scale(sd) * eta, sd)
                 for sd in self.sds]  # fmt: skip
        return (np.column_stack(at_sd) * posterior).sum(axis=1)

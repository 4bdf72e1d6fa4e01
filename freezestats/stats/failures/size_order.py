r"""The joint draws' failure rates projected, draw by draw, onto rates that do not rise with the train size.

Why
---
A run collapses to the majority class less often the more examples it trains on: in the blog study, in every
worked example, and by construction in the realistic simulator. The pair's failure GLMM
(:mod:`~freezestats.stats.failures.pooled_rates`) does not know it: a size is a random intercept, exchangeable
with the others. So at 200, 500 and 1000 examples, where a shallow pair's 10 runs show no failure, each size's
rate keeps an upper tail of its own (0 of 10 runs bounds a rate only below ~26%), the failure part's draws are as
wide at 1000 examples as at 200, and the shallow depths' 95% intervals covered the task's truth 0.983-0.996 at
200-1000 examples (``bench/results/coverage_task_level_joint_levelprior_0_239.txt``). No prior on the level or
cell effects removed that tail (README, "Coverage of the task-level answer").

What it does
------------
Each draw's rates of a depth, in the order of its sizes, are replaced by their weighted least-squares projection
onto non-increasing sequences (isotonic regression, weights the cells' runs): the *projection posterior* of Lin &
Dunson (2014), whose credible intervals Chakraborty & Ghosal (2021) study. The draws' weights and the point
estimate are left as they are. A draw in which a larger size fails more often than a smaller one gets both rates
pooled; a draw already in order is unchanged.

Measured
--------
With the level SD integrated out, on studies 0-239 of the realistic coverage bench
(``bench/results/coverage_task_level_joint_sizeorder_0_239.txt``; study by study against the level prior alone,
``coverage_task_level_sizeorder_paired.txt``): intervals 15-37% shorter at 500-1000 examples (frozen 6 at 1000:
12%), 3-18% at 200, the shallow ones 2-3% longer at 100; the shallow depths at 1000 examples from
0.992-0.996 to 0.979-0.983, at 200-500 still 0.983-0.992; the deep ones at 100 lower ((100, 5) 0.933 -> 0.908);
60 contrast-studies lost and 17 gained; familywise error 3 of 240. On 320 studies
(``coverage_task_level_joint_sizeorder_0_319.txt``) the deep cells at 100 examples read 0.900-0.919 and miss only on
their lower side (8-10%), and against the default (``coverage_task_level_sizeorder_default_paired.txt``) depths 4-6
at 100 examples lose 27 contrast-studies and gain none. So it stays an option (``task_two_part.PAIR_SIZE_ORDER``),
off: the order moves the deep depths' interval up where their rates rise above the next size's.

Why not the posterior restricted to ordered rates
-------------------------------------------------
The principled prior (the Gaussian one truncated to ordered linear predictors, as Dunson & Neelon 2003 do for
ordered binomial probabilities) was tried first with the importance sampler of
:mod:`~freezestats.stats.failures.rate_posterior`, with three more moves of the proposal on 20,000 draws each
under the restriction: where a depth's runs fail at a larger size and not at a smaller one (one failure at 200,
500 or 1000 examples and none at 100), the restricted posterior lies far from the Laplace proposal, and in 3 of
the first 8 shallow pairs of the realistic simulator the effective sample size stayed below
:data:`~freezestats.stats.failures.rate_posterior.MIN_ESS` (1-80 per grid point), so the analysis would fall back
to the wider Wilson-MOVER sides exactly where the order should narrow them. The projection needs no new sampler.

References
----------
Barlow, R. E., Bartholomew, D. J., Bremner, J. M. & Brunk, H. D. (1972). *Statistical inference under order
restrictions*. Wiley.
Chakraborty, M. & Ghosal, S. (2021). Coverage of credible intervals in nonparametric monotone regression.
*Annals of Statistics* 49(2), 1011-1028.
Dunson, D. B. & Neelon, B. (2003). Bayesian inference on order-constrained parameters in generalized linear
models. *Biometrics* 59(2), 286-295.
Lin, L. & Dunson, D. B. (2014). Bayesian monotone regression using Gaussian process projection. *Biometrika*
101(2), 303-317.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

__all__ = ["SizeOrder", "non_increasing"]

Cell = tuple[int, int]  # (frozen_layers, train_size)


@dataclass(frozen=True)
class SizeOrder:
    """Which cells' rates are projected together: per level, its cells by increasing size and their runs."""

    groups: tuple[tuple[tuple[Cell, ...], tuple[float, ...]], ...]

    @classmethod
    def of(cls, counts: Mapping[Cell, tuple[int, int]]) -> SizeOrder:
        """One group per level of the cells in ``counts`` (``cell -> (failed, runs)``)."""
        groups = []
        for level in sorted({level for level, _ in counts}):
            cells = tuple(sorted((cell for cell in counts if cell[0] == level), key=lambda cell: cell[1]))
            groups.append((cells, tuple(float(counts[cell][1]) for cell in cells)))
        return cls(groups=tuple(groups))

    def project(self, rates: Mapping[Cell, np.ndarray]) -> dict[Cell, np.ndarray]:
        """Every group's rates (each an array over draws) projected onto non-increasing sequences in size."""
        projected = {}
        for cells, runs in self.groups:
            fitted = non_increasing(np.column_stack([rates[cell] for cell in cells]), np.array(runs))
            projected.update({cell: fitted[:, j] for j, cell in enumerate(cells)})
        return projected


def non_increasing(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    r"""The weighted least-squares non-increasing fit of every row of ``values`` (draws x positions).

    By the min-max formula of isotonic regression (Barlow et al. 1972, chapter 1; here for the antitonic case),
    :math:`f_i = \min_{j \le i} \max_{l \ge i} \bar y_{j..l}`, the weighted mean of positions :math:`j..l`:
    vectorised over draws, where scikit-learn's and scipy's isotonic regressions take one sequence a call (10,000
    draws of every pair would be 10,000 calls). The positions are few (the sizes), so :math:`O(k^3)` is cheap.

    >>> non_increasing(np.array([[0.1, 0.3, 0.0]]), np.ones(3)).round(3).tolist()
    [[0.2, 0.2, 0.0]]
    """
    k = values.shape[1]
    sums = np.concatenate([np.zeros((len(values), 1)), np.cumsum(values * weights, axis=1)], axis=1)
    totals = np.concatenate([[0.0], np.cumsum(weights)])
    fitted = np.empty_like(values, dtype=float)
    for i in range(k):
        lowest = np.full(len(values), np.inf)
        for j in range(i + 1):
            means = [(sums[:, last + 1] - sums[:, j]) / (totals[last + 1] - totals[j]) for last in range(i, k)]
            lowest = np.minimum(lowest, np.max(means, axis=0))
        fitted[:, i] = lowest
    return fitted

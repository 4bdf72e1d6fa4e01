r"""Graphical multiple testing (Bretz, Maurer, Brannath & Posch 2009), and the depth-sequence graph the answer uses.

The answer tests every (train size, depth) against the reference, one-sided at the margin, and claims a depth
non-inferior only under familywise error control over the whole task (every size). A fixed sequence per size is
powerful but one noisy shallow depth then silences every deeper one; Holm over all hypotheses ignores that
deeper freezes are expected to cost more. A graphical procedure has both: each hypothesis holds a share of
:math:`\alpha` (so none is silenced) and a rejected one passes its share along the depth order (so the order
still buys power). :func:`graphical_test` is Algorithm 1 of Bretz et al. (sequential rejection, with the final
local levels) and Algorithm 2's adjusted p values; :func:`depth_sequence_graph` builds the graph.

No maintained Python package implements it (R has gMCP / graphicalMCP). The tests check it against the two
procedures it generalises: with equal weights and a complete graph it is Holm
(:func:`freezestats.stats.inference.multitest.holm`), with all weight on the first of a chain it is the fixed
sequence (:func:`freezestats.stats.inference.sequence.fixed_sequence`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from freezestats.exceptions import ModelFitError

__all__ = ["GraphicalResult", "depth_sequence_graph", "graphical_test"]


@dataclass(frozen=True)
class GraphicalResult:
    """What the procedure decided: per hypothesis, rejected or not, its adjusted p value and its local level.

    ``local_alpha`` is the level the hypothesis was finally tested at: the weight it held when it was rejected,
    or when the procedure stopped. A one-sided bound at that level lies beyond the margin exactly when the
    hypothesis is rejected, so the bounds a table prints agree with its decisions.
    """

    rejected: np.ndarray
    p_adjusted: np.ndarray
    local_alpha: np.ndarray


def graphical_test(p: np.ndarray, weights: np.ndarray, transitions: np.ndarray, alpha: float) -> GraphicalResult:
    """Run the graphical procedure on one-sided p values ``p`` (NaN: never rejected, holds its weight).

    ``weights`` (sum <= 1) share ``alpha`` among the hypotheses; ``transitions[i, j]`` is the fraction of
    hypothesis i's level passed to j when i is rejected (rows sum <= 1, zero diagonal).
    """
    p = np.asarray(p, dtype=float)
    w = np.asarray(weights, dtype=float).copy()
    g = np.asarray(transitions, dtype=float).copy()
    _check(p, w, g, alpha)
    local = _sequential_rejection(p, w.copy(), g.copy(), alpha)
    rejected = np.isfinite(p) & (p <= local) & (local > 0)
    return GraphicalResult(rejected=rejected, p_adjusted=_adjusted_p(p, w, g), local_alpha=local)


def depth_sequence_graph(sizes: np.ndarray, ranks: np.ndarray, first_share: float = 0.5) -> tuple[np.ndarray, ...]:
    r"""Weights and transitions for the answer's family: every train size of a task, its depths shallow to deep.

    * Each size holds :math:`1/n_{sizes}` of :math:`\alpha`.
    * Within a size, the shallowest depth holds ``first_share`` of it and the deeper ones share the rest
      equally (the *fallback* weights of Wiens 2003): a depth whose shallower neighbour is noisy is still tested.
    * A rejected depth passes all it holds to the next deeper depth of its size; the deepest passes its level
      to the shallowest depth of every other size in equal parts (with one size: back to its shallowest depth).

    Rows are hypotheses in the order given; ``ranks`` order the depths within a size (shallow first).
    """
    sizes = np.asarray(sizes)
    ranks = np.asarray(ranks)
    n = len(sizes)
    weights = np.zeros(n)
    transitions = np.zeros((n, n))
    levels = list(dict.fromkeys(sizes.tolist()))
    chains = {s: np.flatnonzero(sizes == s)[np.argsort(ranks[sizes == s], kind="stable")] for s in levels}
    for size, chain in chains.items():
        k = len(chain)
        share = np.full(k, 1.0) if k == 1 else np.r_[first_share, np.full(k - 1, (1 - first_share) / (k - 1))]
        weights[chain] = share / len(levels)
        for a, b in itertools.pairwise(chain):
            transitions[a, b] = 1.0
        others = [chains[s][0] for s in levels if s != size]
        if others:
            transitions[chain[-1], others] = 1.0 / len(others)
        elif k > 1:
            transitions[chain[-1], chain[0]] = 1.0
    return weights, transitions


def _sequential_rejection(p: np.ndarray, w: np.ndarray, g: np.ndarray, alpha: float) -> np.ndarray:
    """Algorithm 1: reject while some open hypothesis has ``p <= w * alpha``; each one's final local level."""
    open_ = np.ones(len(p), dtype=bool)
    local = np.zeros(len(p))
    while True:
        candidates = np.flatnonzero(open_ & np.isfinite(p) & (w > 0) & (p <= w * alpha))
        if candidates.size == 0:
            local[open_] = w[open_] * alpha
            return local
        j = candidates[np.argmin(p[candidates] / w[candidates])]
        local[j] = w[j] * alpha
        open_[j] = False
        w, g = _remove(j, w, g, open_)


def _adjusted_p(p: np.ndarray, w: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Algorithm 2: the smallest alpha at which each hypothesis would be rejected (NaN p stays NaN)."""
    adjusted = np.full(p.shape, np.nan)
    open_ = np.isfinite(p)
    running = 0.0
    while open_.any():
        index = np.flatnonzero(open_)
        with np.errstate(divide="ignore"):
            ratio = np.where(w[index] > 0, p[index] / np.where(w[index] > 0, w[index], 1.0), np.inf)
        j = index[np.argmin(ratio)]
        running = max(running, float(np.min(ratio)))
        adjusted[j] = min(1.0, running)
        open_[j] = False
        w, g = _remove(j, w, g, open_)
    return adjusted


def _remove(j: int, w: np.ndarray, g: np.ndarray, open_: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bretz et al.'s update when hypothesis j leaves the graph: its weight and its edges pass on."""
    w = np.where(open_, w + w[j] * g[j], 0.0)
    denominator = 1.0 - g[:, j] * g[j, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        new = np.where(denominator[:, None] > 0, (g + np.outer(g[:, j], g[j, :])) / denominator[:, None], 0.0)
    np.fill_diagonal(new, 0.0)
    new[~open_, :] = 0.0
    new[:, ~open_] = 0.0
    return w, new


def _check(p: np.ndarray, w: np.ndarray, g: np.ndarray, alpha: float) -> None:
    n = len(p)
    if p.ndim != 1 or w.shape != (n,) or g.shape != (n, n):
        raise ModelFitError(f"graphical_test: need p ({n},), weights ({n},) and transitions ({n}, {n}).")
    if not 0 < alpha < 1 or (w < 0).any() or w.sum() > 1 + 1e-9:
        raise ModelFitError(f"graphical_test: need 0 < alpha < 1 and weights >= 0 summing to <= 1 (sum {w.sum():g}).")
    if (g < 0).any() or (g.sum(axis=1) > 1 + 1e-9).any() or np.any(np.diag(g) != 0):
        raise ModelFitError("graphical_test: transitions must be >= 0, rows summing to <= 1, with a zero diagonal.")

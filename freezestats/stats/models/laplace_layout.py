"""The input side of :func:`freezestats.stats.models.laplace.fit_binomial_laplace`: random terms, their layout,
validation.

:class:`RandomTerm` describes one random intercept; :func:`_layout` checks the terms and decides where every
observation's random effects sit in the stacked vector (the term with the most levels first, so that the Laplace
system can eliminate its diagonal block), and :func:`_validate` checks the counts and the design matrix. This is
bookkeeping with its own invariants and error messages, apart from the numerics of
:mod:`freezestats.stats.models.laplace_problem` and the optimiser of :mod:`freezestats.stats.models.laplace`, which
re-exports :class:`RandomTerm`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from freezestats.exceptions import ModelFitError

__all__ = ["RandomTerm"]


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

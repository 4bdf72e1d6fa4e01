"""Nested, stratified training subsets and a fixed split of the validation set.

The study asks how the best number of frozen layers changes with training-set size. Two design
choices keep that comparison clean:

* **Nesting.** For one draw seed, the subsets of size 50, 100, 200, ... are prefixes of a single
  ordering of the pool, so the 100-example subset contains the 50-example one. Differences between
  sizes are then due to the *added* examples, not to an unrelated resample, and a learning curve
  cannot be non-monotone merely because two sizes saw unrelated data. Independent draws of the
  ordering (different ``draw_seed``) supply the between-subset variance.
* **Stratification of every prefix.** Small subsets drawn uniformly can miss a class almost
  entirely (a 50-example draw from CoLA's 70/30 pool has a standard deviation of about 3 examples
  per class); stratifying removes this nuisance variance. Because *every* prefix of the order is
  stratified, each nested subset is stratified too. Regression labels (STS-B) are stratified on
  quantile bins.

The validation set is split once into a "select" half (used to choose a checkpoint) and a "score"
half (used to report it); see :func:`freezestats.tasks.metrics.summarize_curve`.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from freezestats.exceptions import DataError, SpecError

__all__ = [
    "nested_order",
    "nested_subsets",
    "stratification_labels",
    "validation_halves",
]


def _labels_1d(labels: Sequence | np.ndarray, name: str = "labels") -> np.ndarray:
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise DataError(f"{name} must be a 1-D array, but got shape {arr.shape}.")
    if arr.shape[0] == 0:
        raise DataError(f"{name} must contain at least one example, but it is empty.")
    return arr


def stratification_labels(labels: Sequence | np.ndarray, regression: bool, n_bins: int = 5) -> np.ndarray:
    """Integer stratum of every example.

    Parameters
    ----------
    labels
        1-D labels of the pool: class ids for classification, real values for regression.
    regression
        If true, labels are binned into (at most) ``n_bins`` quantile bins, so that a continuous
        target such as STS-B's 0--5 similarity can be stratified like a class label.
    n_bins
        Number of quantile bins for regression (ignored for classification). Bin edges are the
        interior ``k / n_bins`` quantiles; when ties make edges coincide (STS-B scores are
        multiples of 0.2, and many pairs share a score) the duplicate edges are merged, so fewer
        bins result and every tied value lands in the same bin -- a stratum must be a function of
        the label.

    Returns
    -------
    np.ndarray
        ``int64`` array of the same length. Classification: the class ids as they are (non-integer
        class labels such as strings are replaced by their rank among the sorted distinct labels).
        Regression: bin ids ``0, 1, ...`` consecutive and ordered by label value.

    Raises
    ------
    DataError
        Empty/non-1-D labels, ``nan`` regression labels, or fractional labels for a classification
        task (almost always a regression task passed with ``regression=False``).
    SpecError
        ``n_bins < 1``.
    """
    arr = _labels_1d(labels)
    if not regression:
        if np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_:
            return arr.astype(np.int64)
        if np.issubdtype(arr.dtype, np.floating):
            if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
                bad = arr[~(np.isfinite(arr) & (arr == np.round(arr)))][0]
                raise DataError(
                    "classification labels must be integer class ids, but got the value "
                    f"{bad!r}; pass regression=True for a real-valued target."
                )
            return arr.astype(np.int64)
        _, codes = np.unique(arr, return_inverse=True)
        return codes.reshape(-1).astype(np.int64)

    n_bins = operator.index(n_bins)
    if n_bins < 1:
        raise SpecError(f"n_bins must be >= 1, but got n_bins={n_bins}.")
    values = arr.astype(np.float64)
    if np.isnan(values).any():
        raise DataError(f"regression labels must not be nan, but {int(np.isnan(values).sum())} of {values.size} are.")
    edges = np.unique(np.quantile(values, np.linspace(0.0, 1.0, n_bins + 1)[1:-1]))
    # side="right": a value equal to an edge goes to the bin above it, so bin b is
    # [edges[b-1], edges[b]); ties therefore never straddle two bins.
    bins = np.searchsorted(edges, values, side="right")
    # An edge equal to the minimum leaves bin 0 empty; renumber to consecutive ids.
    _, codes = np.unique(bins, return_inverse=True)
    return codes.reshape(-1).astype(np.int64)


def _greedy_stratum_sequence(counts: Sequence[int], length: int) -> list[int]:
    """Positions (into ``counts``) of the strata chosen at steps ``0 .. length-1``.

    At step ``t`` the stratum with the largest deficit ``(t+1) * p_s - count_s`` is chosen, ties to
    the smallest position. Deficits are compared multiplied by the pool size ``N`` --
    ``(t+1) * n_s - count_s * N`` -- so the arithmetic is exact integer arithmetic and the order
    cannot depend on floating-point rounding. An exhausted stratum is never chosen: its deficit is
    ``<= 0`` while the deficits always sum to ``1 > 0``.
    """
    n = [int(c) for c in counts]
    total = sum(n)
    taken = [0] * len(n)
    order: list[int] = []
    strata = range(len(n))
    for t in range(length):
        best = 0
        best_deficit = (t + 1) * n[0] - taken[0] * total
        for s in strata[1:]:
            deficit = (t + 1) * n[s] - taken[s] * total
            if deficit > best_deficit:
                best, best_deficit = s, deficit
        taken[best] += 1
        order.append(best)
    return order


def _nested_order(strata: np.ndarray, draw_seed: int, length: int) -> np.ndarray:
    """The first ``length`` entries of :func:`nested_order` (the greedy is prefix-consistent)."""
    ids, codes = np.unique(strata, return_inverse=True)
    codes = codes.reshape(-1)
    rng = np.random.default_rng(draw_seed)
    # Shuffle the strata in ascending stratum-id order, one rng.permutation call each; changing
    # this order would change every subset of every published seed.
    members = [rng.permutation(np.flatnonzero(codes == k)) for k in range(ids.size)]
    counts = [m.size for m in members]
    sequence = np.asarray(_greedy_stratum_sequence(counts, length), dtype=np.int64)
    out = np.empty(length, dtype=np.int64)
    for k, m in enumerate(members):
        where = np.flatnonzero(sequence == k)
        out[where] = m[: where.size]
    return out


def nested_order(strata: np.ndarray, draw_seed: int) -> np.ndarray:
    """A permutation of the pool whose every prefix is stratified.

    Recipe (fixed, because published subsets must be reproducible from ``draw_seed`` alone):

    1. ``rng = np.random.default_rng(draw_seed)``; for each stratum in ascending stratum-id order,
       ``rng.permutation`` of that stratum's pool indices (themselves in ascending order).
    2. Interleave greedily: at step ``t`` take the next example of the stratum with the largest
       deficit ``(t+1) * p_s - count_s`` (``p_s`` its share of the pool, ``count_s`` how many of it
       were taken in steps ``< t``); ties go to the smallest stratum id.

    Guarantee: a prefix of length ``t`` never holds ``t * p_s + 1`` or more examples of a stratum
    (a chosen stratum had a positive deficit, so it ends the step less than 1 ahead). The shortfall
    side is also below 1 -- i.e. every stratum count lies strictly within 1 of ``t * p_s`` -- for
    up to four strata (checked exhaustively on small pools) and for the near-equal strata that
    :func:`stratification_labels` produces; with five or more strata of very unequal sizes the
    greedy can fall slightly more than 1 behind on a stratum (up to about 1.25 observed with eight
    strata). Tijdeman's (1980) "chairman assignment" algorithm bounds the deviation by
    ``1 - 1/(2k-2)`` for any ``k`` strata, should many unequal strata ever be needed.

    Parameters
    ----------
    strata
        1-D stratum ids of the pool (see :func:`stratification_labels`); any sortable values.
    draw_seed
        Seed of the draw. The result is a deterministic function of ``(strata, draw_seed)``;
        different seeds give (with overwhelming probability) different orders.

    Returns
    -------
    np.ndarray
        ``int64`` permutation of ``range(len(strata))``.
    """
    arr = _labels_1d(strata, "strata")
    return _nested_order(arr, draw_seed, arr.shape[0])


def _check_sizes(sizes: Sequence[int], pool: int) -> list[int]:
    if isinstance(sizes, (int, np.integer)):
        raise SpecError(f"sizes must be a sequence of subset sizes, but got the single value {sizes!r}.")
    checked: list[int] = []
    for i, size in enumerate(sizes):
        if isinstance(size, (bool, np.bool_)):
            raise SpecError(f"subset sizes must be integers, but got sizes[{i}]={size!r}.")
        try:
            value = operator.index(size)
        except TypeError:
            raise SpecError(f"subset sizes must be integers, but got sizes[{i}]={size!r}.") from None
        if not 0 < value <= pool:
            raise SpecError(
                f"subset sizes must satisfy 0 < size <= pool size, but got sizes[{i}]={value} with pool size {pool}."
            )
        checked.append(value)
    return checked


def nested_subsets(
    labels: Sequence | np.ndarray,
    sizes: Sequence[int],
    draw_seed: int,
    regression: bool = False,
) -> dict[int, np.ndarray]:
    """Stratified training subsets of several sizes, each contained in the next larger one.

    Parameters
    ----------
    labels
        Labels of the whole training pool.
    sizes
        Subset sizes, each in ``1 .. len(labels)``; order and repeats do not matter. A size below
        the number of strata is allowed (it then cannot contain every class; which ones it contains
        is still deterministic: the largest strata first).
    draw_seed
        Seed of the draw, see :func:`nested_order`.
    regression
        Stratify on quantile bins of real-valued labels (see :func:`stratification_labels`).

    Returns
    -------
    dict[int, np.ndarray]
        ``size -> pool indices`` (sorted ascending, ``int64``, no duplicates): the first ``size``
        entries of the nested order, so ``subsets[50]`` is a subset of ``subsets[100]`` by
        construction.

    Raises
    ------
    SpecError
        A size that is not an integer, or not in ``1 .. len(labels)``.
    DataError
        Bad labels (see :func:`stratification_labels`).
    """
    strata = stratification_labels(labels, regression=regression)
    checked = _check_sizes(sizes, strata.shape[0])
    if not checked:
        return {}
    # Only the longest prefix is needed; the greedy interleaving is prefix-consistent, so this equals
    # nested_order(strata, draw_seed)[:max(sizes)] without walking the whole (possibly 400k) pool.
    order = _nested_order(strata, draw_seed, max(checked))
    return {size: np.sort(order[:size]).astype(np.int64) for size in checked}


def validation_halves(
    labels: Sequence | np.ndarray, regression: bool = False, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Fixed stratified split of the validation set into a "select" and a "score" half.

    Choosing the best checkpoint on the validation set and reporting its score on the same set
    overstates performance. Splitting once (the same split for every run of a task, so runs stay
    comparable) lets :func:`freezestats.tasks.metrics.summarize_curve` select on one half and report on
    the other.

    The "select" half is the first ``ceil(n / 2)`` entries of :func:`nested_order` with ``seed``
    and the "score" half the rest; both are stratified (the complement of a stratified prefix is
    stratified) and their sizes differ by at most one.

    Parameters
    ----------
    labels
        Validation labels.
    regression
        Stratify on quantile bins of real-valued labels.
    seed
        Seed of the split; keep the default unless studying the split itself.

    Returns
    -------
    tuple[np.ndarray, np.ndarray]
        ``(select, score)``: sorted ``int64`` index arrays, disjoint, together ``range(n)``.

    Raises
    ------
    DataError
        Fewer than 2 validation examples (one half would be empty), or bad labels.
    """
    strata = stratification_labels(labels, regression=regression)
    n = strata.shape[0]
    if n < 2:
        raise DataError(f"the validation set must have at least 2 examples to be split in halves, but has {n}.")
    order = _nested_order(strata, seed, n)
    half = (n + 1) // 2
    return np.sort(order[:half]).astype(np.int64), np.sort(order[half:]).astype(np.int64)

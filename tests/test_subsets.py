"""Tests of freezestats.tasks.subsets: nesting, stratification of every prefix, determinism, errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from freezestats.exceptions import DataError, SpecError
from freezestats.tasks.subsets import (
    nested_order,
    nested_subsets,
    stratification_labels,
    validation_halves,
)

SIZES = [50, 100, 200, 500, 1000]


def _pool(proportions: list[float], n: int, seed: int = 0) -> np.ndarray:
    """Shuffled labels with exactly round(n * p) examples of each class."""
    counts = [round(n * p) for p in proportions]
    labels = np.repeat(np.arange(len(counts)), counts)
    return np.random.default_rng(seed).permutation(labels)


BINARY_POOL = _pool([0.7, 0.3], 5000)
THREE_CLASS_POOL = _pool([0.5, 0.3, 0.2], 5000, seed=1)


def _max_prefix_deviation(strata: np.ndarray, order: np.ndarray) -> float:
    """max over prefixes t and strata s of |count_s(prefix t) - t * p_s|."""
    ids, codes = np.unique(strata, return_inverse=True)
    codes = codes.reshape(-1)
    p = np.bincount(codes) / codes.size
    onehot = np.zeros((order.size, ids.size))
    onehot[np.arange(order.size), codes[order]] = 1
    t = np.arange(1, order.size + 1)[:, None]
    return float(np.abs(onehot.cumsum(axis=0) - t * p).max())


# --------------------------------------------------------------------------------------------------
# nested_subsets
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("labels", [BINARY_POOL, THREE_CLASS_POOL], ids=["70/30", "3-class"])
@pytest.mark.parametrize("seed", [0, 1, 7])
def test_subsets_are_nested_sorted_unique(labels: np.ndarray, seed: int) -> None:
    subsets = nested_subsets(labels, SIZES, draw_seed=seed)
    assert list(subsets) == SIZES
    for size, idx in subsets.items():
        assert idx.dtype == np.int64
        assert idx.size == size
        assert np.all(np.diff(idx) > 0)  # sorted ascending, hence no duplicates
        assert idx.min() >= 0 and idx.max() < labels.size
    for small, large in itertools.pairwise(SIZES):
        assert np.isin(subsets[small], subsets[large]).all()


@pytest.mark.parametrize("labels", [BINARY_POOL, THREE_CLASS_POOL], ids=["70/30", "3-class"])
@pytest.mark.parametrize("seed", [0, 3])
def test_subsets_are_stratified(labels: np.ndarray, seed: int) -> None:
    p = np.bincount(labels) / labels.size
    for size, idx in nested_subsets(labels, SIZES, draw_seed=seed).items():
        counts = np.bincount(labels[idx], minlength=p.size)
        assert np.all(np.abs(counts - size * p) <= 1), (size, counts, size * p)


@pytest.mark.parametrize("labels", [BINARY_POOL, THREE_CLASS_POOL], ids=["70/30", "3-class"])
def test_every_prefix_of_the_order_is_stratified(labels: np.ndarray) -> None:
    order = nested_order(labels, draw_seed=11)
    assert np.array_equal(np.sort(order), np.arange(labels.size))
    assert _max_prefix_deviation(labels, order) < 1


def test_prefix_stratification_exhaustive_small_pools() -> None:
    # All pools with 2-4 strata of sizes 1..8 (pool orders differ only by the greedy interleaving).
    for k in (2, 3, 4):
        for counts in itertools.product(range(1, 9), repeat=k):
            strata = np.repeat(np.arange(k), counts)
            assert _max_prefix_deviation(strata, nested_order(strata, 0)) < 1, counts


def test_prefix_of_nested_order_equals_subsets() -> None:
    order = nested_order(THREE_CLASS_POOL, draw_seed=5)
    subsets = nested_subsets(THREE_CLASS_POOL, [1, 2, 3, 77, 5000], draw_seed=5)
    for size, idx in subsets.items():
        assert np.array_equal(idx, np.sort(order[:size]))
    assert np.array_equal(subsets[5000], np.arange(5000))


def test_determinism_and_seed_dependence() -> None:
    a = nested_subsets(BINARY_POOL, SIZES, draw_seed=42)
    b = nested_subsets(BINARY_POOL, SIZES, draw_seed=42)
    c = nested_subsets(BINARY_POOL, SIZES, draw_seed=43)
    for size in SIZES:
        assert np.array_equal(a[size], b[size])
        assert not np.array_equal(a[size], c[size])
    assert np.array_equal(nested_order(THREE_CLASS_POOL, 9), nested_order(THREE_CLASS_POOL, 9))
    assert not np.array_equal(nested_order(THREE_CLASS_POOL, 9), nested_order(THREE_CLASS_POOL, 10))


def test_order_of_sizes_does_not_matter() -> None:
    a = nested_subsets(BINARY_POOL, [1000, 50, 200], draw_seed=3)
    b = nested_subsets(BINARY_POOL, [50, 200, 1000], draw_seed=3)
    assert all(np.array_equal(a[s], b[s]) for s in (50, 200, 1000))


def test_order_is_pinned() -> None:
    # Guards the documented recipe: changing it silently changes every published subset.
    strata = np.array([0, 1, 0, 0, 1, 0, 1, 0, 0, 0])
    rng = np.random.default_rng(123)
    zeros = rng.permutation(np.flatnonzero(strata == 0))
    ones = rng.permutation(np.flatnonzero(strata == 1))
    # Deficits times N=10 are (t+1)*n_s - 10*count_s with n = (7, 3); by hand the stratum sequence is
    # 0 1 0 0 0 1 0 0 1 0 (at t=4 both deficits are 5 and the tie goes to stratum 0).
    expected = [zeros[0], ones[0], zeros[1], zeros[2], zeros[3], ones[1], zeros[4], zeros[5], ones[2], zeros[6]]
    assert nested_order(strata, 123).tolist() == [int(i) for i in expected]


def test_size_smaller_than_number_of_strata() -> None:
    labels = _pool([0.2, 0.5, 0.3], 100)
    a = nested_subsets(labels, [1, 2], draw_seed=0)
    b = nested_subsets(labels, [1, 2], draw_seed=0)
    assert np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2])
    # The largest stratum comes first, then the next largest.
    assert labels[a[1]].tolist() == [1]
    assert sorted(labels[a[2]].tolist()) == [1, 2]


@pytest.mark.parametrize("bad", [0, -5, 5001])
def test_bad_sizes_raise_spec_error(bad: int) -> None:
    with pytest.raises(SpecError, match=rf"sizes\[1\]={bad} with pool size 5000"):
        nested_subsets(BINARY_POOL, [50, bad], draw_seed=0)


def test_non_integer_sizes_raise_spec_error() -> None:
    with pytest.raises(SpecError, match="integers"):
        nested_subsets(BINARY_POOL, [50.5], draw_seed=0)
    with pytest.raises(SpecError, match="sequence"):
        nested_subsets(BINARY_POOL, 50, draw_seed=0)  # type: ignore[arg-type]
    assert nested_subsets(BINARY_POOL, [], draw_seed=0) == {}
    assert nested_subsets(BINARY_POOL, [np.int64(10)], draw_seed=0)[10].size == 10


def test_empty_pool_raises_data_error() -> None:
    with pytest.raises(DataError, match="empty"):
        nested_subsets([], [1], draw_seed=0)


# --------------------------------------------------------------------------------------------------
# Regression stratification
# --------------------------------------------------------------------------------------------------


def test_regression_bins_are_balanced_for_continuous_labels() -> None:
    rng = np.random.default_rng(0)
    for n in (1000, 1003, 5749):
        values = rng.gamma(2.0, 1.0, size=n)  # skewed, so equal-width bins would be unbalanced
        strata = stratification_labels(values, regression=True, n_bins=5)
        counts = np.bincount(strata)
        assert counts.size == 5
        assert np.all(np.abs(counts - n / 5) <= 2), counts
        # Bins are ordered by value: every value of bin b is below every value of bin b+1.
        for b in range(4):
            assert values[strata == b].max() < values[strata == b + 1].min()


def test_regression_bins_keep_ties_together() -> None:
    rng = np.random.default_rng(1)
    values = np.round(rng.uniform(0, 5, size=3000) * 5) / 5  # STS-B-like: multiples of 0.2
    values[:900] = 3.0  # a heavy tie
    strata = stratification_labels(values, regression=True)
    for v in np.unique(values):
        assert np.unique(strata[values == v]).size == 1
    assert np.array_equal(np.unique(strata), np.arange(strata.max() + 1))  # consecutive ids
    assert stratification_labels(np.full(10, 2.0), regression=True).tolist() == [0] * 10


def test_regression_subsets_are_stratified_and_nested() -> None:
    rng = np.random.default_rng(2)
    values = rng.uniform(0, 5, size=5000)
    strata = stratification_labels(values, regression=True)
    p = np.bincount(strata) / strata.size
    subsets = nested_subsets(values, SIZES, draw_seed=4, regression=True)
    for small, large in itertools.pairwise(SIZES):
        assert np.isin(subsets[small], subsets[large]).all()
    for size, idx in subsets.items():
        counts = np.bincount(strata[idx], minlength=p.size)
        assert np.all(np.abs(counts - size * p) <= 1), (size, counts)


def test_stratification_labels_classification() -> None:
    assert stratification_labels([2, 0, 1, 2], regression=False).tolist() == [2, 0, 1, 2]
    assert stratification_labels(np.array([1.0, 0.0]), regression=False).dtype == np.int64
    assert stratification_labels(["neutral", "entailment", "neutral"], regression=False).tolist() == [1, 0, 1]
    with pytest.raises(DataError, match=r"regression=True"):
        stratification_labels([0.5, 1.2], regression=False)
    with pytest.raises(DataError, match="nan"):
        stratification_labels([0.5, np.nan], regression=True)
    with pytest.raises(SpecError, match="n_bins"):
        stratification_labels([0.5, 1.2], regression=True, n_bins=0)


# --------------------------------------------------------------------------------------------------
# Validation halves
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [872, 873, 1043, 2])
def test_validation_halves_partition_and_stratify(n: int) -> None:
    labels = _pool([0.51, 0.49], n, seed=n) if n > 2 else np.array([0, 1])
    select, score = validation_halves(labels)
    for half in (select, score):
        assert half.dtype == np.int64
        assert np.all(np.diff(half) > 0)
    assert np.intersect1d(select, score).size == 0
    assert np.array_equal(np.union1d(select, score), np.arange(labels.size))
    assert abs(select.size - score.size) <= 1
    p = np.bincount(labels) / labels.size
    for half in (select, score):
        counts = np.bincount(labels[half], minlength=p.size)
        assert np.all(np.abs(counts - half.size * p) <= 1), counts


def test_validation_halves_deterministic_and_regression() -> None:
    labels = THREE_CLASS_POOL[:1500]
    a, b = validation_halves(labels), validation_halves(labels)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], validation_halves(labels, seed=1)[0])

    values = np.random.default_rng(3).uniform(0, 5, size=1500)
    select, score = validation_halves(values, regression=True)
    strata = stratification_labels(values, regression=True)
    assert np.array_equal(np.union1d(select, score), np.arange(1500))
    assert np.all(np.abs(np.bincount(strata[select]) - np.bincount(strata[score])) <= 2)


def test_validation_halves_needs_two_examples() -> None:
    with pytest.raises(DataError, match="at least 2"):
        validation_halves([1])

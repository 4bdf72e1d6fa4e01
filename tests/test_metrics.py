"""Tests of freezestats.tasks.metrics: every metric against its scikit-learn / scipy reference."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from freezestats.exceptions import SpecError
from freezestats.tasks.metrics import (
    METRIC_RANGES,
    METRICS,
    REGRESSION_METRICS,
    CurveSummary,
    accuracy,
    compute_metrics,
    count_correct,
    f1,
    is_failed_run,
    majority_baseline,
    mcc,
    pearson,
    spearman,
    summarize_curve,
)

SEEDS = range(20)


def _random_classification(seed: int, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 300))
    ref = rng.integers(0, n_classes, size=n)
    # Correlated predictions, so that the scores are not all near zero.
    pred = np.where(rng.random(n) < 0.6, ref, rng.integers(0, n_classes, size=n))
    return pred, ref


def _quiet(fn, *args, **kwargs):
    """Call a reference implementation with its 'undefined metric' warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


# --------------------------------------------------------------------------------------------------
# Classification metrics
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n_classes", [2, 3])
def test_accuracy_and_count_match_sklearn(seed: int, n_classes: int) -> None:
    pred, ref = _random_classification(seed, n_classes)
    # Reference: sklearn.metrics.accuracy_score (and normalize=False for the count).
    assert accuracy(pred, ref) == pytest.approx(accuracy_score(ref, pred), abs=1e-12)
    assert count_correct(pred, ref) == int(accuracy_score(ref, pred, normalize=False))
    assert isinstance(count_correct(pred, ref), int)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n_classes", [2, 3, 5])
def test_mcc_matches_sklearn(seed: int, n_classes: int) -> None:
    pred, ref = _random_classification(seed, n_classes)
    # Reference: sklearn.metrics.matthews_corrcoef (multi-class Gorodkin form).
    assert mcc(pred, ref) == pytest.approx(_quiet(matthews_corrcoef, ref, pred), abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_f1_matches_sklearn(seed: int) -> None:
    pred, ref = _random_classification(seed, 2)
    # Reference: sklearn.metrics.f1_score, binary average, pos_label=1.
    assert f1(pred, ref) == pytest.approx(_quiet(f1_score, ref, pred, zero_division=0), abs=1e-12)


@pytest.mark.parametrize(
    ("pred", "ref"),
    [
        ([1, 1, 1, 1], [0, 1, 0, 1]),  # constant predictions
        ([0, 0, 0, 0], [0, 1, 0, 1]),
        ([0, 1, 0, 1], [1, 1, 1, 1]),  # constant references
        ([1, 1, 1], [1, 1, 1]),  # both constant, all correct
        ([0, 0, 0], [0, 0, 0]),  # no positives at all
        ([1, 0, 1, 0], [1, 0, 1, 0]),  # perfect
        ([0, 1, 0, 1], [1, 0, 1, 0]),  # perfectly wrong
        ([1], [0]),  # single example
    ],
)
def test_classification_edge_cases_match_sklearn(pred: list[int], ref: list[int]) -> None:
    # References: sklearn.metrics.matthews_corrcoef (0.0 when undefined) and
    # sklearn.metrics.f1_score(zero_division=0) (0.0 when undefined).
    assert mcc(pred, ref) == pytest.approx(_quiet(matthews_corrcoef, ref, pred), abs=1e-12)
    assert f1(pred, ref) == pytest.approx(_quiet(f1_score, ref, pred, zero_division=0), abs=1e-12)
    assert accuracy(pred, ref) == pytest.approx(accuracy_score(ref, pred), abs=1e-12)


def test_constant_predictions_score_zero() -> None:
    ref = np.array([0, 1, 1, 0, 1, 1, 0])
    assert mcc(np.ones_like(ref), ref) == 0.0
    assert f1(np.zeros_like(ref), ref) == 0.0
    assert f1(np.zeros(3, dtype=int), np.zeros(3, dtype=int)) == 0.0


def test_mcc_handles_labels_that_are_not_0_to_k() -> None:
    ref = np.array([3, 7, 7, 3, 9, 9, 7])
    pred = np.array([3, 7, 9, 3, 9, 7, 7])
    # Reference: sklearn.metrics.matthews_corrcoef with arbitrary label values.
    assert mcc(pred, ref) == pytest.approx(matthews_corrcoef(ref, pred), abs=1e-12)


# --------------------------------------------------------------------------------------------------
# Correlations
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_correlations_match_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 300))
    ref = rng.uniform(0, 5, size=n)
    pred = ref + rng.normal(0, 1.5, size=n)
    # References: scipy.stats.pearsonr and scipy.stats.spearmanr.
    assert pearson(pred, ref) == pytest.approx(pearsonr(pred, ref)[0], abs=1e-10)
    assert spearman(pred, ref) == pytest.approx(spearmanr(pred, ref)[0], abs=1e-10)


@pytest.mark.parametrize("seed", range(5))
def test_spearman_with_ties_matches_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    # STS-B gold scores are multiples of 0.2, so ties are the norm.
    ref = np.round(rng.uniform(0, 5, size=200) * 5) / 5
    pred = np.round(ref + rng.normal(0, 1, size=200))
    # Reference: scipy.stats.spearmanr (average ranks for ties).
    assert spearman(pred, ref) == pytest.approx(spearmanr(pred, ref)[0], abs=1e-10)


def test_correlations_of_constant_side_are_zero() -> None:
    ref = np.array([0.0, 1.2, 3.4, 5.0, 2.2])
    for constant in (np.full(5, 0.1), np.full(5, 2.6), np.zeros(5)):
        assert pearson(constant, ref) == 0.0
        assert spearman(constant, ref) == 0.0
        assert pearson(ref, constant) == 0.0
        assert spearman(ref, constant) == 0.0


def test_correlations_exact_and_nan_inputs() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert pearson(x, 2 * x + 1) == pytest.approx(1.0)
    assert pearson(x, -x) == pytest.approx(-1.0)
    assert spearman(x, x**3) == pytest.approx(1.0)
    assert math.isnan(pearson([1.0, np.nan, 3.0], [1.0, 2.0, 3.0]))
    assert math.isnan(spearman([1.0, np.nan, 3.0], [1.0, 2.0, 3.0]))


def test_pearson_large_values_do_not_overflow() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=50) * 1e200
    y = x + rng.normal(size=50) * 1e199
    # Reference: scipy.stats.pearsonr.
    assert pearson(x, y) == pytest.approx(pearsonr(x, y)[0], abs=1e-10)


@pytest.mark.parametrize("fn", list(METRICS.values()))
def test_metrics_reject_bad_shapes(fn) -> None:
    with pytest.raises(ValueError, match="same length"):
        fn([0, 1, 1], [0, 1])
    with pytest.raises(ValueError, match="at least one"):
        fn([], [])
    with pytest.raises(ValueError, match="1-D"):
        fn([[0, 1]], [[0, 1]])


# --------------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------------


def test_registry_and_compute_metrics() -> None:
    assert set(METRICS) == {"accuracy", "mcc", "f1", "macro_f1", "pearson", "spearman"}
    pred, ref = [1, 0, 1, 1], [1, 0, 0, 1]
    out = compute_metrics(["f1", "accuracy", "mcc"], pred, ref)
    assert list(out) == ["f1", "accuracy", "mcc"]
    assert out == {"f1": f1(pred, ref), "accuracy": 0.75, "mcc": mcc(pred, ref)}
    assert compute_metrics("accuracy", pred, ref) == {"accuracy": 0.75}
    assert all(isinstance(v, float) for v in out.values())


def test_compute_metrics_unknown_name_lists_available() -> None:
    with pytest.raises(
        SpecError, match=r"one of \['accuracy', 'f1', 'macro_f1', 'mcc', 'pearson', 'spearman'\].*'auc'"
    ):
        compute_metrics(["accuracy", "auc"], [1], [1])


# --------------------------------------------------------------------------------------------------
# Majority baseline
# --------------------------------------------------------------------------------------------------


def test_majority_baseline_sst2_like() -> None:
    train = np.r_[np.ones(37569, dtype=int), np.zeros(29780, dtype=int)]  # SST-2 train: more 1s
    evals = np.r_[np.ones(444, dtype=int), np.zeros(428, dtype=int)]  # SST-2 validation
    assert majority_baseline("accuracy", train, evals, regression=False) == pytest.approx(444 / 872)
    assert majority_baseline("mcc", train, evals, regression=False) == 0.0
    assert majority_baseline("f1", train, evals, regression=False) == pytest.approx(2 * 444 / (2 * 444 + 428))


def test_majority_baseline_ties_and_minority() -> None:
    evals = np.array([0, 0, 0, 1])
    # Tie in training -> smallest label (0) is predicted.
    assert majority_baseline("accuracy", [1, 0, 1, 0], evals, regression=False) == 0.75
    # Majority from *train* (1), even though 0 dominates evaluation.
    assert majority_baseline("accuracy", [1, 1, 0], evals, regression=False) == 0.25
    assert majority_baseline("f1", [0, 0, 1], evals, regression=False) == 0.0
    # Three classes, labels not starting at 0.
    assert majority_baseline("accuracy", [2, 5, 5, 2, 7], [5, 5, 2], regression=False) == pytest.approx(1 / 3)


def test_majority_baseline_regression_is_zero() -> None:
    rng = np.random.default_rng(0)
    train, evals = rng.uniform(0, 5, 500), rng.uniform(0, 5, 100)
    assert majority_baseline("pearson", train, evals, regression=True) == 0.0
    assert majority_baseline("spearman", train, evals, regression=True) == 0.0
    with pytest.raises(SpecError, match="regression"):
        majority_baseline("accuracy", train, evals, regression=True)
    with pytest.raises(SpecError, match="auc"):
        majority_baseline("auc", [0, 1], [0, 1], regression=False)
    with pytest.raises(ValueError, match="train_labels"):
        majority_baseline("accuracy", [], [0, 1], regression=False)


# --------------------------------------------------------------------------------------------------
# Curve summary
# --------------------------------------------------------------------------------------------------


def test_summarize_curve_example() -> None:
    s = summarize_curve([0.5, 0.7, 0.9, 0.6], [0.5, 0.8, 0.7, 0.6], [0.5, 0.6, 0.95, 0.6])
    assert s == CurveSummary(best_dev=0.9, best_step=2, final_dev=0.6, heldout=0.6, heldout_step=1)
    assert isinstance(s.best_step, int) and isinstance(s.heldout_step, int)
    with pytest.raises(AttributeError):
        s.best_dev = 1.0  # type: ignore[misc]  # frozen


def test_summarize_curve_ties_take_first() -> None:
    s = summarize_curve([0.8, 0.9, 0.9, 0.7], [0.6, 0.6, 0.5, 0.6], [0.1, 0.2, 0.3, 0.4])
    assert (s.best_dev, s.best_step) == (0.9, 1)
    assert (s.heldout, s.heldout_step) == (0.1, 0)
    assert s.final_dev == 0.7


def test_summarize_curve_nan_is_never_selected() -> None:
    nan = float("nan")
    s = summarize_curve([nan, 0.4, nan, 0.3], [nan, 0.2, 0.3, nan], [0.9, 0.5, 0.6, 0.7])
    assert (s.best_dev, s.best_step) == (0.4, 1)
    assert (s.heldout, s.heldout_step) == (0.6, 2)
    assert s.final_dev == 0.3
    # All nan: nothing to select, reported as nan rather than as a fake number.
    s = summarize_curve([nan, nan], [nan, nan], [0.5, 0.6])
    assert math.isnan(s.best_dev) and s.best_step == 0 and s.heldout_step == 0
    assert math.isnan(s.final_dev)
    # A final nan is reported as such.
    assert math.isnan(summarize_curve([0.5, nan], [0.5, 0.4], [0.5, 0.4]).final_dev)


def test_summarize_curve_single_evaluation() -> None:
    s = summarize_curve([0.7], [0.6], [0.8])
    assert s == CurveSummary(0.7, 0, 0.7, 0.8, 0)


def test_summarize_curve_errors() -> None:
    with pytest.raises(ValueError, match=r"equal lengths.*3, 2 and 3"):
        summarize_curve([0.1, 0.2, 0.3], [0.1, 0.2], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match=r"scores_full.*empty"):
        summarize_curve([], [], [])
    with pytest.raises(ValueError, match=r"scores_select.*1-D"):
        summarize_curve([0.1], [[0.1]], [0.1])


# --------------------------------------------------------------------------------------------------
# Failed runs
# --------------------------------------------------------------------------------------------------


def test_is_failed_run_classification() -> None:
    # Single predicted class: failed, whatever the score says.
    assert is_failed_run([1, 1, 1, 1], regression=False, final_score=0.9, baseline=0.5)
    # Varied predictions, clearly above baseline: fine.
    assert not is_failed_run([1, 0, 1, 1], regression=False, final_score=0.8, baseline=0.509)
    # At or below the baseline (within tol): failed.
    assert is_failed_run([1, 0, 1, 1], regression=False, final_score=0.509, baseline=0.509)
    assert is_failed_run([1, 0, 1, 1], regression=False, final_score=0.509 + 1e-12, baseline=0.509)
    assert is_failed_run([1, 0, 1, 1], regression=False, final_score=0.4, baseline=0.509)
    assert not is_failed_run([1, 0], regression=False, final_score=0.51, baseline=0.5, tol=1e-3)
    assert is_failed_run([1, 0], regression=False, final_score=0.5005, baseline=0.5, tol=1e-3)
    # MCC baseline is 0: a negative or zero MCC fails.
    assert is_failed_run([0, 1, 2], regression=False, final_score=0.0, baseline=0.0)
    assert not is_failed_run([0, 1, 2], regression=False, final_score=0.2, baseline=0.0)
    # A nan metric cannot count as success.
    assert is_failed_run([0, 1], regression=False, final_score=float("nan"), baseline=0.0)


def test_is_failed_run_regression() -> None:
    rng = np.random.default_rng(0)
    good = rng.normal(size=100)
    assert not is_failed_run(good, regression=True, final_score=0.8, baseline=0.0)
    assert is_failed_run(np.full(100, 2.5), regression=True, final_score=0.8, baseline=0.0)
    assert is_failed_run(2.5 + 1e-10 * good, regression=True, final_score=0.8, baseline=0.0)
    assert is_failed_run(np.r_[good, np.nan], regression=True, final_score=0.8, baseline=0.0)
    assert is_failed_run(good, regression=True, final_score=-0.1, baseline=0.0)
    with pytest.raises(ValueError, match="non-empty"):
        is_failed_run([], regression=True, final_score=0.8, baseline=0.0)


def test_every_metric_has_a_range_and_its_scores_stay_in_it() -> None:
    """The task-level interval stops at +-(high - low) (``METRIC_RANGES``): a wrong range would cut a valid one."""
    assert set(METRIC_RANGES) == set(METRICS)
    gen = np.random.default_rng(5)
    for name, metric in METRICS.items():
        low, high = METRIC_RANGES[name]
        classes = 3 if name == "macro_f1" else 2
        for _ in range(50):
            ref = gen.normal(size=30) if name in REGRESSION_METRICS else gen.integers(0, classes, 30)
            pred = ref + gen.normal(0, 2, 30) if name in REGRESSION_METRICS else gen.integers(0, ref.max() + 1, 30)
            assert low <= metric(pred, ref) <= high
        reversed_ = -ref if name in REGRESSION_METRICS else ref.max() - ref
        assert metric(reversed_, ref) == pytest.approx(low) or low == 0.0

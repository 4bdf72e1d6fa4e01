"""Tests of freezestats.stats.relative_quality.operating_point on hand-made tables whose operating points are
known, and of the ratio test on hand-made fits whose contrasts are known exactly (Fieller limits checked against a
brute-force inversion)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from test_stats_noninferiority import CellFit

from freezestats.exceptions import ModelFitError
from freezestats.stats import contrasts_vs_reference, fit_mixed, simulate_results
from freezestats.stats.relative_quality.operating_point import lee_ratio_tests, operating_point, relative_scores

DEPTHS = (-1, 0, 1, 2, 3, 4)  # a 4-layer model
# Mean score per depth; full model (0) at 0.80. At 90%: 1 -> 0.975, 2 -> 0.9125 (reaches), 3 -> 0.875 (misses).
MEANS = {-1: 0.80, 0: 0.80, 1: 0.78, 2: 0.73, 3: 0.70, 4: 0.50}


def _runs(
    scores: dict[tuple[int, int], list[float]], task: str = "sst2", n_layers: int = 4, baseline: float = 0.5
) -> pd.DataFrame:
    """One grid row per run: ``scores[(train_size, frozen_layers)]`` lists best_dev by seed (1, 2, ...)."""
    rows = []
    for (size, frozen), values in scores.items():
        for seed, value in enumerate(values, start=1):
            rows.append(
                {
                    "role": "grid",
                    "state": "complete",
                    "task": task,
                    "model": "tiny",
                    "n_layers": n_layers,
                    "train_size": size,
                    "frozen_layers": frozen,
                    "subset_draw": 0,
                    "seed": seed,
                    "best_dev": value,
                    "majority_baseline": baseline,
                }
            )
    return pd.DataFrame(rows)


def _agreeing(means: dict[int, float], sizes: tuple[int, ...] = (100, 200), seeds: int = 5) -> pd.DataFrame:
    """Every seed scores exactly the cell mean: the bootstrap distribution is a point mass."""
    return _runs({(size, k): [m] * seeds for size in sizes for k, m in means.items()})


# --------------------------------------------------------------------------------------------------
# operating_point
# --------------------------------------------------------------------------------------------------


def test_operating_point_known_answer_and_collapsed_interval_when_seeds_agree() -> None:
    out = operating_point(_agreeing(MEANS), "best_dev", n_boot=500)
    assert list(out.columns) == [
        "task",
        "train_size",
        "trainable_layers",
        "frozen_layers",
        "threshold",
        "ci_low",
        "ci_high",
        "p_reached",
        "n_boot",
        "n_valid",
        "full_mean",
        "baseline",
    ]
    assert out["train_size"].tolist() == [100, 200]
    assert out["trainable_layers"].tolist() == [2, 2]  # 4 layers - 2 frozen
    assert out["frozen_layers"].tolist() == [2, 2]
    assert out["ci_low"].tolist() == [2.0, 2.0] and out["ci_high"].tolist() == [2.0, 2.0]
    assert out["p_reached"].tolist() == [1.0, 1.0]
    assert out["n_boot"].tolist() == [500, 500] and out["n_valid"].tolist() == [500, 500]
    assert out["full_mean"].tolist() == pytest.approx([0.8, 0.8]) and out["baseline"].tolist() == [0.0, 0.0]


@pytest.mark.parametrize(
    ("threshold", "trainable", "frozen"),
    [(0.9, 2, 2), (0.95, 3, 1), (0.85, 1, 3), (0.6, 0, 4), (1.0, 4, -1)],
)
def test_operating_point_follows_the_threshold(threshold: float, trainable: int, frozen: int) -> None:
    row = operating_point(_agreeing(MEANS, sizes=(100,)), "best_dev", threshold=threshold, n_boot=50).iloc[0]
    assert (row["trainable_layers"], row["frozen_layers"], row["threshold"]) == (trainable, frozen, threshold)


def test_operating_point_prefers_embeddings_only_freezing_on_a_tie_and_takes_the_deepest_qualifying_depth() -> None:
    # Only -1 and 0 reach 90%: both leave 4 blocks trainable, and -1 freezes more.
    weak = {-1: 0.80, 0: 0.80, 1: 0.70, 2: 0.70, 3: 0.70, 4: 0.50}
    row = operating_point(_agreeing(weak, sizes=(100,)), "best_dev", n_boot=20).iloc[0]
    assert (row["trainable_layers"], row["frozen_layers"]) == (4, -1)
    # Non-monotone curve: 3 frozen reaches 90% although 2 frozen does not; every depth is checked.
    bumpy = {-1: 0.80, 0: 0.80, 1: 0.78, 2: 0.70, 3: 0.73, 4: 0.50}
    row = operating_point(_agreeing(bumpy, sizes=(100,)), "best_dev", n_boot=20).iloc[0]
    assert (row["trainable_layers"], row["frozen_layers"]) == (1, 3)


def test_operating_point_relative_to_majority_is_stricter() -> None:
    # Improvement over 0.5: depth 1 -> 0.28 / 0.30 = 0.933 (reaches), depth 2 -> 0.23 / 0.30 = 0.767 (misses).
    row = operating_point(_agreeing(MEANS, sizes=(100,)), "best_dev", relative_to="majority", n_boot=20).iloc[0]
    assert (row["trainable_layers"], row["frozen_layers"], row["baseline"]) == (3, 1, 0.5)


def _exact_bootstrap_p_reached(table: pd.DataFrame, size: int, trainable_cut: int, threshold: float) -> float:
    """P(operating point <= trainable_cut) under the exact bootstrap distribution over seeds, by enumeration."""
    part = table[table["train_size"] == size]
    seeds = sorted(part["seed"].unique())
    u = len(seeds)
    total = 0.0
    for counts in itertools.product(range(u + 1), repeat=u):
        if sum(counts) != u:
            continue
        probability = math.factorial(u) / math.prod(math.factorial(c) for c in counts) / u**u
        weights = dict(zip(seeds, counts, strict=True))
        w = part["seed"].map(weights)
        means = (part["best_dev"] * w).groupby(part["frozen_layers"]).sum() / w.groupby(part["frozen_layers"]).sum()
        reached = [k for k in means.index if means[k] >= threshold * means[0] - 1e-12]
        point = min(4 - max(k, 0) for k in reached)
        total += probability * (point <= trainable_cut)
    return total


def test_operating_point_bootstrap_matches_exact_enumeration_over_seeds() -> None:
    # Three seeds that disagree about depth 2: it reaches 90% on average, but not for seed 3 alone.
    scores = {(100, k): [m, m, m] for k, m in MEANS.items()}
    scores[(100, 2)] = [0.76, 0.75, 0.68]  # mean 0.73: reaches 0.72
    table = _runs(scores)
    out = operating_point(table, "best_dev", n_boot=20000, rng=11).iloc[0]
    assert out["trainable_layers"] == 2
    exact = _exact_bootstrap_p_reached(table, 100, 2, 0.9)
    # Monte-Carlo error of a proportion from 20000 replicates: < 0.004 (1 SD); allow 4 SD.
    assert out["p_reached"] == pytest.approx(exact, abs=0.015)
    assert 0 < exact < 1
    assert (out["ci_low"], out["ci_high"]) == (2.0, 3.0)  # the other replicates need depth 1 (3 trainable)


def test_operating_point_is_reproducible_and_nan_where_the_full_model_learns_nothing() -> None:
    scores = {(100, k): [m - 0.01, m, m + 0.01] for k, m in MEANS.items()}
    scores.update({(50, k): [0.5, 0.5, 0.5] for k in MEANS})  # full model at the majority baseline
    table = _runs(scores)
    first = operating_point(table, "best_dev", relative_to="majority", rng=3, n_boot=300)
    again = operating_point(table, "best_dev", relative_to="majority", rng=3, n_boot=300)
    pd.testing.assert_frame_equal(first, again)
    small = first[first["train_size"] == 50].iloc[0]
    assert pd.isna(small["trainable_layers"]) and pd.isna(small["p_reached"]) and small["n_valid"] == 0
    assert first.loc[first["train_size"] == 100, "trainable_layers"].iloc[0] == 3  # improvement: depth 1
    only_small = table[table["train_size"] == 50]
    with pytest.raises(ModelFitError, match=r"must score above the baseline \(relative_to='majority'\) at some"):
        operating_point(only_small, "best_dev", relative_to="majority", n_boot=10)


# --------------------------------------------------------------------------------------------------
# relative_scores
# --------------------------------------------------------------------------------------------------


def test_relative_scores_point_values() -> None:
    out = relative_scores(_agreeing(MEANS, sizes=(100,)), "best_dev", n_boot=50)
    assert list(out.columns) == [
        "task",
        "train_size",
        "frozen_layers",
        "trainable_layers",
        "n",
        "mean",
        "full_mean",
        "baseline",
        "difference",
        "difference_ci_low",
        "difference_ci_high",
        "relative",
        "relative_ci_low",
        "relative_ci_high",
    ]
    assert out["frozen_layers"].tolist() == list(DEPTHS)
    assert out["trainable_layers"].tolist() == [4, 4, 3, 2, 1, 0]
    expected = np.array([MEANS[k] for k in DEPTHS])
    assert out["relative"].to_numpy() == pytest.approx(expected / 0.8)
    assert out["difference"].to_numpy() == pytest.approx(expected - 0.8)
    assert out["relative_ci_low"].to_numpy() == pytest.approx(expected / 0.8)  # seeds agree: no width
    majority = relative_scores(_agreeing(MEANS, sizes=(100,)), "best_dev", relative_to="majority", n_boot=50)
    assert majority["relative"].to_numpy() == pytest.approx((expected - 0.5) / 0.3)


def test_relative_scores_resamples_whole_seeds() -> None:
    # A seed effect shared by every depth: cell means vary across resamples, but differences do not.
    effect = [-0.05, 0.0, 0.02, 0.06, -0.03]
    scores = {(100, k): [m + e for e in effect] for k, m in MEANS.items()}
    out = relative_scores(_runs(scores), "best_dev", n_boot=400, rng=1)
    assert np.allclose(out["difference_ci_low"], out["difference"], atol=1e-12)
    assert np.allclose(out["difference_ci_high"], out["difference"], atol=1e-12)
    # ...whereas each depth's ratio still moves with the seed effect (the ratio is not shift-invariant).
    assert (
        out.loc[out["frozen_layers"] == 4, "relative_ci_high"] > out.loc[out["frozen_layers"] == 4, "relative"]
    ).all()


def test_relative_scores_difference_interval_matches_a_direct_bootstrap() -> None:
    rng = np.random.default_rng(0)
    scores = {(100, k): list(m + rng.normal(0, 0.02, 4)) for k, m in MEANS.items()}
    table = _runs(scores)
    out = relative_scores(table, "best_dev", n_boot=300, rng=5).set_index("frozen_layers")
    # Same replicates by hand: multinomial seed counts from the same generator, means by pandas.
    counts = np.random.default_rng(5).multinomial(4, [0.25] * 4, size=300)
    differences = []
    for row in counts:
        w = table["seed"].map(dict(zip([1, 2, 3, 4], row, strict=True))).astype(float)
        means = (table["best_dev"] * w).groupby(table["frozen_layers"]).sum() / w.groupby(table["frozen_layers"]).sum()
        differences.append(means - means[0])
    boot = pd.DataFrame(differences)
    for k in DEPTHS:
        low, high = np.quantile(boot[k], [0.025, 0.975])
        assert out.loc[k, "difference_ci_low"] == pytest.approx(low, abs=1e-12)
        assert out.loc[k, "difference_ci_high"] == pytest.approx(high, abs=1e-12)


def test_relative_scores_ratio_is_nan_when_the_full_model_is_not_above_the_origin() -> None:
    scores = {(100, k): [0.02, -0.04, 0.01] for k in MEANS}  # e.g. MCC near 0
    scores[(100, 2)] = [0.1, 0.0, 0.05]
    out = relative_scores(_runs(scores), "best_dev", n_boot=100).set_index("frozen_layers")
    assert out["relative"].isna().all()
    assert out["relative_ci_low"].isna().all()
    assert out.loc[2, "difference"] == pytest.approx(0.05 - (-0.01 / 3))
    # Positive full mean, but some resamples are not: the ratio's interval is withheld.
    scores = {(100, k): [0.3, -0.1, 0.1] for k in MEANS}
    out = relative_scores(_runs(scores), "best_dev", n_boot=300).set_index("frozen_layers")
    assert out["relative"].notna().all() and out["relative_ci_low"].isna().all()


def test_relative_scores_unbalanced_table_keeps_its_intervals() -> None:
    rng = np.random.default_rng(2)
    scores = {(100, k): list(m + rng.normal(0, 0.02, 5)) for k, m in MEANS.items()}
    table = _runs(scores)
    table = table[~((table["frozen_layers"] == 0) & (table["seed"] == 5))]  # one crashed full-model run
    out = relative_scores(table, "best_dev", n_boot=3000, rng=0).set_index("frozen_layers")
    assert out.loc[0, "n"] == 4 and out.loc[2, "n"] == 5
    assert out[["relative_ci_low", "relative_ci_high", "difference_ci_low"]].notna().all().all()
    assert out.loc[2, "full_mean"] == pytest.approx(table.query("frozen_layers == 0")["best_dev"].mean())


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("function", [relative_scores, operating_point])
def test_lee_input_errors(function) -> None:
    table = _agreeing(MEANS, sizes=(100, 200))
    with pytest.raises(ModelFitError, match=r"at least one row, but it is empty"):
        function(table.iloc[:0], "best_dev")
    with pytest.raises(ModelFitError, match=r"response='acc'; choose one of \['best_dev'"):
        function(table, "acc")
    two = pd.concat([table, table.assign(task="cola")])
    with pytest.raises(ModelFitError, match=r"one task at a time, but the table has 2 tasks \['cola', 'sst2'\]"):
        function(two, "best_dev")
    with pytest.raises(ModelFitError, match=r"reference depth frozen_layers=0, but train_size \[200\] has none"):
        function(table[~((table["train_size"] == 200) & (table["frozen_layers"] == 0))], "best_dev")
    with pytest.raises(
        ModelFitError, match=r"at least 2 distinct \('subset_draw', 'seed'\) units, but task 'sst2' has 1"
    ):
        function(table[table["seed"] == 1], "best_dev")
    with pytest.raises(ModelFitError, match=r"`relative_to` must be 'zero'.*but got relative_to='baseline'"):
        function(table, "best_dev", relative_to="baseline")
    with pytest.raises(ModelFitError, match=r"`n_boot` must be an integer >= 1, but got n_boot=0"):
        function(table, "best_dev", n_boot=0)
    with pytest.raises(ModelFitError, match=r"`n_layers` must be the same for every run"):
        function(table.assign(n_layers=np.where(table["train_size"] == 100, 4, 6)), "best_dev")
    with pytest.raises(ModelFitError, match=r"must have the columns \['majority_baseline'\]"):
        function(table.drop(columns="majority_baseline"), "best_dev", relative_to="majority")
    with pytest.raises(ModelFitError, match=r"must have the columns \['seed'\]"):
        function(table.drop(columns="seed"), "best_dev")


def test_operating_point_threshold_must_be_a_fraction() -> None:
    table = _agreeing(MEANS)
    for bad in (0, 1.1, -0.5, "high"):
        with pytest.raises(ModelFitError, match=r"`threshold` must be in \(0, 1\]"):
            operating_point(table, "best_dev", threshold=bad)


def test_unit_can_be_a_cluster_of_subset_draws() -> None:
    scores = {(100, k): [m - 0.01, m + 0.01] for k, m in MEANS.items()}
    table = pd.concat([_runs(scores).assign(subset_draw=d) for d in (0, 1, 2)], ignore_index=True)
    by_draw = operating_point(table, "best_dev", unit=("subset_draw",), n_boot=100)
    assert by_draw["trainable_layers"].iloc[0] == 2
    with pytest.raises(ModelFitError, match=r"must have the columns \['replicate'\]"):
        operating_point(table, "best_dev", unit="replicate")


# --------------------------------------------------------------------------------------------------
# lee_ratio_tests
# --------------------------------------------------------------------------------------------------

LEE_COLUMNS = [
    "train_size",
    "frozen_layers",
    "reference",
    "ratio",
    "baseline",
    "mean",
    "reference_mean",
    "estimate",
    "se",
    "df",
    "lower",
    "t",
    "p_val",
    "tested",
    "reaches",
    "alpha",
    "ratio_estimate",
    "ratio_ci_low",
    "ratio_ci_high",
    "note",
]


def _fit(means: dict[int, float], var: float | dict[int, float] = 0.01**2, sizes=(100,), df: float = 12.0) -> CellFit:
    cells = {(k, n): m for n in sizes for k, m in means.items()}
    variances = {(k, n): var[k] if isinstance(var, dict) else var for k, n in cells}
    return CellFit(cells, variances, df)


def test_lee_ratio_test_is_the_linear_contrast_mu_k_minus_ratio_mu_0() -> None:
    fit = _fit({0: 0.80, -1: 0.80, 2: 0.75, 4: 0.70}, var={0: 0.01**2, -1: 0.01**2, 2: 0.012**2, 4: 0.01**2})
    out = lee_ratio_tests(fit)
    assert list(out.columns) == LEE_COLUMNS
    assert out["frozen_layers"].tolist() == [-1, 2, 4]  # shallow to deep
    assert out["estimate"].to_numpy() == pytest.approx([0.80 - 0.72, 0.75 - 0.72, 0.70 - 0.72])
    se = np.sqrt(np.array([0.01**2, 0.012**2, 0.01**2]) + 0.81 * 0.01**2)
    assert out["se"].to_numpy() == pytest.approx(se)
    assert out["t"].to_numpy() == pytest.approx(out["estimate"] / se)
    assert out["p_val"].to_numpy() == pytest.approx(stats.t.sf(out["estimate"] / se, 12))
    assert out["lower"].to_numpy() == pytest.approx(out["estimate"] - stats.t.ppf(0.95, 12) * se)
    assert out["reaches"].tolist() == [True, True, False]
    assert out["tested"].all()
    assert out["ratio_estimate"].to_numpy() == pytest.approx([1.0, 0.75 / 0.8, 0.70 / 0.8])
    assert (out["baseline"] == 0).all() and (out["ratio"] == 0.9).all() and (out["note"] == "").all()
    # with a baseline: mu_k - b - ratio (mu_0 - b)
    based = lee_ratio_tests(fit, baseline=0.5)
    assert based["estimate"].to_numpy() == pytest.approx([0.30 - 0.27, 0.25 - 0.27, 0.20 - 0.27])
    assert based["ratio_estimate"].to_numpy() == pytest.approx([1.0, 0.25 / 0.3, 0.2 / 0.3])
    assert based["reaches"].tolist() == [True, False, False]
    assert based["tested"].tolist() == [True, True, False]


def test_lee_ratio_test_stops_at_the_first_depth_that_misses() -> None:
    fit = _fit({0: 0.80, 2: 0.60, 4: 0.80, 6: 0.80}, var=0.002**2, sizes=(100, 500))
    out = lee_ratio_tests(fit)
    assert out["tested"].tolist() == [True, False, False] * 2
    assert out["reaches"].tolist() == [False] * 6
    assert (out.loc[out["frozen_layers"] > 2, "p_val"] < 1e-6).all()


def test_fieller_interval_inverts_the_ratio_test() -> None:
    var = {0: 0.03**2, 2: 0.02**2}
    fit = _fit({0: 0.60, 2: 0.55}, var=var, df=9.0)
    row = lee_ratio_tests(fit, baseline=0.5, alpha=0.05).iloc[0]
    a, d, q = 0.05, 0.10, stats.t.ppf(0.95, 9)
    for rho in (row["ratio_ci_low"], row["ratio_ci_high"]):
        assert (a - rho * d) ** 2 == pytest.approx(q**2 * (var[2] + rho**2 * var[0]), rel=1e-9)
    # brute force: the ratios the two-sided level-2*alpha t test does not reject
    grid = np.linspace(-5, 5, 20001)
    keep = np.abs(a - grid * d) <= q * np.sqrt(var[2] + grid**2 * var[0])
    assert row["ratio_ci_low"] == pytest.approx(grid[keep].min(), abs=1e-3)
    assert row["ratio_ci_high"] == pytest.approx(grid[keep].max(), abs=1e-3)
    assert row["ratio_ci_low"] < 0.5 < row["ratio_ci_high"]
    # with d > 0 the one-sided test at `ratio` rejects exactly when ratio < ratio_ci_low
    for ratio in (row["ratio_ci_low"] - 1e-3, row["ratio_ci_low"] + 1e-3):
        if ratio <= 0:
            continue
        test = lee_ratio_tests(fit, baseline=0.5, ratio=min(ratio, 1.0)).iloc[0]
        assert bool(test["p_val"] < 0.05) == bool(ratio < row["ratio_ci_low"])


def test_fieller_interval_is_unbounded_when_the_reference_is_not_above_the_baseline() -> None:
    fit = _fit({0: 0.52, 2: 0.55, 4: 0.51}, var=0.02**2, df=8.0)
    out = lee_ratio_tests(fit, baseline=0.5)
    assert np.isneginf(out["ratio_ci_low"]).all() and np.isposinf(out["ratio_ci_high"]).all()
    assert out["note"].str.startswith("unbounded: the reference mean is not significantly different").all()
    assert out["note"].str.contains("whole real line|and \\[", regex=True).all()
    assert out["p_val"].notna().all()


def test_lee_ratio_test_on_a_mixed_model_matches_the_contrasts_at_ratio_one() -> None:
    effects = {(k, n): 0.85 - c for n in (200, 500) for k, c in ((0, 0.0), (2, 0.01), (4, 0.09))}
    table = simulate_results(effects, frozen_levels=(0, 2, 4), train_sizes=(200, 500), seeds=5, rng=4)
    fit = fit_mixed(table, "best_dev")
    one = lee_ratio_tests(fit, ratio=1.0)
    contrasts = contrasts_vs_reference(fit, adjust="none")
    merged = one.merge(contrasts, on=["train_size", "frozen_layers"], suffixes=("", "_c"))
    for column in ("estimate", "se", "df"):
        assert merged[column].to_numpy() == pytest.approx(merged[f"{column}_c"].to_numpy(), rel=1e-9)
    lee = lee_ratio_tests(fit)
    assert lee["estimate"].to_numpy() == pytest.approx((lee["mean"] - 0.9 * lee["reference_mean"]).to_numpy())
    assert (lee["df"] > 0).all() and np.isfinite(lee["ratio_ci_low"]).all()


def test_lee_ratio_test_input_errors() -> None:
    fit = _fit({0: 0.8, 2: 0.7})
    with pytest.raises(ModelFitError, match=r"`ratio` must be in \(0, 1\] .* but got ratio=1.5"):
        lee_ratio_tests(fit, ratio=1.5)
    with pytest.raises(ModelFitError, match=r"`alpha` must be in \(0, 0.5\), but got alpha=0"):
        lee_ratio_tests(fit, alpha=0)
    with pytest.raises(ModelFitError, match=r"`reference` must be one of the frozen levels of the fit \[0, 2\]"):
        lee_ratio_tests(fit, reference=4)
    with pytest.raises(ModelFitError, match=r"`baseline` must give a value for every train size"):
        lee_ratio_tests(fit, baseline={500: 0.5})
    with pytest.raises(ModelFitError, match=r"lee_ratio_tests needs a fit with fixed effects"):
        lee_ratio_tests("fit")

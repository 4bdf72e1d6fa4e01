"""Item uncertainty: pseudo-values per metric, the two-way item variance, and the sequence with items."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from freezestats.analysis.pipeline import analyze
from freezestats.exceptions import ModelFitError
from freezestats.stats.items import pseudo_values as item_pseudo
from freezestats.stats.items.pseudo_values import pseudo_values
from freezestats.stats.items.uncertainty import item_variance
from freezestats.stats.simulation.items import simulate_item_study
from freezestats.tasks.metrics import METRICS


def _binary(rng: np.random.Generator, n: int, agree: float) -> tuple[np.ndarray, np.ndarray]:
    labels = rng.integers(0, 2, n)
    return np.where(rng.random(n) < agree, labels, 1 - labels), labels


def test_accuracy_pseudo_values_are_the_items_correctness() -> None:
    pred, ref = _binary(np.random.default_rng(0), 50, 0.8)
    assert np.array_equal(pseudo_values("accuracy", pred, ref), (pred == ref).astype(float))


@pytest.mark.parametrize("metric", ["mcc", "f1", "pearson"])
@pytest.mark.parametrize("case", ["typical", "one_class_left", "constant_predictions"])
def test_closed_form_leave_one_out_equals_recomputing_the_metric(metric: str, case: str) -> None:
    rng = np.random.default_rng(1)
    if metric == "pearson":
        ref = rng.normal(size=40) * 1e3 + 5e6  # large offset: the centred moment sums must stay accurate
        pred = ref + rng.normal(size=40) * 5e2 if case != "constant_predictions" else np.full(40, 3.0)
        if case == "one_class_left":
            pred = np.r_[np.full(39, 2.0), 7.0]  # leaving the odd one out makes the predictions constant
    else:
        pred, ref = _binary(rng, 40, 0.75)
        if case == "one_class_left":
            pred = np.r_[np.zeros(39, dtype=int), 1]
        if case == "constant_predictions":
            pred = np.zeros(40, dtype=int)
    closed = {"mcc": item_pseudo._loo_mcc, "f1": item_pseudo._loo_f1, "pearson": item_pseudo._loo_pearson}[metric]
    expected = item_pseudo._loo_generic(METRICS[metric], pred, ref)
    np.testing.assert_allclose(closed(pred, ref), expected, atol=1e-9)


def test_unknown_metric_and_short_input_are_refused() -> None:
    with pytest.raises(ModelFitError, match="must be one of"):
        pseudo_values("bleu", np.zeros(3), np.zeros(3))
    with pytest.raises(ModelFitError, match="length >= 2"):
        pseudo_values("accuracy", np.zeros(1), np.zeros(1))


def _crossed(rng: np.random.Generator, s: int, i: int, sd_seed: float, sd_item: float, sd_res: float) -> np.ndarray:
    return (
        sd_seed * rng.standard_normal((s, 1)) + sd_item * rng.standard_normal((1, i)) + sd_res * rng.normal(size=(s, i))
    )


def test_item_variance_is_unbiased_and_its_interval_covers() -> None:
    """On a crossed Gaussian layout with known variances: mean of v_item is sigma_w^2 / I, and the interval built
    from the seed part (row means) plus the item part covers the mean 95% of the time."""
    rng = np.random.default_rng(2)
    s, i, sd_seed, sd_item, sd_res = 5, 200, 0.02, 0.1, 0.3
    estimates, covered = [], []
    for _ in range(2000):
        d = _crossed(rng, s, i, sd_seed, sd_item, sd_res)
        v_item, df_item = item_variance(d)
        v_seed = d.mean(axis=1).var(ddof=1) / s  # what the seed-level model estimates
        se = np.sqrt(v_seed + v_item)
        df = se**4 / (v_seed**2 / (s - 1) + (v_item**2 / df_item if np.isfinite(df_item) else 0.0))
        estimates.append(v_item)
        covered.append(abs(d.mean()) <= stats.t.ppf(0.975, df) * se)
    mc = np.std(estimates) / np.sqrt(len(estimates))
    assert abs(np.mean(estimates) - sd_item**2 / i) < 4 * mc
    assert 0.93 <= np.mean(covered) <= 0.97


def test_item_variance_is_zero_without_item_effects_most_of_the_time_and_needs_items() -> None:
    rng = np.random.default_rng(3)
    zeros = np.mean([item_variance(_crossed(rng, 5, 100, 0.1, 0.0, 0.3))[0] == 0.0 for _ in range(200)])
    assert zeros > 0.3  # truncated at 0 whenever MS_item < MS_res (about half the time under the null)
    with pytest.raises(ModelFitError, match="I >= 2"):
        item_variance(np.zeros((3, 1)))


@pytest.fixture(scope="module")
def item_study() -> object:
    return simulate_item_study(
        {1000: {0: 0.9, 2: 0.895, 4: 0.87}, 200: {0: 0.85, 2: 0.845, 4: 0.82}}, {1000: 0.003, 200: 0.01}, rng=4
    )


def test_analyze_puts_the_sequence_with_items_beside_the_seed_only_one(item_study: object) -> None:
    study = item_study
    result = analyze(study.results, items=study.items, margin=0.01, n_boot=50, uncertainty="seeds")  # type: ignore[attr-defined]
    table = result.tables["noninferiority_items"]
    seed_only = result.tables["noninferiority"]
    assert len(table) == len(seed_only) == 4 and (table["n_items"] == 436).all() and (table["n_pairs"] == 8).all()
    assert (table["se"] >= table["se_seed"]).all() and (table["lower"] <= table["lower_seed"] + 1e-12).all()
    np.testing.assert_allclose(table["se"] ** 2, table["se_seed"] ** 2 + table["se_item"] ** 2)
    # the seed-only columns are the seed-only sequence's
    merged = table.merge(seed_only, on=["task", "train_size", "frozen_layers"], suffixes=("", "_s"))
    np.testing.assert_allclose(merged["lower_seed"], merged["lower_s"])
    assert (merged["noninferior_seed"] == merged["noninferior_s"]).all()
    # with items the claim can only shrink: a depth claimed with items is claimed seed-only
    assert not (table["noninferior"] & ~table["noninferior_seed"]).any()
    assert result.settings["answer_uncertainty"] == "seeds"


def test_item_uncertainty_refuses_an_unscored_response(item_study: object) -> None:
    from freezestats.stats.items.uncertainty import run_pseudo_values

    with pytest.raises(ModelFitError, match="needs a response in"):
        run_pseudo_values(item_study.items, "wall_seconds", "accuracy")  # type: ignore[attr-defined]


def test_simulated_run_sd_of_the_reference_matches_its_setting() -> None:
    sds = []
    for rng in range(15):
        study = simulate_item_study({1000: {0: 0.9}}, {1000: 0.003}, seeds=8, rng=rng)
        sds.append(study.results["heldout"].std())
    assert 0.0022 < np.sqrt(np.mean(np.square(sds))) < 0.0038
    assert isinstance(study.items, pd.DataFrame) and study.items["trial"].nunique() == 8


def test_cli_analyze_reads_predictions_and_writes_the_items_table(item_study: object, tmp_path: Path) -> None:
    from freezestats.cli.main import main

    results, items = tmp_path / "results.csv", tmp_path / "predictions.parquet"
    item_study.results.to_csv(results, index=False)  # type: ignore[attr-defined]
    item_study.items.to_parquet(items)  # type: ignore[attr-defined]
    args = ["--results", str(results), "--predictions", str(items), "--uncertainty", "seeds"]
    code = main(["analyze", *args, "-o", str(tmp_path / "a")])
    assert code == 0
    assert len(pd.read_parquet(tmp_path / "a" / "noninferiority_items.parquet")) == 4
    assert main(["analyze", "--results", str(results), "--predictions", str(results), "-o", str(tmp_path / "b")]) != 0

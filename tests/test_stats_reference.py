"""Tests of freezestats.stats.descriptive.reference: the shipped blog appendix and the Welch comparison with it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t as student_t
from scipy.stats import ttest_ind_from_stats

from freezestats.exceptions import DataError, ModelFitError
from freezestats.stats.descriptive.reference import compare_with_reference, load_reference
from freezestats.stats.descriptive.variance import cell_summary

SHIPPED = Path(__file__).resolve().parents[1] / "data" / "reference" / "blog2020_roberta_base.csv"


def _runs(scores: dict[tuple[str, int, int], list[float]], metric: str = "accuracy") -> pd.DataFrame:
    """One grid row per run: ``scores[(task, train_size, frozen_layers)]`` lists best_dev by seed."""
    rows = []
    for (task, size, frozen), values in scores.items():
        for seed, value in enumerate(values, start=1):
            rows.append(
                {
                    "role": "grid",
                    "state": "complete",
                    "task": task,
                    "model": "roberta-base",
                    "train_size": size,
                    "frozen_layers": frozen,
                    "subset_draw": 0,
                    "seed": seed,
                    "metric": metric,
                    "best_dev": value,
                }
            )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------------
# load_reference
# --------------------------------------------------------------------------------------------------


def test_load_reference_reads_the_shipped_appendix_in_cell_summary_shape() -> None:
    ref = load_reference()
    raw = pd.read_csv(SHIPPED)
    assert len(ref) == len(raw) == 70
    assert list(ref.columns) == list(cell_summary(_runs({("sst2", 50, 0): [0.5, 0.6]})).columns)
    assert (ref["n"] == 5).all()
    assert sorted(ref["task"].unique()) == ["cola", "sst2"]
    assert sorted(ref["frozen_layers"].unique()) == [-1, 0, 2, 4, 8, 10, 12]
    assert sorted(ref["train_size"].unique()) == [50, 100, 200, 500, 1000]
    assert ref["train_size"].dtype == np.int64 and ref["mean"].dtype == np.float64
    row = ref.query("task == 'sst2' and train_size == 50 and frozen_layers == 4").iloc[0]
    assert (row["mean"], row["median"], row["std"], row["min"], row["max"]) == (0.711, 0.753, 0.1024, 0.557, 0.823)
    pd.testing.assert_frame_equal(load_reference(SHIPPED), ref)


def test_load_reference_rejects_bad_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"must be an existing CSV file, but .*nope.csv does not exist"):
        load_reference(tmp_path / "nope.csv")
    raw = pd.read_csv(SHIPPED)
    raw.drop(columns="median").to_csv(tmp_path / "a.csv", index=False)
    with pytest.raises(DataError, match=r"lacks \['median'\]"):
        load_reference(tmp_path / "a.csv")
    pd.concat([raw, raw.iloc[:1]]).to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(DataError, match=r"must appear once in .*b.csv, but \['sst2', 50, -1\] repeats"):
        load_reference(tmp_path / "b.csv")
    raw.assign(train_size=raw["train_size"].astype(float) + 0.5).to_csv(tmp_path / "c.csv", index=False)
    with pytest.raises(DataError, match=r"'train_size' of .*c.csv must hold integers, but row 0 has train_size=50.5"):
        load_reference(tmp_path / "c.csv")
    raw.assign(n=3).to_csv(tmp_path / "d.csv", index=False)
    assert (load_reference(tmp_path / "d.csv")["n"] == 3).all()


# --------------------------------------------------------------------------------------------------
# compare_with_reference
# --------------------------------------------------------------------------------------------------


def test_compare_welch_interval_matches_the_closed_form_and_scipy() -> None:
    ours_runs = [0.70, 0.74, 0.69, 0.77, 0.72, 0.75]
    table = _runs({("sst2", 50, 4): ours_runs, ("sst2", 100, 0): [0.86, 0.87, 0.88]})
    out = compare_with_reference(table)
    assert list(out.columns) == [
        "task",
        "train_size",
        "frozen_layers",
        "n",
        "mean",
        "median",
        "std",
        "min",
        "max",
        "ref_n",
        "ref_mean",
        "ref_median",
        "ref_std",
        "ref_min",
        "ref_max",
        "difference",
        "se",
        "df",
        "ci_low",
        "ci_high",
        "in_reference",
        "note",
    ]
    row = out.iloc[0]
    assert (row["task"], row["train_size"], row["frozen_layers"], row["n"]) == ("sst2", 50, 4, 6)
    assert (row["ref_mean"], row["ref_std"], row["ref_n"]) == (0.711, 0.1024, 5)
    m1, s1, n1 = float(np.mean(ours_runs)), float(np.std(ours_runs, ddof=1)), 6
    m2, s2, n2 = 0.711, 0.1024, 5
    v1, v2 = s1**2 / n1, s2**2 / n2
    se = math.sqrt(v1 + v2)
    df = (v1 + v2) ** 2 / (v1**2 / (n1 - 1) + v2**2 / (n2 - 1))  # Welch-Satterthwaite
    half = student_t.ppf(0.975, df) * se
    assert row["difference"] == pytest.approx(m1 - m2, abs=1e-12)
    assert row["se"] == pytest.approx(se, rel=1e-12) and row["df"] == pytest.approx(df, rel=1e-12)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((m1 - m2 - half, m1 - m2 + half), rel=1e-12)
    # Cross-check with scipy's Welch test from the same summaries: same t, and the p-value implied by our df.
    welch = ttest_ind_from_stats(m1, s1, n1, m2, s2, n2, equal_var=False)
    assert welch.statistic == pytest.approx(row["difference"] / row["se"], rel=1e-10)
    assert welch.pvalue == pytest.approx(2 * student_t.sf(abs(welch.statistic), row["df"]), rel=1e-8)
    assert bool(row["in_reference"]) and row["note"] == ""
    narrower = compare_with_reference(table, confidence=0.8).iloc[0]
    assert row["ci_low"] < narrower["ci_low"] < narrower["ci_high"] < row["ci_high"]


def test_compare_keeps_unmatched_cells_and_tasks_with_notes() -> None:
    table = pd.concat(
        [
            _runs({("sst2", 50, 0): [0.70, 0.75], ("sst2", 50, 3): [0.6, 0.65], ("sst2", 500, 12): [0.509] * 3}),
            _runs({("agreement", 200, 0): [0.7, 0.65]}),
            _runs({("cola", 50, 0): [0.1, 0.2]}, metric="mcc"),
        ],
        ignore_index=True,
    )
    out = compare_with_reference(table).set_index(["task", "train_size", "frozen_layers"])
    assert len(out) == 5
    missing_task = out.loc[("agreement", 200, 0)]
    assert not missing_task["in_reference"] and np.isnan(missing_task["ref_mean"]) and np.isnan(missing_task["ci_low"])
    assert missing_task["note"] == "task not in the reference (reference tasks: cola, sst2)"
    missing_cell = out.loc[("sst2", 50, 3)]  # a 6-layer model's depth 3 has no RoBERTa counterpart
    assert not missing_cell["in_reference"] and np.isnan(missing_cell["difference"])
    assert missing_cell["note"] == "no reference cell for this (task, train_size, frozen_layers)"
    other_metric = out.loc[("cola", 50, 0)]
    assert other_metric["in_reference"] and np.isnan(other_metric["difference"])
    assert other_metric["note"] == "not comparable: our metric is mcc, the reference reports accuracy"
    flat = out.loc[("sst2", 500, 12)]  # every run at the majority baseline, as in the blog
    assert flat["difference"] == pytest.approx(0.0) and np.isnan(flat["ci_low"])
    assert flat["note"] == "no spread on either side (both SDs are 0): no Welch interval"
    good = out.loc[("sst2", 50, 0)]
    assert good["note"] == "" and np.isfinite(good["ci_low"])


def test_compare_single_run_has_a_difference_but_no_interval() -> None:
    out = compare_with_reference(_runs({("sst2", 100, 0): [0.85]}))
    row = out.iloc[0]
    assert row["difference"] == pytest.approx(0.85 - 0.866)
    assert np.isnan(row["ci_low"]) and np.isnan(row["se"])
    assert row["note"] == "fewer than 2 of our runs: no standard deviation, no interval"


def test_compare_accepts_a_reference_frame_or_path_and_filters_tasks(tmp_path: Path) -> None:
    table = _runs({("sst2", 100, 0): [0.85, 0.87], ("cola", 100, 0): [0.7, 0.72]})
    custom = pd.DataFrame(
        {
            "task": ["sst2"],
            "train_size": [100],
            "frozen_layers": [0],
            "mean": [0.8],
            "median": [0.8],
            "std": [0.02],
            "min": [0.78],
            "max": [0.82],
            "n": [10],
        }
    )
    out = compare_with_reference(table, reference=custom, task="sst2")
    assert out["task"].tolist() == ["sst2"] and out["ref_n"].iloc[0] == 10
    custom.to_csv(tmp_path / "ref.csv", index=False)
    by_path = compare_with_reference(table, reference=str(tmp_path / "ref.csv"))
    assert by_path.set_index("task").loc["cola", "note"] == "task not in the reference (reference tasks: sst2)"
    with pytest.raises(DataError, match=r"the reference DataFrame lacks \['std'\]"):
        compare_with_reference(table, reference=custom.drop(columns="std"))
    with pytest.raises(ModelFitError, match=r"`reference` must be a DataFrame, a path or None, but got int"):
        compare_with_reference(table, reference=5)


def test_compare_without_any_matching_cell_is_an_error() -> None:
    table = _runs({("agreement", 200, 0): [0.7, 0.65], ("agreement", 200, 3): [0.5, 0.52]})
    with pytest.raises(
        ModelFitError,
        match=r"none does: ours have tasks \['agreement'\], sizes \[200\], depths \[0, 3\]; "
        r"the reference has tasks \['cola', 'sst2'\]",
    ):
        compare_with_reference(table)
    with pytest.raises(ModelFitError, match=r"at least one row, but it is empty"):
        compare_with_reference(table.iloc[:0])
    with pytest.raises(ModelFitError, match=r"response='accuracy'"):
        compare_with_reference(table, response="accuracy")

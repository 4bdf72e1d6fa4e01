"""Tests of freezestats.stats.failures: Wilson intervals by the closed form, the logistic fit by hand-written IRLS."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from freezestats.exceptions import ModelFitError
from freezestats.stats.failures import failure_model, failure_rates

SIZES = (50, 100, 200, 500, 1000)
DEPTHS = (-1, 0, 2, 4, 8, 10, 12)


def _runs(failed: dict[tuple[int, int], list[bool]], task: str = "sst2", n_layers: int = 12) -> pd.DataFrame:
    """One grid row per run: ``failed[(train_size, frozen_layers)]`` lists the runs' flags by seed."""
    rows = []
    for (size, frozen), flags in failed.items():
        for seed, flag in enumerate(flags, start=1):
            rows.append(
                {
                    "role": "grid",
                    "state": "complete",
                    "task": task,
                    "model": "roberta-base",
                    "n_layers": n_layers,
                    "train_size": size,
                    "frozen_layers": frozen,
                    "subset_draw": 0,
                    "seed": seed,
                    "best_dev": 0.509 if flag else 0.85,
                    "failed": bool(flag),
                }
            )
    return pd.DataFrame(rows)


def _simulated(seed: int = 1, runs: int = 5) -> pd.DataFrame:
    """Failures drawn from a known logistic model on the blog's grid (overlapping classes)."""
    rng = np.random.default_rng(seed)
    flags = {}
    for size in SIZES:
        for k in DEPTHS:
            s, f = math.log2(size) - math.log2(200), max(k, 0) / 12
            p = 1.0 / (1.0 + math.exp(-(-2.0 - 1.0 * s + 4.0 * f)))
            flags[(size, k)] = list(rng.random(runs) < p)
    return _runs(flags)


def _wilson(x: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson (1927) score interval, closed form."""
    z = norm.ppf(1 - (1 - confidence) / 2)
    p = x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


# --------------------------------------------------------------------------------------------------
# failure_rates
# --------------------------------------------------------------------------------------------------


def test_failure_rates_match_the_closed_form_wilson_interval() -> None:
    table = _runs(
        {
            (50, 12): [True] * 5,
            (50, 0): [True, False, False, True, False],
            (100, 0): [False] * 5,
            (100, 12): [True, False, False, False, False, False, False, False],
        }
    )
    out = failure_rates(table)
    assert list(out.columns) == ["task", "train_size", "frozen_layers", "n", "n_failed", "rate", "ci_low", "ci_high"]
    assert out[["train_size", "frozen_layers"]].values.tolist() == [[50, 0], [50, 12], [100, 0], [100, 12]]
    assert out["n"].tolist() == [5, 5, 5, 8]
    assert out["n_failed"].tolist() == [2, 5, 0, 1]
    for row in out.itertuples():
        low, high = _wilson(row.n_failed, row.n)
        assert row.rate == row.n_failed / row.n
        assert row.ci_low == pytest.approx(low, abs=1e-12)
        assert row.ci_high == pytest.approx(high, abs=1e-12)
    # 0 of 5: [0, 0.4345] (Brown, Cai & DasGupta 2001); the interval never collapses to a point.
    zero = out.iloc[2]
    assert zero["ci_low"] == pytest.approx(0.0, abs=1e-12) and zero["ci_high"] == pytest.approx(0.43448, abs=1e-5)
    assert out.iloc[1]["ci_high"] == pytest.approx(1.0) and out.iloc[1]["ci_low"] == pytest.approx(
        1 - 0.43448, abs=1e-5
    )


def test_failure_rates_confidence_tasks_and_missing_flags() -> None:
    table = pd.concat(
        [_runs({(50, 0): [True, False, False]}, task="sst2"), _runs({(50, 0): [True, True, False]}, task="cola")]
    )
    table["failed"] = table["failed"].astype(object)
    table.iloc[0, table.columns.get_loc("failed")] = None  # unknown flag: dropped, not counted
    out = failure_rates(table, confidence=0.9)
    assert out["task"].tolist() == ["cola", "sst2"]
    assert out["n"].tolist() == [3, 2] and out["n_failed"].tolist() == [2, 0]
    low, high = _wilson(2, 3, confidence=0.9)
    assert (out["ci_low"].iloc[0], out["ci_high"].iloc[0]) == pytest.approx((low, high))
    assert failure_rates(table, task="cola")["task"].tolist() == ["cola"]


def test_failure_rates_accepts_csv_style_flags_and_rejects_others() -> None:
    table = _runs({(50, 0): [True, False, False, True]})
    as_text = table.assign(failed=["True", "false", "0", "1"])
    assert failure_rates(as_text)["n_failed"].tolist() == [2]
    with pytest.raises(ModelFitError, match=r"'failed' must be boolean \(True/False\), but got failed='maybe'"):
        failure_rates(table.assign(failed=["maybe", "True", "False", "True"]))
    with pytest.raises(ModelFitError, match=r"must be known for some grid run"):
        failure_rates(table.assign(failed=None))
    with pytest.raises(ModelFitError, match=r"must have the columns \['failed'\]"):
        failure_rates(table.drop(columns="failed"))
    with pytest.raises(ModelFitError, match=r"at least one row, but it is empty"):
        failure_rates(table.iloc[:0])
    with pytest.raises(ModelFitError, match=r"`confidence` must be in \(0, 1\), but got confidence=95"):
        failure_rates(table, confidence=95)


# --------------------------------------------------------------------------------------------------
# failure_model
# --------------------------------------------------------------------------------------------------


def _irls(x: np.ndarray, y: np.ndarray, iterations: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Logistic regression by Newton-Raphson (McCullagh & Nelder 1989, Sec. 4.4): estimates and SEs."""
    beta = np.zeros(x.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-x @ beta))
        information = x.T @ (x * (p * (1 - p))[:, None])
        step = np.linalg.solve(information, x.T @ (y - p))
        beta = beta + step
        if np.max(np.abs(step)) < 1e-12:
            break
    p = 1.0 / (1.0 + np.exp(-x @ beta))
    information = x.T @ (x * (p * (1 - p))[:, None])
    return beta, np.sqrt(np.diag(np.linalg.inv(information)))


def test_failure_model_matches_hand_written_newton_raphson() -> None:
    table = _simulated()
    out = failure_model(table)
    assert list(out.columns) == [
        "term",
        "estimate",
        "se",
        "ci_low",
        "ci_high",
        "z",
        "p_val",
        "odds_ratio",
        "at_train_size",
        "warning",
    ]
    assert out["term"].tolist() == [
        "intercept",
        "log2_train_size",
        "frozen_fraction",
        "log2_train_size:frozen_fraction",
    ]
    centre = np.mean(np.log2(SIZES))
    s = np.log2(table["train_size"].to_numpy(float)) - centre
    f = np.maximum(table["frozen_layers"].to_numpy(float), 0) / 12
    x = np.column_stack([np.ones(len(table)), s, f, s * f])
    beta, se = _irls(x, table["failed"].to_numpy(float))
    assert out["estimate"].to_numpy() == pytest.approx(beta, abs=1e-7)
    assert out["se"].to_numpy() == pytest.approx(se, rel=1e-6)
    z = beta / se
    assert out["z"].to_numpy() == pytest.approx(z, rel=1e-6)
    assert out["p_val"].to_numpy() == pytest.approx(2 * norm.sf(np.abs(z)), rel=1e-5)
    assert out["ci_low"].to_numpy() == pytest.approx(beta - norm.ppf(0.975) * se, abs=1e-6)
    assert out["ci_high"].to_numpy() == pytest.approx(beta + norm.ppf(0.975) * se, abs=1e-6)
    assert out["odds_ratio"].to_numpy() == pytest.approx(np.exp(beta), rel=1e-7)
    assert out["at_train_size"].to_numpy() == pytest.approx(np.full(4, 2**centre))  # geometric mean: 218.67
    assert out["at_train_size"].iloc[0] == pytest.approx((50 * 100 * 200 * 500 * 1000) ** 0.2)
    n_failed = int(table["failed"].sum())
    assert min(n_failed, 175 - n_failed) >= 40 and (out["warning"] == "").all()  # >= 10 events per coefficient


def test_failure_model_warns_about_few_events_per_coefficient() -> None:
    table = _simulated(seed=1, runs=2)
    n_failed = int(table["failed"].sum())
    events = min(n_failed, len(table) - n_failed)
    assert events < 40
    warning = failure_model(table)["warning"]
    assert (warning == warning.iloc[0]).all()
    assert warning.iloc[0].startswith(f"only {events} ")
    assert "fewer than 10 per coefficient): Wald intervals and p-values may be inaccurate" in warning.iloc[0]


def test_failure_model_recovers_the_generating_direction_and_drops_the_caveat_with_many_runs() -> None:
    out = failure_model(_simulated(seed=7, runs=40)).set_index("term")
    assert out.loc["frozen_fraction", "estimate"] == pytest.approx(4.0, abs=1.0)
    assert out.loc["log2_train_size", "estimate"] == pytest.approx(-1.0, abs=0.4)
    assert out.loc["frozen_fraction", "ci_low"] > 0
    assert (out["warning"] == "").all()


def test_failure_model_embeddings_only_counts_as_zero_frozen_blocks() -> None:
    table = _simulated(seed=2)
    relabelled = table.assign(frozen_layers=table["frozen_layers"].replace(-1, 0))
    assert failure_model(table)["estimate"].to_numpy() == pytest.approx(failure_model(relabelled)["estimate"])


def test_failure_model_reports_complete_separation() -> None:
    # Every fully frozen run collapses, no other run does: a perfect split on frozen_fraction.
    flags = {(size, k): [k == 12] * 5 for size in SIZES for k in DEPTHS}
    table = _runs(flags)
    with pytest.raises(ModelFitError, match=r"found complete separation in task 'sst2'.*on_separation='nan'"):
        failure_model(table)
    out = failure_model(table, on_separation="nan")
    assert len(out) == 4
    assert out[["estimate", "se", "ci_low", "ci_high", "z", "p_val", "odds_ratio"]].isna().all().all()
    assert out["warning"].str.startswith("complete separation in task 'sst2'").all()


def test_failure_model_reports_quasi_complete_separation() -> None:
    # 12 frozen: all fail; 10 frozen: mixed; fewer: healthy. The direction (frozen_fraction - 10/12) splits the
    # runs up to the 10-frozen cells, which lie on the boundary with both outcomes (so not completely).
    flags = {(size, k): [k == 12] * 5 for size in SIZES for k in DEPTHS}
    for size in SIZES:
        flags[(size, 10)] = [True, False, False, True, False]
    with pytest.raises(ModelFitError, match=r"found quasi-complete separation"):
        failure_model(_runs(flags))


def test_failure_model_needs_both_outcomes_and_a_two_way_design() -> None:
    none_failed = _runs({(size, k): [False] * 5 for size in SIZES for k in DEPTHS})
    with pytest.raises(ModelFitError, match=r"needs both failed and healthy runs, but no run failed \(0 of 175"):
        failure_model(none_failed)
    all_failed = none_failed.assign(failed=True)
    with pytest.raises(ModelFitError, match=r"but every run failed \(175 of 175 grid runs of task 'sst2'\)"):
        failure_model(all_failed)
    one_size = _simulated(seed=3)
    one_size = one_size[one_size["train_size"] == 100]
    one_size = one_size.assign(failed=[i % 3 == 0 for i in range(len(one_size))])
    with pytest.raises(ModelFitError, match=r"at least 2 distinct training sizes and 2 distinct frozen fractions"):
        failure_model(one_size)


def test_failure_model_input_errors() -> None:
    table = pd.concat([_simulated(seed=4), _simulated(seed=5).assign(task="cola")], ignore_index=True)
    with pytest.raises(ModelFitError, match=r"one task at a time, but the table has 2 tasks \['cola', 'sst2'\]"):
        failure_model(table)
    assert len(failure_model(table, task="cola")) == 4
    with pytest.raises(ModelFitError, match=r"must have the columns \['n_layers'\]"):
        failure_model(table.drop(columns="n_layers"), task="sst2")
    with pytest.raises(ModelFitError, match=r"`on_separation` must be 'raise' or 'nan', but got on_separation='warn'"):
        failure_model(table, task="sst2", on_separation="warn")
    with pytest.raises(ModelFitError, match=r"`n_layers` must be > 0, but got n_layers=0"):
        failure_model(table.assign(n_layers=0), task="sst2")

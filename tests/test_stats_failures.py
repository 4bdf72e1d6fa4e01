"""Tests of freezestats.stats.failures.rates: Wilson intervals by the closed form, the ML logistic fit by hand-written
IRLS, Firth's fit by its estimating equations and known closed forms, and the per-checkpoint failure rules."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom, binomtest, chi2, norm

from freezestats.exceptions import ModelFitError
from freezestats.stats.failures.firth import _firth_hessian, _firth_point, fit_firth
from freezestats.stats.failures.rates import failure_model, failure_rates, flag_failures
from freezestats.stats.failures.summary import failure_summary

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


def test_failure_model_ml_matches_hand_written_newton_raphson() -> None:
    table = _simulated()
    out = failure_model(table, method="ml")
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
        "method",
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
    assert (out["method"] == "ml").all()
    n_failed = int(table["failed"].sum())
    assert min(n_failed, 175 - n_failed) >= 40 and (out["warning"] == "").all()  # >= 10 events per coefficient


def test_failure_model_warns_about_few_events_per_coefficient() -> None:
    table = _simulated(seed=1, runs=2)
    n_failed = int(table["failed"].sum())
    events = min(n_failed, len(table) - n_failed)
    assert events < 40
    warning = failure_model(table, method="ml")["warning"]
    assert (warning == warning.iloc[0]).all()
    assert warning.iloc[0].startswith(f"only {events} ")
    assert "fewer than 10 per coefficient): Wald intervals and p-values may be inaccurate" in warning.iloc[0]
    assert (
        "fewer than 10 per coefficient): intervals and p-values may be inaccurate" in failure_model(table)["warning"][0]
    )


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


def test_failure_model_ml_reports_complete_separation() -> None:
    # Every fully frozen run collapses, no other run does: a perfect split on frozen_fraction.
    flags = {(size, k): [k == 12] * 5 for size in SIZES for k in DEPTHS}
    table = _runs(flags)
    with pytest.raises(ModelFitError, match=r"found complete separation in task 'sst2'.*on_separation='nan'"):
        failure_model(table, method="ml")
    out = failure_model(table, on_separation="nan", method="ml")
    assert len(out) == 4
    assert out[["estimate", "se", "ci_low", "ci_high", "z", "p_val", "odds_ratio"]].isna().all().all()
    assert out["warning"].str.startswith("complete separation in task 'sst2'").all()


def test_failure_model_ml_reports_quasi_complete_separation() -> None:
    # 12 frozen: all fail; 10 frozen: mixed; fewer: healthy. The direction (frozen_fraction - 10/12) splits the
    # runs up to the 10-frozen cells, which lie on the boundary with both outcomes (so not completely).
    flags = {(size, k): [k == 12] * 5 for size in SIZES for k in DEPTHS}
    for size in SIZES:
        flags[(size, 10)] = [True, False, False, True, False]
    with pytest.raises(ModelFitError, match=r"found quasi-complete separation"):
        failure_model(_runs(flags), method="ml")


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
    with pytest.raises(ModelFitError, match=r"`method` must be 'firth' or 'ml', but got method='exact'"):
        failure_model(table, task="sst2", method="exact")


# --------------------------------------------------------------------------------------------------
# Firth's penalised likelihood
# --------------------------------------------------------------------------------------------------


def _design(table: pd.DataFrame) -> np.ndarray:
    s = np.log2(table["train_size"].to_numpy(float)) - np.mean(np.log2(np.unique(table["train_size"])))
    f = np.maximum(table["frozen_layers"].to_numpy(float), 0) / 12
    return np.column_stack([np.ones(len(table)), s, f, s * f])


def _modified_score(x: np.ndarray, y: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Firth's U*(beta) = X'(y - p + h (1/2 - p)), with h the diagonal of W^1/2 X (X'WX)^-1 X' W^1/2, spelt out."""
    p = 1.0 / (1.0 + np.exp(-x @ beta))
    root_w = np.diag(np.sqrt(p * (1 - p)))
    xw = root_w @ x
    hat = np.diag(xw @ np.linalg.inv(xw.T @ xw) @ xw.T)
    return x.T @ (y - p + hat * (0.5 - p))


def _penalised_loglik(x: np.ndarray, y: np.ndarray, beta: np.ndarray) -> float:
    eta = x @ beta
    p = 1.0 / (1.0 + np.exp(-eta))
    information = x.T @ (x * (p * (1 - p))[:, None])
    return float(np.sum(y * eta - np.log1p(np.exp(eta))) + 0.5 * np.linalg.slogdet(information)[1])


def test_firth_two_by_two_table_equals_the_haldane_correction() -> None:
    # For one binary covariate Firth's estimates are the log odds after adding 1/2 to every cell (Firth 1993);
    # with 0 events in one group the ML estimate is -inf, Firth's stays finite.
    for events_0, events_1 in ((3, 12), (0, 12), (0, 20)):
        x = np.column_stack([np.ones(40), np.r_[np.zeros(20), np.ones(20)]])
        y = np.r_[np.ones(events_0), np.zeros(20 - events_0), np.ones(events_1), np.zeros(20 - events_1)]
        fit = fit_firth(x, y)
        assert fit.converged
        a, b = events_0 + 0.5, 20 - events_0 + 0.5
        c, d = events_1 + 0.5, 20 - events_1 + 0.5
        assert fit.beta == pytest.approx([math.log(a / b), math.log(c * b / (d * a))], abs=1e-9)


def test_firth_intercept_only_is_the_add_a_half_proportion() -> None:
    y = np.r_[np.ones(2), np.zeros(23)]
    fit = fit_firth(np.ones((25, 1)), y)
    assert 1 / (1 + math.exp(-fit.beta[0])) == pytest.approx(2.5 / 26, abs=1e-10)


@pytest.mark.parametrize("separated", [False, True])
def test_firth_solves_its_estimating_equations_and_has_consistent_derivatives(separated: bool) -> None:
    table = _runs({(size, k): [k == 12] * 5 for size in SIZES for k in DEPTHS}) if separated else _simulated()
    x, y = _design(table), table["failed"].to_numpy(float)
    fit = fit_firth(x, y)
    assert fit.converged and np.all(np.isfinite(fit.beta))
    assert np.max(np.abs(_modified_score(x, y, fit.beta))) < 1e-7
    # The modified score is the gradient of the penalised log-likelihood, and the Hessian its derivative.
    beta = fit.beta + 0.1
    point = _firth_point(x, y, beta)
    eps = 1e-6
    gradient = [
        (_penalised_loglik(x, y, beta + eps * e) - _penalised_loglik(x, y, beta - eps * e)) / (2 * eps)
        for e in np.eye(4)
    ]
    assert point.score == pytest.approx(gradient, rel=1e-5, abs=1e-6)
    assert point.penalised == pytest.approx(_penalised_loglik(x, y, beta), rel=1e-12)
    jacobian = np.column_stack(
        [
            (_firth_point(x, y, beta + eps * e).score - _firth_point(x, y, beta - eps * e).score) / (2 * eps)
            for e in np.eye(4)
        ]
    )
    assert _firth_hessian(x, point) == pytest.approx(jacobian, rel=1e-4, abs=1e-5)


def test_firth_equals_maximum_likelihood_without_separation_and_many_runs() -> None:
    rng = np.random.default_rng(11)
    n = 20_000
    x = np.column_stack([np.ones(n), rng.normal(size=n), rng.random(n), rng.normal(size=n) * rng.random(n)])
    y = (rng.random(n) < 1 / (1 + np.exp(-(x @ np.array([-1.0, -0.8, 2.0, 0.5]))))).astype(float)
    beta_ml, _ = _irls(x, y)
    assert fit_firth(x, y).beta == pytest.approx(beta_ml, abs=1e-2)


def test_failure_model_firth_is_finite_under_separation_with_profile_intervals() -> None:
    flags = {(size, k): [k == 12] * 5 for size in SIZES for k in DEPTHS}
    table = _runs(flags)
    out = failure_model(table).set_index("term")
    assert (out["method"] == "firth").all()
    assert out["warning"].str.startswith("complete separation in task 'sst2': maximum-likelihood estimates").all()
    assert np.isfinite(out[["estimate", "se", "z", "p_val"]].to_numpy()).all()
    assert out.loc["frozen_fraction", "ci_low"] > 0 and np.isfinite(out.loc["frozen_fraction", "ci_low"])
    # The interval bounds are where the profile penalised likelihood has dropped by chi2(1, 0.95) / 2, and the
    # p value is the penalised likelihood-ratio test of the coefficient = 0.
    x, y = _design(table), table["failed"].to_numpy(float)
    fit = fit_firth(x, y)
    crit = chi2.ppf(0.95, 1)
    for j, term in enumerate(out.index):
        for bound in ("ci_low", "ci_high"):
            profile = fit_firth(x, y, fixed={j: out.loc[term, bound]}, start=fit.beta).penalised_loglik
            assert 2 * (fit.penalised_loglik - profile) == pytest.approx(crit, abs=1e-4)
        at_zero = fit_firth(x, y, fixed={j: 0.0}, start=fit.beta).penalised_loglik
        assert out.loc[term, "p_val"] == pytest.approx(chi2.sf(2 * (fit.penalised_loglik - at_zero), 1), rel=1e-6)
    assert out["estimate"].to_numpy() == pytest.approx(fit.beta)
    assert out["se"].to_numpy() == pytest.approx(np.sqrt(np.diag(fit.cov)))
    # quasi-complete separation: also finite
    for size in SIZES:
        flags[(size, 10)] = [True, False, False, True, False]
    quasi = failure_model(_runs(flags))
    assert quasi["warning"].str.startswith("quasi-complete separation").all()
    assert np.isfinite(quasi["estimate"]).all()


def test_failure_model_firth_is_close_to_ml_on_overlapping_data() -> None:
    table = _simulated(seed=7, runs=40)
    firth, ml = failure_model(table), failure_model(table, method="ml")
    assert firth["estimate"].to_numpy() == pytest.approx(ml["estimate"].to_numpy(), abs=0.1)
    assert (firth["ci_low"] < firth["estimate"]).all() and (firth["estimate"] < firth["ci_high"]).all()
    assert (firth["warning"] == "").all()


# --------------------------------------------------------------------------------------------------
# flag_failures
# --------------------------------------------------------------------------------------------------

N_EVAL = 872
MAJORITY = 444 / N_EVAL


def _critical_count(n: int, rate: float, alpha: float = 0.05) -> int:
    """Smallest number of correct items whose exact one-sided p value P(X >= k) is below alpha."""
    return next(k for k in range(n + 1) if binom.sf(k - 1, n, rate) < alpha)


def _counts(correct: list[int | None], **columns: object) -> pd.DataFrame:
    base = {
        "n_eval": N_EVAL,
        "n_eval_heldout": 436,
        "majority_baseline": MAJORITY,
        "metric": "accuracy",
        "n_correct": correct,
        "n_correct_best": correct,
        "n_correct_heldout": [None if c is None else c // 2 for c in correct],
    }
    base.update(columns)
    return pd.DataFrame(base, index=[10 * i for i in range(len(correct))])


def test_binomial_rule_at_the_majority_rate_and_one_item_either_side_of_the_critical_count() -> None:
    k = _critical_count(N_EVAL, MAJORITY)
    assert binomtest(k, N_EVAL, MAJORITY, alternative="greater").pvalue < 0.05
    assert binomtest(k - 1, N_EVAL, MAJORITY, alternative="greater").pvalue >= 0.05
    table = _counts([444, 445, k - 1, k, k + 1, None])
    flags = flag_failures(table, checkpoint="best")
    assert flags.name == "failed_best" and str(flags.dtype) == "boolean"
    assert flags.index.equals(table.index)
    assert flags.iloc[:5].tolist() == [True, True, True, False, False]  # exactly at the rate fails; so does +1 item
    assert flags.isna().tolist() == [False] * 5 + [True]
    assert flag_failures(table, checkpoint="final").iloc[:5].tolist() == [True, True, True, False, False]
    # a stricter alpha moves the threshold up
    strict = flag_failures(_counts([k, _critical_count(N_EVAL, MAJORITY, 0.01)]), alpha=0.01)
    assert strict.tolist() == [True, False]


def test_binomial_rule_uses_the_heldout_counts_on_the_score_half() -> None:
    k = _critical_count(436, MAJORITY)
    table = _counts([0, 0], n_correct_heldout=[k - 1, k], n_correct_best=[800, 800])
    assert flag_failures(table, checkpoint="heldout").tolist() == [True, False]
    assert flag_failures(table, checkpoint="best").tolist() == [False, False]


def test_binomial_rule_needs_an_accuracy_majority_rate() -> None:
    table = _counts([500, 600], metric="mcc", majority_baseline=0.0)
    with pytest.raises(ModelFitError, match=r"majority_baseline of metric='mcc' rows is that metric's score"):
        flag_failures(table)
    rate = 721 / 1043
    k = _critical_count(N_EVAL, rate)
    flags = flag_failures(_counts([k - 1, k], metric="mcc", majority_baseline=0.0), majority_rate=rate)
    assert flags.tolist() == [True, False]


def test_dominant_class_rule_at_exactly_the_share() -> None:
    shares = [836 / 880, 835 / 880, 837 / 880, 1.0, 0.5, None]
    table = pd.DataFrame({"top_class_share_best": shares, "top_class_share_final": [0.5] * 6})
    flags = flag_failures(table, rule="dominant_class")
    assert 836 / 880 == 0.95
    assert flags.iloc[:5].tolist() == [True, False, True, True, False]
    assert pd.isna(flags.iloc[5])
    assert not flag_failures(table, checkpoint="final", rule="dominant_class").any()
    assert flag_failures(table, rule="dominant_class", dominant_share=0.5).iloc[:5].all()


def test_flag_failures_input_errors() -> None:
    table = _counts([500])
    with pytest.raises(ModelFitError, match=r"`checkpoint` must be one of \['best', 'heldout', 'final'\]"):
        flag_failures(table, checkpoint="last")
    with pytest.raises(ModelFitError, match=r"`rule` must be 'binomial' or 'dominant_class', but got rule='x'"):
        flag_failures(table, rule="x")
    with pytest.raises(ModelFitError, match=r"`alpha` must be in \(0, 1\), but got alpha=1.5"):
        flag_failures(table, alpha=1.5)
    with pytest.raises(ModelFitError, match=r"`dominant_share` must be in \(0, 1\], but got dominant_share=0"):
        flag_failures(table, rule="dominant_class", dominant_share=0)
    with pytest.raises(ModelFitError, match=r"must have the columns \['top_class_share_best'\]"):
        flag_failures(table, rule="dominant_class")
    with pytest.raises(ModelFitError, match=r"must be a whole number of correct items"):
        flag_failures(_counts([900]))
    with pytest.raises(ModelFitError, match=r"must be an accuracy in \[0, 1\], but got 1.5"):
        flag_failures(table, majority_rate=1.5)
    with pytest.raises(ModelFitError, match=r"`table` must be a pandas DataFrame"):
        flag_failures([1, 2])


# --------------------------------------------------------------------------------------------------
# failure_summary
# --------------------------------------------------------------------------------------------------


def test_failure_summary_counts_wilson_and_means_with_and_without_failures() -> None:
    table = _runs({(100, 0): [True, False, False, False, False], (100, 4): [True, True, True, True, True]})
    table["best_dev"] = [0.5, 0.8, 0.82, 0.84, 0.86, 0.5, 0.51, 0.49, 0.5, 0.5]
    table.index = table.index + 100
    flags = pd.Series([True, False, False, False, False, True, True, True, True, pd.NA], index=table.index)
    out = failure_summary(table, flags.astype("boolean"))
    assert list(out.columns) == [
        "task",
        "train_size",
        "frozen_layers",
        "n",
        "n_failed",
        "p_fail",
        "ci_low",
        "ci_high",
        "mean_healthy",
        "mean_all",
    ]
    first, second = out.iloc[0], out.iloc[1]
    assert (first["n"], first["n_failed"], second["n"], second["n_failed"]) == (5, 1, 4, 4)
    assert first["p_fail"] == pytest.approx(0.2)
    assert (first["ci_low"], first["ci_high"]) == pytest.approx(_wilson(1, 5))
    assert (second["ci_low"], second["ci_high"]) == pytest.approx(_wilson(4, 4))
    assert first["mean_healthy"] == pytest.approx(0.83)
    assert first["mean_all"] == pytest.approx(np.mean([0.5, 0.8, 0.82, 0.84, 0.86]))
    assert math.isnan(second["mean_healthy"])
    assert second["mean_all"] == pytest.approx(0.5)
    by_position = failure_summary(table, flags.to_numpy())
    pd.testing.assert_frame_equal(by_position, out)


def test_failure_summary_input_errors() -> None:
    table = _runs({(100, 0): [True, False, False]})
    with pytest.raises(ModelFitError, match=r"one flag per row of `table` \(3 rows\), but got shape \(2,\)"):
        failure_summary(table, [True, False])
    with pytest.raises(ModelFitError, match=r"some rows of the table are missing from its index"):
        failure_summary(table, pd.Series([True, False, True], index=[5, 6, 7]))
    with pytest.raises(ModelFitError, match=r"`failed` must be boolean \(True/False\), but got failed='maybe'"):
        failure_summary(table, ["maybe", True, False])
    with pytest.raises(ModelFitError, match=r"`response` must name a per-run score column"):
        failure_summary(table, [True, False, True], response="accuracy")

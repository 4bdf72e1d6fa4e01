"""Tests of freezestats.stats.inference.noninferiority: exact values on a hand-made fit, the fixed sequence's stopping
rule, Bonferroni across sizes, the baseline gate, and a small simulation of the error rates (bench/error_rates.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import patsy
import pytest
from _scripts import load_script
from scipy import stats

from freezestats.exceptions import ModelFitError
from freezestats.stats import contrasts_vs_reference, equivalence_tests, fit_mixed, simulate_results
from freezestats.stats.inference.noninferiority import (
    default_margin,
    noninferiority_answer,
    noninferiority_sequence,
    reference_beats_baseline,
)

BENCH = Path(__file__).resolve().parents[1] / "bench" / "error_rates.py"


class CellFit:
    """A fit-like object with chosen cell means, independent cell variances and one df for every contrast.

    It implements :class:`freezestats.stats.FixedEffectsFit` with the models' treatment coding, so a contrast
    between two cells has estimate ``mean_k - mean_0``, variance ``var_k + var_0`` and the given df exactly.
    """

    response = "heldout"
    task = "sst2"
    df_method = "fixed"

    def __init__(self, means: dict[tuple[int, int], float], variances: dict[tuple[int, int], float], df: float):
        frozen = sorted({k for k, _ in means}, key=lambda k: (k != 0, k))
        self.frozen_levels = tuple(frozen)
        self.train_sizes = tuple(sorted({n for _, n in means}))
        cells = [(k, n) for n in self.train_sizes for k in self.frozen_levels]
        grid = pd.DataFrame(
            {
                "frozen_layers": pd.Categorical([k for k, _ in cells], categories=list(self.frozen_levels)),
                "train_size": pd.Categorical([n for _, n in cells], categories=list(self.train_sizes)),
            }
        )
        x = patsy.dmatrix("frozen_layers * train_size", grid)
        self.design_info = x.design_info
        inverse = np.linalg.inv(np.asarray(x))
        self.params = inverse @ np.array([means[c] for c in cells])
        self.cov_params = inverse @ np.diag([variances[c] for c in cells]) @ inverse.T
        self._df = float(df)

    def contrast_df(self, contrasts: np.ndarray) -> np.ndarray:
        return np.full(np.atleast_2d(contrasts).shape[0], self._df)


def _cell_fit(
    costs: dict[int, float], sizes=(200, 1000), full: float = 0.9, var: float = 0.004**2, df: float = 20.0
) -> CellFit:
    means = {(k, n): full - costs.get(k, 0.0) for n in sizes for k in (0, *costs)}
    return CellFit(means, dict.fromkeys(means, var), df)


COLUMNS = [
    "train_size",
    "frozen_layers",
    "reference",
    "estimate",
    "se",
    "df",
    "lower",
    "margin",
    "t",
    "p_val",
    "tested",
    "noninferior",
    "alpha",
    "family",
]


def test_lower_bound_and_p_value_are_the_one_sided_t_quantities() -> None:
    fit = _cell_fit({-1: 0.001, 2: 0.004, 4: 0.03}, var=0.002**2)
    out = noninferiority_sequence(fit, margin=0.01)
    assert list(out.columns) == COLUMNS
    assert out["train_size"].tolist() == [200] * 3 + [1000] * 3
    assert out["frozen_layers"].tolist() == [-1, 2, 4] * 2  # the embeddings-only freeze is the shallowest
    se = math.sqrt(2) * 0.002
    assert out["estimate"].to_numpy() == pytest.approx([-0.001, -0.004, -0.03] * 2)
    assert out["se"].to_numpy() == pytest.approx(np.full(6, se))
    assert out["df"].to_numpy() == pytest.approx(np.full(6, 20.0))
    assert out["lower"].to_numpy() == pytest.approx(out["estimate"] - stats.t.ppf(0.95, 20) * se)
    assert out["t"].to_numpy() == pytest.approx((out["estimate"] + 0.01) / se)
    assert out["p_val"].to_numpy() == pytest.approx(stats.t.sf((out["estimate"] + 0.01) / se, 20))
    assert ((out["lower"] > -0.01) == (out["p_val"] < 0.05)).all()
    assert out["noninferior"].tolist() == [True, True, False] * 2
    assert out["tested"].all()
    assert (out["alpha"] == 0.05).all() and (out["margin"] == 0.01).all() and (out["reference"] == 0).all()
    assert out["family"].iloc[0] == "fixed sequence within each train size, each test at alpha=0.05"


def test_sequence_stops_at_the_first_failure_even_when_a_deeper_depth_would_pass() -> None:
    # frozen 2 costs 3 points, frozen 4 and 6 nothing: 4 and 6 pass their own tests but are never reached.
    fit = _cell_fit({-1: 0.0, 2: 0.03, 4: 0.0, 6: 0.0}, sizes=(500,), var=0.001**2)
    out = noninferiority_sequence(fit, margin=0.01).set_index("frozen_layers")
    assert out["tested"].tolist() == [True, True, False, False]
    assert out["noninferior"].tolist() == [True, False, False, False]
    assert (out.loc[[4, 6], "p_val"] < 0.001).all()
    answer = noninferiority_answer(out.reset_index(), None)
    assert answer["deepest_noninferior"].tolist() == [-1]
    assert answer["statement"].iloc[0] == (
        "freezing the embeddings only is non-inferior to full fine-tuning within 1 point (margin 0.01) at n = 500"
    )


def test_adjust_across_sizes_runs_each_sequence_at_alpha_over_the_number_of_sizes() -> None:
    se = math.sqrt(2) * 0.004
    # an estimate whose one-sided p value lies between 0.025 and 0.05: claimed unadjusted, not with Bonferroni
    cost = 0.01 - stats.t.ppf(1 - 0.035, 20) * se
    fit = _cell_fit({2: cost, 4: 0.0}, sizes=(200, 1000))
    plain = noninferiority_sequence(fit, margin=0.01)
    adjusted = noninferiority_sequence(fit, margin=0.01, adjust_across="sizes")
    assert plain["p_val"].iloc[0] == pytest.approx(0.035)
    assert plain["noninferior"].tolist() == [True, True, True, True]
    assert (adjusted["alpha"] == 0.025).all()
    assert adjusted["noninferior"].tolist() == [False, False, False, False]
    assert adjusted["tested"].tolist() == [True, False, True, False]
    assert adjusted["lower"].to_numpy() == pytest.approx(adjusted["estimate"] - stats.t.ppf(0.975, 20) * se)
    assert adjusted["family"].iloc[0] == (
        "fixed sequence within each train size, Bonferroni over 2 sizes: each test at alpha/2=0.025"
    )


def test_answer_statements_and_the_baseline_gate() -> None:
    fit = _cell_fit({2: 0.0, 4: 0.002, 6: 0.05}, sizes=(50, 1000), full=0.52, var=0.003**2)
    table = noninferiority_sequence(fit, margin=0.01)
    passed = reference_beats_baseline(fit, 0.509)
    assert list(passed.columns) == [
        "train_size",
        "reference",
        "estimate",
        "se",
        "df",
        "baseline",
        "lower",
        "t",
        "p_val",
        "beats_baseline",
        "alpha",
    ]
    t_stat = (0.52 - 0.509) / 0.003
    assert passed["t"].to_numpy() == pytest.approx([t_stat, t_stat])
    assert passed["p_val"].to_numpy() == pytest.approx(stats.t.sf(t_stat, 20) * np.ones(2))
    assert passed["lower"].to_numpy() == pytest.approx(0.52 - stats.t.ppf(0.95, 20) * 0.003 * np.ones(2))
    assert passed["beats_baseline"].all()
    answer = noninferiority_answer(table, passed)
    assert list(answer.columns) == ["train_size", "deepest_noninferior", "margin", "beats_baseline", "statement"]
    assert answer["deepest_noninferior"].tolist() == [4, 4]
    assert answer["statement"].iloc[1] == (
        "freezing up to 4 layers is non-inferior to full fine-tuning within 1 point (margin 0.01) at n = 1000"
    )
    # the same differences, but the full model is not shown to beat the majority baseline at n = 50
    failed = reference_beats_baseline(fit, {50: 0.518, 1000: 0.40})
    assert failed["beats_baseline"].tolist() == [False, True]
    flipped = noninferiority_answer(table, failed)
    assert flipped["deepest_noninferior"].tolist() == [None, 4]
    assert flipped["beats_baseline"].tolist() == [False, True]
    statement = flipped["statement"].iloc[0]
    assert statement.startswith("full fine-tuning was not shown to beat the majority baseline (mean 0.5200 vs baseline")
    assert "0.5180, one-sided p = " in statement
    assert statement.endswith(") at n = 50; no cost is stated")
    assert "non-inferior" not in statement


def test_answer_when_no_depth_is_shown_noninferior() -> None:
    fit = _cell_fit({2: 0.02, 4: 0.05}, sizes=(100,))
    answer = noninferiority_answer(noninferiority_sequence(fit, margin=0.02), None)
    assert answer["deepest_noninferior"].tolist() == [None]
    assert (
        answer["statement"]
        .iloc[0]
        .startswith(
            "no frozen depth was shown non-inferior to full fine-tuning within 2 points (margin 0.02) at n = 100 (the "
            "first depth of the sequence, frozen_layers=2, has lower bound"
        )
    )


def test_matches_the_mixed_model_contrasts_and_the_tost_lower_test() -> None:
    effects = {(k, n): 0.88 - c for n in (200, 1000) for k, c in ((0, 0.0), (-1, 0.0), (2, 0.004), (4, 0.03))}
    table = simulate_results(
        effects, frozen_levels=(-1, 0, 2, 4), train_sizes=(200, 1000), seeds=6, seed_sd=0.004, resid_sd=0.004, rng=3
    )
    fit = fit_mixed(table, "heldout")
    out = noninferiority_sequence(fit, margin=0.01)
    contrasts = contrasts_vs_reference(fit, adjust="none")
    merged = out.merge(contrasts, on=["train_size", "frozen_layers"], suffixes=("", "_c"))
    assert merged["estimate"].to_numpy() == pytest.approx(merged["estimate_c"].to_numpy())
    assert merged["se"].to_numpy() == pytest.approx(merged["se_c"].to_numpy())
    assert merged["df"].to_numpy() == pytest.approx(merged["df_c"].to_numpy())
    # the non-inferiority p value is the lower one-sided test of TOST with the same margin
    tost = equivalence_tests(fit, margin=0.01)
    merged = out.merge(tost, on=["train_size", "frozen_layers"], suffixes=("", "_e"))
    assert merged["p_val"].to_numpy() == pytest.approx(merged["lower_p"].to_numpy())


def test_default_margin() -> None:
    assert default_margin("accuracy") == 0.01
    assert default_margin("F1") == 0.01
    assert default_margin("mcc") == default_margin("pearson") == default_margin("spearman") == 0.02
    with pytest.raises(ModelFitError, match=r"to choose a default margin, but got metric='bleu'"):
        default_margin("bleu")


def test_input_errors() -> None:
    fit = _cell_fit({2: 0.0})
    with pytest.raises(ModelFitError, match=r"`margin` must be a finite number > 0 .* but got margin=0"):
        noninferiority_sequence(fit, margin=0)
    with pytest.raises(ModelFitError, match=r"`alpha` must be in \(0, 0.5\), but got alpha=0.5"):
        noninferiority_sequence(fit, margin=0.01, alpha=0.5)
    with pytest.raises(ModelFitError, match=r"`adjust_across` must be one of \['none', 'sizes'\]"):
        noninferiority_sequence(fit, margin=0.01, adjust_across="tasks")
    with pytest.raises(ModelFitError, match=r"`reference` must be one of the frozen levels"):
        noninferiority_sequence(fit, margin=0.01, reference=7)
    with pytest.raises(ModelFitError, match=r"noninferiority_sequence needs a fit with fixed effects"):
        noninferiority_sequence(object(), margin=0.01)
    with pytest.raises(ModelFitError, match=r"`baseline` must give a value for every train size .* \[1000\]"):
        reference_beats_baseline(fit, {200: 0.5})
    with pytest.raises(ModelFitError, match=r"`baseline` must be a finite number, but got baseline=nan"):
        reference_beats_baseline(fit, float("nan"))
    table = noninferiority_sequence(fit, margin=0.01)
    with pytest.raises(ModelFitError, match=r"`table` must have the columns of noninferiority_sequence"):
        noninferiority_answer(table.drop(columns="tested"), None)
    with pytest.raises(ModelFitError, match=r"`baseline_check` must have a row for every train size"):
        noninferiority_answer(table, reference_beats_baseline(fit, 0.5).iloc[:1])


def _bench():
    return load_script(BENCH)


def test_small_simulation_of_the_error_rates() -> None:
    """40 studies per scenario at n = 1000 (the bench runs 1000 at both sizes); bounds are over 4 MC SE wide."""
    rates = _bench().error_rates(40, sizes=(1000,), rng=7).set_index("quantity")
    assert rates.loc["P(frozen 2 non-inferior), cost 0.5", "rate"] >= 0.8
    assert rates.loc["P(frozen 4 non-inferior), cost 3", "rate"] <= 0.05
    assert rates.loc["FWER of the sequence, cost(2) = margin", "rate"] <= 0.2
    assert rates.loc["Lee test rejects at ratio exactly 0.9", "rate"] <= 0.2
    assert (rates["mc_se"] >= 0).all() and list(rates.columns) == [
        "train_size",
        "rate",
        "mc_se",
        "target",
        "ok",
    ]

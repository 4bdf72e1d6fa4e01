"""Paired-by-seed contrasts agree with scipy's paired t-test and statsmodels' Holm."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from freezestats.exceptions import ModelFitError
from freezestats.stats import simulate_results
from freezestats.stats.inference.paired import paired_contrasts


def test_matches_ttest_rel_and_holm() -> None:
    table = simulate_results(frozen_levels=(0, 2, 4, 8), train_sizes=(50, 200), seeds=6, rng=7)
    out = paired_contrasts(table, "best_dev")
    assert len(out) == 2 * 3
    for size, group in out.groupby("train_size"):
        raw = []
        for row in group.itertuples():
            a = table[(table.train_size == size) & (table.frozen_layers == row.frozen_layers)].sort_values("seed")
            b = table[(table.train_size == size) & (table.frozen_layers == 0)].sort_values("seed")
            ref = stats.ttest_rel(a.best_dev.to_numpy(), b.best_dev.to_numpy())  # scipy's paired t-test
            assert row.t == pytest.approx(ref.statistic) and row.p_val == pytest.approx(ref.pvalue)
            ci = ref.confidence_interval(0.95)
            assert (row.ci_low, row.ci_high) == pytest.approx((ci.low, ci.high))
            raw.append(ref.pvalue)
        np.testing.assert_allclose(group.p_adj, multipletests(raw, method="holm")[1])


def test_unequal_variances_do_not_leak_between_cells() -> None:
    table = simulate_results(frozen_levels=(0, 2, 4), train_sizes=(50,), seeds=8, rng=8)
    before = paired_contrasts(table, "best_dev").set_index("frozen_layers")
    noisy = table.frozen_layers == 4
    table.loc[noisy, "best_dev"] += np.random.default_rng(1).normal(0, 0.2, noisy.sum())
    after = paired_contrasts(table, "best_dev").set_index("frozen_layers")
    assert after.loc[2, "se"] == pytest.approx(before.loc[2, "se"])  # the calm contrast is unaffected
    assert after.loc[4, "se"] > 3 * before.loc[4, "se"]


def test_bad_input() -> None:
    table = simulate_results(frozen_levels=(0, 2), train_sizes=(50,), rng=1)
    with pytest.raises(ModelFitError, match="reference level frozen_layers=5"):
        paired_contrasts(table, reference=5)
    with pytest.raises(ModelFitError, match=r"must have the columns \['seed'\]"):
        paired_contrasts(table.drop(columns=["seed"]))
    with pytest.raises(ModelFitError, match="analyses one task at a time"):
        paired_contrasts(simulate_results(tasks=("sst2", "cola"), frozen_levels=(0, 2), train_sizes=(50,)))

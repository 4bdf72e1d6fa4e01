"""Non-inferiority tests at their own level (freezestats.stats.inference.tail_matched): a two-part contrast's
failure part is read at the test's level, not extrapolated from the 95% interval as if it were normal."""

from __future__ import annotations

from functools import cache

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from freezestats.stats.inference.tail_matched import TAIL_ALPHAS, matched_lower, matched_p_value, matched_side
from freezestats.stats.inference.task_family import task_noninferiority
from freezestats.stats.items.task_level import task_level_contrasts
from freezestats.stats.simulation.realistic import blog_shaped, realistic_task, simulate_realistic

# a failure part twice as long at 0.1% as the normal extrapolation of its 2.5% side would make it
LONG_TAIL = ((0.001, 0.02, 12.0), (0.005, 0.014, 10.0), (0.025, 0.01, 8.0))


def test_without_a_ladder_it_is_the_t_test() -> None:
    for estimate, margin, se, df in [(0.004, 0.01, 0.006, 4.0), (-0.02, 0.01, 0.01, 30.0), (0.0, 0.01, 0.003, np.inf)]:
        assert matched_p_value(estimate, margin, se, df) == pytest.approx(stats.t.sf((estimate + margin) / se, df))
        for alpha in (0.001, 0.005, 0.025):
            bound = estimate - stats.t.ppf(1 - alpha, df) * se
            assert matched_lower(estimate, alpha, se, df) == pytest.approx(bound)


def test_a_flat_ladder_is_the_t_test_too() -> None:
    flat = tuple((a, 0.01, 6.0) for a in TAIL_ALPHAS)
    assert matched_p_value(0.02, 0.01, 0.01, 6.0, flat) == pytest.approx(stats.t.sf(3.0, 6.0), rel=1e-6)
    assert matched_lower(0.02, 0.005, 0.01, 6.0, flat) == pytest.approx(0.02 - stats.t.ppf(0.995, 6.0) * 0.01)


def test_the_p_value_is_the_level_at_which_the_bound_meets_the_margin() -> None:
    estimate, margin = 0.03, 0.01
    p = matched_p_value(estimate, margin, 0.01, 8.0, LONG_TAIL)
    assert p > stats.t.sf((estimate + margin) / 0.01, 8.0)  # the long tail weighs against the claim
    assert matched_lower(estimate, p, 0.01, 8.0, LONG_TAIL) == pytest.approx(-margin, abs=1e-7)
    for alpha in np.geomspace(1e-4, 0.2, 60):  # the test rejects at alpha exactly when p <= alpha
        rejects = matched_lower(estimate, alpha, 0.01, 8.0, LONG_TAIL) > -margin
        assert rejects == (p <= alpha), alpha
    # at a rung the bound uses that rung's SE and df; at 0.025 it is the 95% interval's lower end
    assert matched_lower(estimate, 0.005, 0.01, 8.0, LONG_TAIL) == pytest.approx(
        estimate - stats.t.ppf(0.995, 10.0) * 0.014
    )
    assert matched_lower(estimate, 0.025, 0.01, 8.0, LONG_TAIL) == pytest.approx(
        estimate - stats.t.ppf(0.975, 8.0) * 0.01
    )


def test_the_family_reads_the_ladder_at_each_local_level() -> None:
    """One depth, one size, so its local level is the family's: its 95% side extrapolated to that level clears the
    margin, its side read there does not. The extrapolated test claims it; the matched one must not."""
    base = {"train_size": 100, "reference": 0, "se_seed": 0.01, "se_item": 0.0, "ci_low": 0.0, "ci_high": 0.0,
            "population": "task", "p_fail": 0.1, "p_fail_reference": 0.0, "failure_sides": "joint draws",
            "method": "two-part"}  # fmt: skip
    tail = ((0.00025, 0.05, 8.0), (0.001, 0.04, 8.0), (0.01, 0.02, 8.0), (0.025, 0.01, 8.0))
    rows = [{**base, "frozen_layers": 1, "estimate": 0.0, "se": 0.01, "df": 8.0, "se_lower": 0.01, "df_lower": 8.0,
             "lower_tail": tail}]  # fmt: skip
    table = pd.DataFrame(rows)
    plain = task_noninferiority(table.drop(columns="lower_tail"), margin=0.05, alpha=0.002)
    matched = task_noninferiority(table, margin=0.05, alpha=0.002)
    level = float(matched["alpha"].iloc[0])
    assert level == pytest.approx(0.002)
    assert bool(plain["noninferior"].iloc[0])  # 0 - t(0.998, 8) * 0.01 = -0.039 > -0.05
    assert not bool(matched["noninferior"].iloc[0])  # the side at 0.2%: SE 0.034, bound -0.13
    assert float(matched["lower"].iloc[0]) == pytest.approx(matched_lower(0.0, level, 0.01, 8.0, tail))
    assert float(matched["lower"].iloc[0]) < -0.1
    side = matched_side(level, 0.01, 8.0, tail)[0]  # the t statistic is on the side that level reads
    assert float(matched["t"].iloc[0]) == pytest.approx(0.05 / side) and side > 0.03


@cache
def _contrasts() -> pd.DataFrame:
    study = simulate_realistic(realistic_task(blog_shaped()), rng=11)
    runs = study.results
    return task_level_contrasts(runs, study.items, response="heldout", metric="accuracy", failure_rates="pooled_joint")


def test_two_part_contrasts_carry_their_ladder() -> None:
    table = _contrasts()
    two_part = table[table["method"].str.startswith("two-part")]
    assert len(two_part) > 0 and table.loc[table["method"] == "paired", "lower_tail"].isna().all()
    longer = 0
    for row in two_part.itertuples():
        alphas, ses, dfs = (np.array(x) for x in zip(*row.lower_tail, strict=True))
        assert tuple(alphas) == TAIL_ALPHAS
        at_ci = list(alphas).index(0.025)  # the interval's own level (95%): its lower side exactly
        assert ses[at_ci] == pytest.approx(row.se_lower) and dfs[at_ci] == pytest.approx(row.df_lower)
        assert np.all(ses > 0) and np.all(np.isfinite(ses))
        longer += ses[0] > ses[at_ci] * 1.01
    assert longer > 0  # some failure part's tail is longer than the normal's


def test_the_answer_rejects_exactly_where_its_bound_clears_the_margin() -> None:
    table = task_noninferiority(_contrasts(), margin=0.03)
    assert (table["noninferior"] == (table["lower"] > -0.03)).all()
    assert (table["noninferior"] == (table["p_adj"] <= 0.05)).all()

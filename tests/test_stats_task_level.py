"""Task-level contrasts and the graphical procedure, against values computed by hand or by scipy.

lme4's fit of the crossed layout is in tests/test_stats_task_level_r.py; this file needs no R.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from freezestats.stats.inference.graphical import graphical_test
from freezestats.stats.inference.multitest import holm
from freezestats.stats.inference.sequence import fixed_sequence
from freezestats.stats.items.task_level import crossed_contrast, task_level_contrasts

N_ITEMS = 60  # per run, all scored ("heldout" scores the "score" half)


def test_crossed_contrast_by_hand() -> None:
    # D (3 seeds x 4 items) = [[0, 1, 0, -1], [1, 1, 0, 0], [0, 1, -1, 0]], grand mean 2/12 = 1/6.
    # Seeds: row means 0, 1/2, 0; s_d^2 = (1/36 + 4/36 + 1/36) / 2 = 1/12, v_seed = s_d^2 / 3 = 1/36 (se 1/6),
    #   MS_seed = 4 s_d^2 = 1/3 on 2 df.
    # Items: column means 1/3, 1, -1/3, -1/3, squared deviations from 1/6 sum to 11/9, MS_item = 3 * 11/9 / 3
    #   = 11/9 on 3 df.
    # Residual: SS_total = sum d^2 - 12 * (1/6)^2 = 6 - 1/3 = 17/3, SS_seed = 4 * 6/36 = 2/3, SS_item = 3 * 11/9
    #   = 11/3, so SS_res = 4/3 on 6 df and MS_res = 2/9.
    # v_item = (11/9 - 2/9) / 12 = 1/12; df_item = (1)^2 / ((11/9)^2 / 3 + (2/9)^2 / 6) = 81/41.
    # Var = 1/36 + 1/12 = 1/9 (se 1/3) = (MS_seed + MS_item - MS_res) / 12;
    # df = (4/3)^2 / ((1/3)^2 / 2 + (11/9)^2 / 3 + (2/9)^2 / 6) = (16/9) / (91/162) = 288/91.
    d = np.array([[0.0, 1.0, 0.0, -1.0], [1.0, 1.0, 0.0, 0.0], [0.0, 1.0, -1.0, 0.0]])
    out = crossed_contrast(d)
    expected = {"estimate": 1 / 6, "se_seed": 1 / 6, "df_seed": 2.0, "se_item": np.sqrt(1 / 12),
                "df_item": 81 / 41, "se": 1 / 3, "df": 288 / 91, "n_items": 4}  # fmt: skip
    assert out == pytest.approx(expected, rel=1e-12)


def test_crossed_contrast_with_the_item_part_at_zero_is_the_paired_t() -> None:
    # Every column mean is 2/3, so MS_item = 0 < MS_res: the item part is truncated at 0 and what is left is the
    # paired t over seeds, rows 2/3, 1/3, 1: s_d^2 = 1/9, se = sqrt(1/27), df = 2.
    d = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    out = crossed_contrast(d)
    assert out["se_item"] == 0.0 and out["df_item"] == np.inf
    assert out["se"] == pytest.approx(np.sqrt(1 / 27), rel=1e-12) and out["df"] == 2.0


def test_runs_that_differ_in_one_seed_only_have_no_item_part() -> None:
    # One nonzero row r in an S x I table: MS_item = MS_res = sum (r_i - mean r)^2 / (S (I - 1)) exactly (the
    # residuals are (r_i - mean r)(1 - 1/S) in that row and -(r_i - mean r)/S in the others), so the item part is
    # 0 and the contrast is the paired t on 4 df. Floating point put MS_item 1e-17 above MS_res, and its df of
    # 3e-29 made the interval 1e149 wide (realistic simulator, study 519, n = 50, frozen 1: four seeds' runs
    # identical, the fifth's apart on 200 items). Generator 1 is one whose rounding fell that way.
    d = np.zeros((5, 436))
    d[1] = np.random.default_rng(1).choice([-1.0, 0.0, 0.0, 1.0], 436)
    out = crossed_contrast(d)
    assert out["se_item"] == 0.0 and out["df_item"] == np.inf and out["df"] == 4.0


def test_an_interval_with_next_to_no_df_stays_within_the_metrics_range() -> None:
    # Three seeds, four items; every seed's difference is -1/4, so the seed part is 0 and the item part, on 0.027
    # df, is all there is: its t quantile put the interval +-1e46 wide, past what any accuracy contrast can be.
    # (On the realistic simulator, two discordant seeds at n = 50 gave +-7.9.) The interval stops at -1..1; the
    # df, and so the test, do not move.
    right = {1: [[1, 0, 0, 1], [1, 1, 1, 0], [1, 0, 1, 0]], 0: [[0, 1, 1, 1], [1, 1, 1, 1], [1, 1, 0, 1]]}
    runs, items = [], []
    for depth, rows in right.items():
        for seed, pred in enumerate(rows, start=1):
            trial = len(runs)
            runs.append({"trial": trial, "train_size": 50, "frozen_layers": depth, "seed": seed,
                         "heldout": float(np.mean(pred))})  # fmt: skip
            items.append(pd.DataFrame({"trial": trial, "idx": np.arange(4), "label": 1, "half": "score",
                                       "prediction_heldout": pred}))  # fmt: skip
    row = task_level_contrasts(pd.DataFrame(runs), pd.concat(items), response="heldout", metric="accuracy").iloc[0]
    assert row["estimate"] == -0.25 and row["se_seed"] == 0.0
    assert row["df"] == pytest.approx(0.026548672566371508, rel=1e-9)
    assert (row["ci_low"], row["ci_high"]) == (-1.0, 1.0)


def _study(depths: tuple[int, ...], draws: int = 1, seeds: int = 5, sizes: tuple[int, ...] = (100, 1000)) -> tuple:
    """A runs table and its per-item predictions: every (size, depth, draw, seed) run, scored on N_ITEMS items.

    Each run's predictions come from its own random generator keyed by (size, depth, draw, seed), and each depth
    finds its own items hard (a generator keyed by the depth), so a run is the same whichever other depths the
    study holds. Depth k's runs are right less often than the reference's, and not on the same items.
    """
    labels = np.random.default_rng(0).integers(0, 2, N_ITEMS)
    hard = {depth: np.random.default_rng([99, depth]).normal(0, 1.5, N_ITEMS) for depth in depths}  # item x depth
    runs, items = [], []
    for size in sizes:
        for depth in depths:
            for draw in range(draws):
                for seed in range(1, seeds + 1):
                    gen = np.random.default_rng([size, depth, draw, seed])
                    logit = 1.7 - 0.1 * depth + hard[depth] + 0.2 * gen.normal()
                    right = gen.random(N_ITEMS) < 1 / (1 + np.exp(-logit))
                    pred = np.where(right, labels, 1 - labels)
                    trial = len(runs)
                    heldout = float(np.mean(right))
                    runs.append({"trial": trial, "train_size": size, "frozen_layers": depth, "subset_draw": draw,
                                 "seed": seed, "order_seed": seed, "heldout": heldout})  # fmt: skip
                    items.append(pd.DataFrame({"trial": trial, "idx": np.arange(N_ITEMS), "label": labels,
                                               "half": "score", "prediction_heldout": pred}))  # fmt: skip
    return pd.DataFrame(runs), pd.concat(items, ignore_index=True)


def test_the_evaluation_set_contrast_is_the_paired_t_test() -> None:
    runs, _ = _study((0, 2, 4))
    table = task_level_contrasts(runs, None, response="heldout", metric="accuracy", population="evaluation_set")
    assert len(table) == 4 and (table["se_item"] == 0).all()
    for row in table.itertuples(index=False):
        at = runs[runs["train_size"] == row.train_size].set_index("seed")
        depth, ref = at[at["frozen_layers"] == row.frozen_layers], at[at["frozen_layers"] == 0]
        test = stats.ttest_rel(depth["heldout"], ref.loc[depth.index, "heldout"])
        interval = test.confidence_interval(0.95)
        assert row.estimate == pytest.approx(test.statistic * row.se, rel=1e-10)
        assert row.df == test.df == 4 and row.n_pairs == 5
        assert (row.ci_low, row.ci_high) == pytest.approx((interval.low, interval.high), rel=1e-10)


def test_with_several_subset_draws_the_draw_is_the_unit() -> None:
    runs, _ = _study((0, 3), draws=3, seeds=2, sizes=(100,))
    row = task_level_contrasts(runs, None, response="heldout", metric="accuracy", population="evaluation_set")
    wide = runs.pivot_table(index=["subset_draw", "seed"], columns="frozen_layers", values="heldout")
    per_draw = (wide[3] - wide[0]).groupby(level="subset_draw").mean()
    test = stats.ttest_1samp(per_draw, 0.0)
    interval = test.confidence_interval(0.95)
    assert row["df"].item() == test.df == 2 and row["n_pairs"].item() == 6
    assert (row["ci_low"].item(), row["ci_high"].item()) == pytest.approx((interval.low, interval.high), rel=1e-10)


def test_the_task_contrast_adds_the_item_part_to_the_paired_t() -> None:
    runs, items = _study((0, 2))
    task = task_level_contrasts(runs, items, response="heldout", metric="accuracy").set_index("train_size")
    seeds = task_level_contrasts(runs, items, response="heldout", metric="accuracy", population="evaluation_set")
    seeds = seeds.set_index("train_size")
    pd.testing.assert_series_equal(task["estimate"], seeds["estimate"], rtol=1e-12)
    pd.testing.assert_series_equal(task["se_seed"], seeds["se"], rtol=1e-12, check_names=False)
    assert (task["se"] > seeds["se"]).all() and (task["n_items"] == N_ITEMS).all()
    assert np.allclose(task["se"] ** 2, task["se_seed"] ** 2 + task["se_item"] ** 2, rtol=1e-12)


@pytest.mark.parametrize("population", ["task", "evaluation_set"])
def test_a_depths_contrast_does_not_move_with_the_other_depths(population: str) -> None:
    """Issue 28: depth 2's answer is the same whether the study ran depths {1, 2, 4, 6}, only 2, or added 9."""
    columns = ["estimate", "se_seed", "se_item", "se", "df", "ci_low", "ci_high", "n_pairs", "n_items"]

    def depth_2(depths: tuple[int, ...]) -> pd.DataFrame:
        runs, items = _study(depths)
        table = task_level_contrasts(runs, items, response="heldout", metric="accuracy", population=population)
        return table[table["frozen_layers"] == 2].set_index("train_size")[columns]

    full = depth_2((0, 1, 2, 4, 6))
    assert len(full) == 2
    for depths in [(0, 2), (0, 2, 6), (0, 1, 2, 4, 6, 9)]:
        pd.testing.assert_frame_equal(depth_2(depths), full, check_exact=True)


def _random_p(gen: np.random.Generator, m: int) -> np.ndarray:
    """m p values, some from true effects (small), some null (uniform)."""
    effects = gen.random(m) < 0.5
    return np.where(effects, gen.beta(0.3, 8, m), gen.random(m))


@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_graphical_with_equal_weights_and_a_complete_graph_is_holm(alpha: float) -> None:
    gen = np.random.default_rng(2009)
    for _ in range(300):
        m = int(gen.integers(2, 9))
        p = _random_p(gen, m)
        transitions = np.full((m, m), 1 / (m - 1))
        np.fill_diagonal(transitions, 0.0)
        result = graphical_test(p, np.full(m, 1 / m), transitions, alpha)
        expected = holm(p)
        np.testing.assert_allclose(result.p_adjusted, expected, rtol=1e-12)
        np.testing.assert_array_equal(result.rejected, expected <= alpha)


@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_graphical_on_a_chain_is_the_fixed_sequence(alpha: float) -> None:
    gen = np.random.default_rng(2003)
    for _ in range(300):
        m = int(gen.integers(2, 9))
        p = _random_p(gen, m)
        weights = np.r_[1.0, np.zeros(m - 1)]
        transitions = np.eye(m, k=1)  # all of a rejected hypothesis's level to the next; the last passes nothing
        result = graphical_test(p, weights, transitions, alpha)
        significant = p <= alpha
        reached = fixed_sequence(np.zeros(m), significant)
        np.testing.assert_array_equal(result.rejected, reached & significant)
        np.testing.assert_allclose(result.p_adjusted, np.maximum.accumulate(p), rtol=1e-12)


def test_with_several_draws_and_failed_runs_each_cell_keeps_its_own_healthy_draws() -> None:
    """Failed runs with subset draws: the healthy part compares each cell's per-draw healthy means (the draw is
    the unit), paired where a draw keeps healthy runs of both cells."""
    runs, items = _study((0, 3), draws=4, seeds=2, sizes=(100, 1000))
    failed = np.zeros(len(runs), dtype=bool)
    at_100 = runs["train_size"] == 100
    failed[(at_100 & (runs["frozen_layers"] == 3) & (runs["subset_draw"] == 0)).to_numpy()] = True  # a whole draw
    failed[(at_100 & (runs["frozen_layers"] == 0) & (runs["subset_draw"] == 1) & (runs["seed"] == 1)).to_numpy()] = True
    failed[((runs["train_size"] == 1000) & (runs["frozen_layers"] == 3) & (runs["seed"] == 2)).to_numpy()] = True
    runs = runs.assign(failed=failed)
    table = task_level_contrasts(runs, items, response="heldout", metric="accuracy").set_index("train_size")
    row = table.loc[100]
    assert row["method"] == "two-part" and row["n_pairs"] == 3  # draw 0 has no healthy depth-3 run
    assert row["df_seed"] == 2  # min(3, 4) draws - 1
    assert np.isfinite(row["se"]) and row["se_item"] > 0
    healthy = runs[at_100 & ~runs["failed"]]
    means = healthy.groupby(["frozen_layers", "subset_draw"])["heldout"].mean()
    a, b = means.loc[3], means.loc[0]
    shared = a.index.intersection(b.index)
    r = np.corrcoef(a.loc[shared], b.loc[shared])[0, 1]
    v = a.var() / len(a) + b.var() / len(b) - 2 * len(shared) * r * a.std() * b.std() / (len(a) * len(b))
    assert row["se_seed"] == pytest.approx(np.sqrt(v), rel=1e-9)


def test_a_cell_healthy_in_one_subset_draw_only_enters_whole() -> None:
    """With several draws the unit is the draw: a depth whose healthy runs all sit in one draw has one unit, so it
    enters whole against the reference's healthy draws (it once reached the partly paired contrast and raised)."""
    runs, items = _study((0, 3), draws=4, seeds=2, sizes=(100,))
    depth_down = (runs["frozen_layers"] == 3) & (runs["subset_draw"] != 2)
    failed = (depth_down | ((runs["frozen_layers"] == 0) & (runs["subset_draw"] == 0) & (runs["seed"] == 1))).to_numpy()
    table = task_level_contrasts(runs.assign(failed=failed), items, response="heldout", metric="accuracy")
    row = table.iloc[0]
    assert row["method"] == "two-part, depth whole" and row["n_pairs"] == 4 and row["df_seed"] == 3

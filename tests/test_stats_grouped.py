"""The default mixed model (a residual variance per train size, seed and seed:size intercepts) against nlme.

The reference is ``tests/data/nlme_reference.R`` run on ``tests/data/hetero_fixture.csv`` (made by
``make_hetero_fixture.py``): re-run when ``Rscript`` with nlme, emmeans and lmerTest is present, otherwise the
committed ``nlme_reference.json``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _r_reference import r_reference

from freezestats.exceptions import ModelFitError
from freezestats.stats import (
    contrasts_vs_reference,
    estimated_marginal_means,
    fit_mixed,
    simulate_results,
    true_cell_means,
)
from freezestats.stats.models.mixed_grouped import randomness_sources
from freezestats.stats.models.reml import Component, _Blocks, fit_components
from freezestats.stats.simulation.results import blog_run_sds

DATA = Path(__file__).parent / "data"
R_PACKAGES = ("nlme", "emmeans", "lmerTest", "jsonlite")
TOL = 1e-4


@pytest.fixture(scope="module")
def nlme(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """nlme's fit of the fixture: fresh from R when R is here, else the committed JSON."""
    return r_reference(
        "nlme_reference.R", "hetero_fixture.csv", "nlme_reference.json", R_PACKAGES, tmp_path_factory.mktemp("nlme")
    )


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return pd.read_csv(DATA / "hetero_fixture.csv")


@pytest.fixture(scope="module")
def fit(table: pd.DataFrame):
    return fit_mixed(table, "best_dev")


def test_fixed_effects_and_their_ses_match_nlme(fit, nlme: dict) -> None:
    ours = fit.fixed_effects.set_index("term")
    ref = pd.DataFrame(nlme["fixed_effects"]).set_index("term")
    assert sorted(ours.index) == sorted(ref.index)
    np.testing.assert_allclose(ours.loc[ref.index, "estimate"], ref["estimate"], atol=TOL)
    np.testing.assert_allclose(ours.loc[ref.index, "se"], ref["se"], rtol=TOL)


def test_variances_match_nlme(fit, nlme: dict) -> None:
    sd = dict(zip(fit.variance_components["component"], fit.variance_components["sd"], strict=True))
    for row in nlme["residual_sd"]:
        assert sd[f"residual:{row['train_size']}"] == pytest.approx(row["sd"], rel=TOL)
    for name, value in nlme["random_sd"].items():
        assert sd[name] == pytest.approx(value, rel=TOL)
    assert fit.diagnostics.llf == pytest.approx(nlme["logLik"], abs=TOL)
    assert fit.diagnostics.converged and fit.variance == "per_size"


def test_marginal_means_and_contrasts_match_emmeans(fit, nlme: dict) -> None:
    emm = estimated_marginal_means(fit).set_index(["frozen_layers", "train_size"])
    for row in nlme["emmeans"]:
        ours = emm.loc[(int(row["frozen_layers"]), int(row["train_size"]))]
        assert ours["emmean"] == pytest.approx(row["emmean"], abs=TOL)
        assert ours["se"] == pytest.approx(row["SE"], rel=TOL)
    con = contrasts_vs_reference(fit, adjust="none").set_index(["frozen_layers", "train_size"])
    for row in nlme["contrasts"]:
        ours = con.loc[(int(row["frozen_layers"]), int(row["train_size"]))]
        assert ours["estimate"] == pytest.approx(row["estimate"], abs=TOL)
        assert ours["se"] == pytest.approx(row["SE"], rel=TOL)


def test_intervals_differ_by_train_size_as_the_spread_does(fit) -> None:
    se = contrasts_vs_reference(fit, adjust="none").groupby("train_size")["se"].mean()
    assert se[50] > 10 * se[1000]  # the pooled model gives one SE for every size
    pooled = contrasts_vs_reference(fit_mixed(pd.read_csv(DATA / "hetero_fixture.csv"), variance="pooled"))
    assert pooled["se"].round(12).nunique() == 1


def test_satterthwaite_df_on_one_train_size_is_the_closed_form_and_lmertest(table: pd.DataFrame, nlme: dict) -> None:
    """On one train size the model is (1 | seed) + residual; a balanced within-size contrast has (S-1)(K-1) df,
    unless the seed variance is estimated at zero (then S(K-1) = 16 with 5 seeds and 4 levels), as lmerTest says."""
    ref = pd.DataFrame(nlme["per_size_lmertest"])
    for size, rows in ref.groupby("train_size"):
        single = fit_mixed(table[table["train_size"] == size])
        con = contrasts_vs_reference(single, adjust="none").set_index("frozen_layers")
        for _, row in rows.iterrows():
            ours = con.loc[int(row["frozen_layers"])]
            assert ours["estimate"] == pytest.approx(row["estimate"], abs=TOL)
            assert ours["se"] == pytest.approx(row["se"], rel=1e-3)
            assert ours["df"] == pytest.approx(row["df"], rel=1e-3)
    assert sorted({round(d) for d in ref["df"]}) == [12, 16]


def test_satterthwaite_df_agree_with_finite_differences(fit, table: pd.DataFrame) -> None:
    """The df's two ingredients, by numerical differentiation of the REML criterion at the estimates."""
    frame = table.copy()
    x = np.asarray(pd.get_dummies(frame["frozen_layers"].astype(str) + "@" + frame["train_size"].astype(str)), float)
    y = frame["best_dev"].to_numpy(float)
    seeds = frame["seed"].to_numpy()
    sizes = frame["train_size"].to_numpy()
    z_seed = np.asarray(pd.get_dummies(seeds), float)
    z_ss = np.asarray(pd.get_dummies(pd.Series(seeds).astype(str) + ":" + pd.Series(sizes).astype(str)), float)
    comps = [Component("seed", "random", z=z_seed), Component("seed:train_size", "random", z=z_ss)]
    comps += [Component(f"r{n}", "residual", mask=sizes == n, lower=1e-12) for n in (50, 200, 1000)]
    blocks = [np.flatnonzero(seeds == s) for s in np.unique(seeds)]
    reml = fit_components(y, x, comps, blocks)
    contrast = np.zeros(x.shape[1])
    contrast[[0, 1]] = 1.0, -1.0
    base = reml.theta.copy()
    # d(l'C l)/d theta_k = l'C M_k C l, the gradient Satterthwaite's df uses (RemlFit.satterthwaite_df).
    grad = np.array([float(contrast @ reml.cov_beta @ m @ reml.cov_beta @ contrast) for m in reml.m_matrices])
    numeric = []
    for k in range(len(base)):
        h = base[k] * 1e-4
        up, down = base.copy(), base.copy()
        up[k] += h
        down[k] -= h
        numeric.append(
            (_cov_at(y, x, comps, blocks, up, contrast) - _cov_at(y, x, comps, blocks, down, contrast)) / (2 * h)
        )
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-9)
    # The information the df inverts is minus the Hessian of the REML log-likelihood.
    hessian = np.column_stack([_grad_at(y, x, comps, blocks, base, k) for k in range(len(base))])
    np.testing.assert_allclose(reml.info, -hessian, rtol=1e-4)


def _cov_at(y, x, comps, blocks, theta, contrast) -> float:
    cov = np.asarray(_Blocks(y, x, comps, blocks).evaluate(theta, True)["cov"])
    return float(contrast @ cov @ contrast)


def _grad_at(y, x, comps, blocks, theta, k) -> np.ndarray:
    """Central difference in theta_k of the analytic REML gradient."""
    h = theta[k] * 1e-5
    up, down = theta.copy(), theta.copy()
    up[k] += h
    down[k] -= h
    data = _Blocks(y, x, comps, blocks)
    return (np.asarray(data.evaluate(up, True)["grad"]) - np.asarray(data.evaluate(down, True)["grad"])) / (2 * h)


def test_zero_variance_groups_are_floored_not_fatal() -> None:
    """Collapsed or deterministic runs: every run of a train size gives the same score in each cell."""
    table = simulate_results(frozen_levels=(0, 2, 4), train_sizes=(50, 200), resid_sd={50: 0.05, 200: 0.0}, rng=3)
    table.loc[table["train_size"] == 200, "best_dev"] = table.loc[table["train_size"] == 200, "frozen_layers"].map(
        {0: 0.8, 2: 0.79, 4: 0.7}
    )
    fit = fit_mixed(table)
    floor = (1 / 872) ** 2
    row = fit.variance_components.set_index("component").loc["residual:200"]
    assert row["at_floor"] and row["variance"] == pytest.approx(floor)
    con = contrasts_vs_reference(fit, adjust="none")
    assert (con["se"] > 0).all() and np.isfinite(con["ci_low"]).all()
    assert any("floor" in w for w in fit.diagnostics.warnings)


def test_every_variance_at_its_floor_gives_infinite_df_not_a_crash() -> None:
    """Every run of every cell on one value per cell (a task whose runs all sit on the majority pile): no
    variance is estimated, so Satterthwaite's df has nothing to count and is infinite, as for a known variance."""
    table = simulate_results(frozen_levels=(0, 2), train_sizes=(50, 200), resid_sd=0.0, seed_sd=0.0, rng=3)
    table["best_dev"] = table["frozen_layers"].map({0: 0.8, 2: 0.7}) + 0.01 * (table["train_size"] == 200)
    fit = fit_mixed(table, variance="per_cell")
    assert fit.variance_components["at_floor"].all()
    con = contrasts_vs_reference(fit, adjust="none")
    assert np.isinf(con["df"]).all() and con["estimate"].to_numpy() == pytest.approx([-0.1, -0.1])


def test_per_cell_variance_and_bad_option() -> None:
    table = simulate_results(frozen_levels=(0, 2), train_sizes=(50, 200), seeds=6, resid_sd=0.02, rng=5)
    fit = fit_mixed(table, variance="per_cell")
    assert sum(fit.variance_components["component"].str.startswith("residual:")) == 4
    with pytest.raises(ModelFitError, match="variance"):
        fit_mixed(table, variance="per_seed")


def test_per_size_intervals_cover_where_the_pooled_ones_do_not() -> None:
    """A small version of bench/coverage.py, scenario a: run SD 0.071 at n = 50 and 0.0044 at n = 1000."""
    sds = blog_run_sds("sst2", per="size")
    truth = true_cell_means(frozen_levels=(0, 2, 8), train_sizes=(50, 1000)).set_index(["frozen_layers", "train_size"])
    covered: dict[str, list[pd.Series]] = {"per_size": [], "pooled": []}
    width: dict[str, list[pd.Series]] = {"per_size": [], "pooled": []}
    # 60 studies read per-size 0.942 / 0.967 and pooled 0.758 at n = 50; these 30 read 0.900 / 0.933 and 0.650
    for i in range(30):
        table = simulate_results(
            frozen_levels=(0, 2, 8), train_sizes=(50, 1000), seed_sd=0.01, resid_sd=sds, rng=500 + i
        )
        for variance in covered:
            con = contrasts_vs_reference(fit_mixed(table, variance=variance), adjust="none")
            true = [
                truth.loc[(k, n), "true_mean"] - truth.loc[(0, n), "true_mean"]
                for k, n in zip(con["frozen_layers"], con["train_size"], strict=True)
            ]
            con["covered"] = (con["ci_low"] <= true) & (np.asarray(true) <= con["ci_high"])
            covered[variance].append(con.set_index(["train_size", "frozen_layers"])["covered"])
            width[variance].append(con.set_index(["train_size", "frozen_layers"])["ci_high"] - con["ci_low"].values)
    rate = {v: pd.concat(c).groupby(level="train_size").mean() for v, c in covered.items()}
    wide = {v: pd.concat(w).groupby(level="train_size").mean() for v, w in width.items()}
    assert rate["per_size"].min() >= 0.85  # 60 intervals per size: 95% nominal, 3 MC SE ~ 0.085
    assert rate["pooled"][50] < rate["per_size"][50] - 0.1  # too narrow where runs are unstable
    assert wide["pooled"][1000] > 3 * wide["per_size"][1000]  # several times too wide where they are stable


def _crossed_table(init: dict[int, float], order: dict[int, float], resid: dict[int, float], rng: int) -> pd.DataFrame:
    """Runs of every (init seed, data-order seed) pair, each source with its own SD per train size."""
    gen = np.random.default_rng(rng)
    rows = []
    for n in (50, 1000):
        u, v = gen.normal(0, init[n], 5), gen.normal(0, order[n], 5)
        for k, mu in ((0, 0.8), (2, 0.78), (4, 0.7)):
            for s in range(5):
                for o in range(5):
                    score = mu + u[s] + v[o] + gen.normal(0, resid[n])
                    rows.append(
                        {
                            "task": "sst2",
                            "frozen_layers": k,
                            "train_size": n,
                            "seed": s + 1,
                            "order_seed": o + 1,
                            "failed": False,
                            "best_dev": score,
                            "n_eval": 872,
                        }
                    )
    return pd.DataFrame(rows)


def test_crossed_init_and_order_seeds_say_which_source_dominates_per_size() -> None:
    table = _crossed_table({50: 0.04, 1000: 0.001}, {50: 0.005, 1000: 0.008}, {50: 0.01, 1000: 0.002}, rng=0)
    fit = fit_mixed(table)
    names = set(fit.variance_components["component"])
    assert {"order_seed:train_size@50", "seed:train_size@1000", "residual:1000"} <= names
    sources = randomness_sources(fit).set_index("train_size")
    assert sources.loc[50, "dominant"] == "init" and sources.loc[1000, "dominant"] == "order"
    assert sources[["init_share", "order_share", "residual_share"]].sum(axis=1).round(12).eq(1).all()
    # Without crossing (order_seed == seed) the model is the default one, and the function says why it cannot split.
    plain = fit_mixed(
        simulate_results(frozen_levels=(0, 2), train_sizes=(50, 200), rng=2).assign(order_seed=lambda t: t["seed"])
    )
    assert "order_seed" not in set(plain.variance_components["component"])
    with pytest.raises(ModelFitError, match="order_seeds"):
        randomness_sources(plain)


def test_per_cell_variances_refuse_a_cell_with_one_run() -> None:
    """REML fits a one-run cell's own variance near zero; the per-size model, which pools the size's cells, fits."""
    runs = simulate_results(tasks=("sst2",), frozen_levels=(0, 2, 4), train_sizes=(100, 200), seeds=5, rng=3)
    lone = (runs["frozen_layers"] == 4) & (runs["train_size"] == 200) & (runs["seed"] != runs["seed"].min())
    with pytest.raises(ModelFitError, match=r"one run cannot estimate \(frozen 4 at n = 200\)"):
        fit_mixed(runs[~lone], "best_dev", variance="per_cell")
    assert fit_mixed(runs[~lone], "best_dev", variance="per_size").diagnostics.converged


def test_per_cell_variances_without_failed_runs_leave_out_a_level_with_one_healthy_run() -> None:
    """Without failed runs a lone healthy run is no more estimable than a lone run: its level (or, in the
    reference, its size) leaves the per-cell fit with a note, as a level with no healthy run does; the per-size
    model keeps it."""
    runs = simulate_results(tasks=("sst2",), frozen_levels=(0, 2, 4), train_sizes=(100, 200), seeds=5, rng=3)
    lone = (runs["frozen_layers"] == 4) & (runs["train_size"] == 200) & (runs["seed"] != runs["seed"].min())
    fit = fit_mixed(runs.assign(failed=lone), "best_dev", include_failed=False, variance="per_cell")
    assert fit.frozen_levels == (0, 2) and fit.train_sizes == (100, 200)
    assert any(
        "left out frozen level(s) [4]: fewer than 2 runs are healthy in some cell (frozen 4 at n=200)" in w
        for w in fit.diagnostics.warnings
    )
    assert 4 in fit_mixed(runs.assign(failed=lone), "best_dev", include_failed=False).frozen_levels
    in_reference = (runs["frozen_layers"] == 0) & (runs["train_size"] == 200) & (runs["seed"] != 1)
    fit = fit_mixed(runs.assign(failed=in_reference), "best_dev", include_failed=False, variance="per_cell")
    assert fit.train_sizes == (100,) and fit.frozen_levels == (0, 2, 4)
    assert any("left out train size(s) [200]: fewer than 2 runs are healthy in its reference cell" in w
               for w in fit.diagnostics.warnings)  # fmt: skip
    one_seed = runs[runs["seed"] == 1].assign(failed=False)
    with pytest.raises(ModelFitError, match=r"leaves no cell with 2 healthy run\(s\) in task 'sst2' \(left out"):
        fit_mixed(one_seed, "best_dev", include_failed=False, variance="per_cell")

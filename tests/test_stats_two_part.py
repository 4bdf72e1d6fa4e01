"""Two-part contrasts: P(fail) from the pooled failure GLMM times the healthy runs' mixed model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _scripts import load_script
from scipy import special, stats

from freezestats.analysis.pipeline import analyze
from freezestats.exceptions import ModelFitError
from freezestats.stats import contrasts_vs_reference, fit_mixed, simulate_results
from freezestats.stats.failures.two_part import two_part_contrasts


def _study(fail_rate: float, rng: int = 5) -> pd.DataFrame:
    return simulate_results(tasks=("sst2",), fail_rate=fail_rate, rng=rng)


def test_without_failures_it_is_the_healthy_models_contrasts() -> None:
    runs = _study(0.0)
    out = two_part_contrasts(runs, "heldout").set_index(["train_size", "frozen_layers"]).sort_index()
    plain = contrasts_vs_reference(fit_mixed(runs, "heldout"), 0, adjust="none")
    plain = plain.set_index(["train_size", "frozen_layers"]).sort_index()
    np.testing.assert_allclose(out["estimate"], plain["estimate"], atol=1e-12)
    np.testing.assert_allclose(out["se"], plain["se"], rtol=1e-9)
    assert (out["p_fail"] == 0).all()


def test_the_estimate_is_the_mixture_of_the_two_parts() -> None:
    runs = _study(0.1)
    out = two_part_contrasts(runs, "heldout")
    healthy = contrasts_vs_reference(fit_mixed(runs, "heldout", include_failed=False), 0, adjust="none")
    merged = out.merge(healthy, on=["train_size", "frozen_layers"], suffixes=("", "_h"))
    np.testing.assert_allclose(merged["healthy_difference"], merged["estimate_h"], atol=1e-12)
    assert np.isfinite(out["estimate"]).all() and (out["se"] > 0).all() and out["p_fail"].between(0, 1).all()
    # failure is independent of the cell in this simulation: the additive model gives every cell about 10%
    assert abs(float(special.logit(out["p_fail"]).mean()) - float(special.logit(0.1))) < 0.5


def test_a_level_whose_cell_all_failed_uses_the_failed_mean_there() -> None:
    runs = _study(0.05)
    cell = (runs["frozen_layers"] == 12) & (runs["train_size"] == 1000)
    runs.loc[cell, ["failed", "heldout"]] = [True, 0.509]
    out = two_part_contrasts(runs, "heldout").set_index(["train_size", "frozen_layers"])
    row = out.loc[(1000, 12)]
    assert row["failed_mean"] == pytest.approx(0.509) and row["healthy_difference"] < 0
    # the level left the healthy fit; at other sizes its own healthy runs give its mean
    assert np.isfinite(out.loc[(200, 12), "estimate"]) and out.loc[(200, 12), "se"] > 0


def test_every_run_failed_is_refused_and_analyze_adds_the_table() -> None:
    runs = _study(0.05)
    with pytest.raises(ModelFitError, match="every run failed"):
        two_part_contrasts(runs.assign(failed=True), "heldout")
    result = analyze(runs, n_boot=50)
    table = result.tables["two_part_contrasts"]
    assert set(table["train_size"]) == set(runs["train_size"]) and (table["se"] > 0).all()


def test_the_default_answer_covers_where_runs_collapse_and_the_per_size_model_does_not() -> None:
    """A small version of bench/coverage.py, scenario b (5% of runs collapse; run SD per cell): 25 studies.

    The contrasts picked are the per-size model's worst in the 1000-study bench (frozen 4 at n = 50, frozen 12
    at n = 500) and the one the delta method's failure part left at 0.887 (frozen 12 at n = 1000); the default
    is what ``analyze`` answers with (two-part where failed runs form a second mode in a cell).
    """
    intervals, simulate, truth = _coverage_bench()
    target = truth("b").set_index(["frozen_layers", "train_size"])["truth"]
    picked = [(4, 50), (12, 500), (12, 1000)]
    hits: dict[str, list[bool]] = {"auto": [], "per_size": []}
    for i in range(25):  # 40 studies read 0.933 / 0.808, these 25 read 0.920 / 0.760
        table = simulate("b", rng=90_000 + i)
        for method in hits:
            ci = intervals(table, method).set_index(["frozen_layers", "train_size"])
            hits[method].extend(ci.loc[c, "ci_low"] <= target[c] <= ci.loc[c, "ci_high"] for c in picked)
    rate = {method: float(np.mean(h)) for method, h in hits.items()}
    assert rate["auto"] >= 0.87  # 75 intervals, nominal 95%: 3 MC SE ~ 0.075
    assert rate["per_size"] < rate["auto"] - 0.05


def test_runs_straddling_the_failure_threshold_leave_the_answer_to_the_per_size_model() -> None:
    """Scenario a of bench/coverage.py (no collapses; deep cells near the majority rate): the default answers
    from the per-size model in most studies, where counting any cell with failed and healthy runs sent all of
    them to the two-part contrasts."""
    from freezestats.stats.failures.rates import flag_failures
    from freezestats.stats.failures.two_part import failures_within_cells

    _, simulate, _ = _coverage_bench()
    went, mixed = [], []
    for i in range(40):
        table = simulate("a", rng=70_000 + i)
        flags = flag_failures(table, checkpoint="best", rule="binomial").fillna(False).astype(bool)
        went.append(failures_within_cells(table, flags, "best_dev"))
        by_cell = flags.groupby([table["frozen_layers"], table["train_size"]]).agg(["any", "all"])
        mixed.append(bool((by_cell["any"] & ~by_cell["all"]).any()))
    assert np.mean(mixed) > 0.9 and np.mean(went) <= 0.2  # 6.5% of 200 studies in the bench's seeds


def _coverage_bench():
    """bench/coverage.py's scenario functions (the bench is a script, not a package; loaded by path, as `import
    coverage` would find pytest-cov's coverage package wherever that is loaded)."""
    bench = load_script(Path(__file__).resolve().parents[1] / "bench" / "coverage.py")
    return bench.intervals, bench.simulate, bench.truth


def _failed_cell_sharing_seed_effects(fail_rate: float, rng: int = 11) -> pd.DataFrame:
    """Every run of frozen 12 at n = 1000 fails yet keeps its seed's luck (seed SD 0.04, run SD 0.003), as a
    deep-frozen cell near the majority rate does; elsewhere runs collapse at ``fail_rate``."""
    runs = simulate_results(tasks=("sst2",), seed_sd=0.04, resid_sd=0.003, fail_rate=fail_rate, rng=rng)
    cell = (runs["frozen_layers"] == 12) & (runs["train_size"] == 1000)
    runs.loc[cell, "failed"] = True
    return runs


def test_a_cell_outside_the_healthy_fit_is_paired_with_the_reference_by_seed() -> None:
    runs = _failed_cell_sharing_seed_effects(0.0)
    row = two_part_contrasts(runs, "heldout").set_index(["train_size", "frozen_layers"]).loc[(1000, 12)]
    at = runs[runs["train_size"] == 1000].pivot_table(index="seed", columns="frozen_layers", values="heldout")
    paired = at[12] - (1 - row["p_fail_reference"]) * at[0]
    # no other run failed, so P(fail) of the reference is ~0 and the lower side is the paired part alone: the
    # seed effects cancel, far below the 0.04 / sqrt(5) that an independent sum of the two means carries
    assert row["se_lower"] ** 2 == pytest.approx(paired.var(ddof=1) / 5, rel=1e-3)
    assert row["df_lower"] == pytest.approx(4.0, rel=1e-3) and row["se_lower"] < 0.2 * 0.04 / np.sqrt(5)


def test_the_interval_is_longer_on_the_side_where_the_reference_may_fail_more() -> None:
    # no reference run failed at n = 1000, so its P(fail) comes out small, and the true rate may lie well above
    # it: the reference's expected score may be lower, so the difference may be smaller (less negative) than
    # estimated by more than it may be larger
    runs = _failed_cell_sharing_seed_effects(0.05, rng=12)
    assert not runs.loc[(runs["frozen_layers"] == 0) & (runs["train_size"] == 1000), "failed"].any()
    row = two_part_contrasts(runs, "heldout").set_index(["train_size", "frozen_layers"]).loc[(1000, 12)]
    assert row["ci_high"] - row["estimate"] > 1.5 * (row["estimate"] - row["ci_low"])
    # the short side keeps the delta method's width (module docstring), the long one goes past it
    assert row["se_upper"] > 1.5 * row["se"] and row["se_lower"] == pytest.approx(row["se"], rel=1e-9)


def test_noninferiority_tests_an_asymmetric_table_on_its_lower_side() -> None:
    from freezestats.stats import noninferiority_sequence

    runs = _failed_cell_sharing_seed_effects(0.05)
    table = two_part_contrasts(runs, "heldout")
    tested = noninferiority_sequence(table, margin=0.01).merge(table, on=["train_size", "frozen_layers"])
    np.testing.assert_allclose(tested["se_x"], tested["se_lower"])
    expected = tested["estimate_x"] - stats.t.ppf(0.95, tested["df_lower"]) * tested["se_lower"]
    np.testing.assert_allclose(tested["lower"], expected)


def test_only_failed_runs_far_below_their_cells_healthy_runs_send_the_answer_to_the_two_part_contrasts() -> None:
    from freezestats.stats.failures.two_part import failures_within_cells

    runs = simulate_results(tasks=("sst2",), seed_sd=0.01, resid_sd=0.01, rng=3)
    assert not failures_within_cells(runs, np.zeros(len(runs), dtype=bool), "heldout")
    # a deep cell straddling the failure threshold: one normal spread, whichever side of it a run falls
    straddling = runs.assign(heldout=runs["heldout"].where(runs["frozen_layers"] != 12, 0.53))
    at = np.flatnonzero((straddling["frozen_layers"] == 12).to_numpy())
    straddling.iloc[at, straddling.columns.get_loc("heldout")] += np.tile([-0.02, -0.01, 0.0, 0.01, 0.02], 5)
    flags = (straddling["frozen_layers"] == 12) & (straddling["heldout"] < 0.537)
    assert not failures_within_cells(straddling, flags, "heldout")
    # a run of a cell scoring ~0.9 collapsed to the majority rate: a second mode, 40 run SDs below
    collapsed = runs.copy()
    one = np.flatnonzero(((runs["frozen_layers"] == 2) & (runs["train_size"] == 1000)).to_numpy())[0]
    collapsed.iloc[one, collapsed.columns.get_loc("heldout")] = 0.509
    flags = pd.Series(np.arange(len(runs)) == one, index=runs.index)
    assert failures_within_cells(collapsed, flags, "heldout")


def test_without_two_seed_pairs_a_failed_cell_keeps_its_own_spread() -> None:
    # the reference keeps one healthy run at n = 1000, so frozen 12 (all failed) has no two pairs: its failed
    # runs' spread must still reach the contrast, as the variance of their mean
    runs = _failed_cell_sharing_seed_effects(0.0)
    reference = np.flatnonzero(((runs["frozen_layers"] == 0) & (runs["train_size"] == 1000)).to_numpy())
    runs.iloc[reference[1:], runs.columns.get_loc("failed")] = True
    runs.iloc[reference[1:], runs.columns.get_loc("heldout")] = 0.509
    cell = (runs["frozen_layers"] == 12) & (runs["train_size"] == 1000)
    spread = 0.5 + np.linspace(-0.03, 0.03, 5)
    se = {}
    for name, scores in (("spread", spread), ("flat", np.full(5, 0.5))):
        table = runs.copy()
        table.loc[cell, "heldout"] = scores
        se[name] = two_part_contrasts(table, "heldout").set_index(["train_size", "frozen_layers"]).loc[(1000, 12)]
    difference = se["spread"]["se_lower"] ** 2 - se["flat"]["se_lower"] ** 2
    assert difference == pytest.approx(np.var(spread, ddof=1) / 5, rel=1e-6)


def test_a_reference_with_one_healthy_run_borrows_the_sizes_run_variance() -> None:
    # the per-cell healthy fit cannot give the reference's lone healthy run a variance (REML would put it near
    # zero), so the size leaves the fit and the run borrows the within-cell variance of the size's other healthy
    # cells; widening their spread (means kept) widens the contrast by (1 - P_0)^2 times the added variance
    runs = simulate_results(tasks=("sst2",), seed_sd=0.01, resid_sd=0.01, rng=21)
    at = runs["train_size"] == 1000
    reference = np.flatnonzero(((runs["frozen_layers"] == 0) & at).to_numpy())
    runs.iloc[reference[1:], runs.columns.get_loc("failed")] = True
    runs.iloc[reference[1:], runs.columns.get_loc("heldout")] = 0.509
    healthy = at & (runs["frozen_layers"] != 0)

    def spread(table: pd.DataFrame, cells: pd.Series, factor: float) -> pd.DataFrame:
        cell_mean = table[cells].groupby("frozen_layers")["heldout"].transform("mean")
        return table.assign(heldout=table["heldout"].mask(cells, cell_mean + factor * (table["heldout"] - cell_mean)))

    # frozen 2's own spread, wide enough that the floor of a quarter of the borrowed variance never binds there
    runs = spread(runs, at & (runs["frozen_layers"] == 2), 4.0)
    wider = spread(runs, healthy & (runs["frozen_layers"] != 2), 3.0)

    def pooled_variance(table: pd.DataFrame) -> float:
        return float(table[healthy].groupby("frozen_layers")["heldout"].var(ddof=1).mean())  # 5 runs each

    rows = {
        name: two_part_contrasts(table, "heldout", variance="per_cell").set_index(["train_size", "frozen_layers"])
        for name, table in (("runs", runs), ("wider", wider))
    }
    row, wide = rows["runs"].loc[(1000, 2)], rows["wider"].loc[(1000, 2)]
    added = (1 - row["p_fail_reference"]) ** 2 * (pooled_variance(wider) - pooled_variance(runs))
    assert wide["se_lower"] ** 2 - row["se_lower"] ** 2 == pytest.approx(added, rel=1e-6)
    assert added > 1e-4  # the old code lent the lone run no variance: the two intervals were the same

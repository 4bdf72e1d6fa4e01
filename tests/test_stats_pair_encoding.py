"""The cross/bi contrast: bi minus cross per cell, paired by seed, checked by hand; ``analyze`` keeps them apart."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from freezestats.analysis.pipeline import analyze
from freezestats.exceptions import ModelFitError
from freezestats.stats import simulate_results
from freezestats.stats.comparisons.pair_encoding import PAIR_ENCODING_COLUMNS, pair_encoding_contrasts


def _with_bi(frozen: int = 2, shift: float = -0.05) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A simulated table of cross runs, plus bi runs at one frozen level: cross + shift + per-seed noise."""
    table = simulate_results(frozen_levels=(0, 2), train_sizes=(50, 200), seeds=4, rng=3)
    table = table.assign(task="mrpc", trained_with="mrpc", pair_encoding="cross")
    bi = table[table["frozen_layers"] == frozen].copy()
    noise = np.random.default_rng(0).normal(0, 0.01, len(bi))
    for column in ("best_dev", "final_dev", "heldout"):
        bi[column] = bi[column] + shift + noise
    bi["pair_encoding"] = "bi"
    bi["trial"] = bi["trial"] + 1000
    return pd.concat([table, bi], ignore_index=True), bi


def test_each_contrast_is_the_mean_per_seed_difference_with_a_t_interval() -> None:
    table, _ = _with_bi()
    result = pair_encoding_contrasts(table, "heldout", task="mrpc")
    assert list(result.columns) == PAIR_ENCODING_COLUMNS
    assert list(zip(result.frozen_layers, result.train_size, strict=True)) == [(2, 50), (2, 200)]
    one = table[(table.frozen_layers == 2) & (table.train_size == 50)].pivot(
        index="seed", columns="pair_encoding", values="heldout"
    )
    diff = one["bi"] - one["cross"]
    row = result.iloc[0]
    half = stats.t.ppf(0.975, 3) * diff.std(ddof=1) / 2
    assert row.n_pairs == 4 and row.df == 3
    assert row.estimate == pytest.approx(diff.mean()) and row.estimate == pytest.approx(-0.05, abs=0.02)
    assert (row.ci_low, row.ci_high) == pytest.approx((diff.mean() - half, diff.mean() + half))
    assert row.cross == pytest.approx(one["cross"].mean()) and row.p_adj == row.p_val  # one level per size


def test_a_task_without_bi_runs_has_no_contrast() -> None:
    table, _ = _with_bi()
    with pytest.raises(ModelFitError, match="no runs with pair_encoding = 'bi'"):
        pair_encoding_contrasts(table[table.pair_encoding == "cross"], "heldout", task="mrpc")


def test_analyze_fits_the_cross_runs_and_reports_the_contrast_beside_them() -> None:
    table, bi = _with_bi()
    result = analyze(table, model="ols", tasks=["mrpc"])
    assert "pair_encoding" in result.tables and len(result.tables["pair_encoding"]) == 2
    assert result.settings["n_runs"] == len(table) - len(bi)  # the bi runs are not extra seeds of their cells
    assert any("pair_encoding = 'bi'" in warning for warning in result.warnings)


def test_the_report_states_each_gap_and_plots_only_cross_runs(tmp_path) -> None:
    from freezestats.analysis.summary import summary_lines
    from freezestats.report import build_report
    from freezestats.report.inputs import ReportInputs

    table, bi = _with_bi(shift=-0.08)
    table = table.assign(metric="f1", role="grid")
    table.to_csv(tmp_path / "runs.csv", index=False)
    build_report(
        tmp_path / "r", results=tmp_path / "runs.csv", formats="html", metric="heldout", n_boot=50, show_progress=False
    )
    qmd = (tmp_path / "r" / "report.qmd").read_text()
    section = qmd.split("## Cross against bi encoding", 1)[1].split("\n## ", 1)[0]
    assert "### mrpc" in section and "mrpc-pair-encoding" in section
    assert "n = 50, alone, frozen 2: bi is worse than cross; bi − cross = -0.0" in section
    analysis = analyze(table, model="ols", tasks=["mrpc"], response="heldout")
    runs = ReportInputs(analysis=analysis, runs=table).task_runs("mrpc")
    assert runs is not None and runs["pair_encoding"].eq("cross").all() and len(runs) == len(table) - len(bi)
    assert any(line.startswith("  cross vs bi: n = 200, alone, frozen 2: bi") for line in summary_lines(analysis))


def test_a_cell_with_one_seed_pair_is_stated_without_an_interval() -> None:
    from freezestats.analysis.summary import pair_encoding_lines

    table, bi = _with_bi()
    one_pair = table[(table["pair_encoding"] == "cross") | (table["seed"] == bi["seed"].min())]
    result = pair_encoding_contrasts(one_pair, "heldout", task="mrpc")
    assert (result["n_pairs"] == 1).all() and result["ci_low"].isna().all()
    lines = pair_encoding_lines(result, "mrpc")
    assert all("nan" not in line and "(no interval)" in line and "1 seed," in line for line in lines), lines

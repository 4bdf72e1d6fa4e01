"""Across-arm contrasts: every arm level against full fine-tuning in one mixed model with per-cell variances."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from freezestats.exceptions import ModelFitError
from freezestats.stats.comparisons.arm_levels import ARM_CONTRAST_COLUMNS, arm_codes, arm_contrasts
from freezestats.stats.simulation.results import simulate_results

# code -> (arm, arm_level): full fine-tuning, a frozen depth, a deterministic probe and a LoRA rank
ARMS = {0: ("freeze", 0), 1: ("freeze", 4), 2: ("probe", 6), 3: ("lora", 16)}
SIZES = (100, 1000)
TRUE = {(0, 100): 0.80, (1, 100): 0.74, (2, 100): 0.70, (3, 100): 0.79,
        (0, 1000): 0.90, (1, 1000): 0.88, (2, 1000): 0.78, (3, 1000): 0.90}  # fmt: skip


def _study(rng: int) -> pd.DataFrame:
    sds = pd.DataFrame(
        [(n, k, 0.0 if k == 2 else (0.03 if n == 100 else 0.005)) for n in SIZES for k in ARMS],
        columns=["train_size", "frozen_layers", "sd"],
    )
    table = simulate_results(TRUE, frozen_levels=list(ARMS), train_sizes=SIZES, seeds=5, seed_sd=0.01,
                             resid_sd=sds, rng=rng)  # fmt: skip
    # the probe is deterministic given its features and subset: the same score for every seed
    probe = table["frozen_layers"] == 2
    table.loc[probe, "best_dev"] = table.loc[probe].groupby("train_size")["best_dev"].transform("first")
    arm = table["frozen_layers"].map(lambda k: ARMS[k][0])
    level = table["frozen_layers"].map(lambda k: ARMS[k][1])
    return table.assign(arm=arm, arm_level=level, frozen_layers=np.where(arm == "freeze", level, 0))


def test_codes_put_the_reference_first_and_refuse_a_missing_one() -> None:
    codes = arm_codes(_study(0))
    assert tuple(codes.iloc[0][["arm", "arm_level", "code"]]) == ("freeze", 0, 0)
    assert sorted(codes["code"]) == [0, 1, 2, 3]
    with pytest.raises(ModelFitError, match="reference arm level lora:64"):
        arm_codes(_study(0), ("lora", 64))
    with pytest.raises(ModelFitError, match=r"no column\(s\) \['arm', 'arm_level'\]"):
        arm_codes(_study(0).drop(columns=["arm", "arm_level"]))


def test_an_unfinished_cell_is_named_by_its_arm_not_by_the_models_code() -> None:
    table = _study(0)
    unfinished = table[~((table["arm"] == "lora") & (table["train_size"] == SIZES[-1]))]
    with pytest.raises(
        ModelFitError, match=rf"1 have fewer \(runs in brackets\): lora:16 at n = {SIZES[-1]} \(0\);"
    ) as err:
        arm_contrasts(unfinished, "best_dev")
    assert "frozen_layers=" not in str(err.value)


def test_balanced_contrasts_are_the_cell_mean_differences_with_labels_decoded() -> None:
    table = _study(1)
    out = arm_contrasts(table, "best_dev")
    assert list(out.columns) == ARM_CONTRAST_COLUMNS and len(out) == 3 * len(SIZES)
    means = table.groupby(["arm", "arm_level", "train_size"])["best_dev"].mean()
    for row in out.itertuples():
        expected = means[(row.arm, row.arm_level, row.train_size)] - means[("freeze", 0, row.train_size)]
        assert row.estimate == pytest.approx(expected, abs=1e-9)
    assert set(zip(out["arm"], out["arm_level"], strict=True)) == {("freeze", 4), ("probe", 6), ("lora", 16)}


def test_a_deterministic_arm_gets_a_finite_interval_as_wide_as_the_reference_allows() -> None:
    out = arm_contrasts(_study(2), "best_dev")
    probe = out[out["arm"] == "probe"]
    assert np.isfinite(probe["se"]).all() and (probe["ci_high"] > probe["ci_low"]).all()
    lora = out[out["arm"] == "lora"].set_index("train_size")
    # runs spread more at 100 than at 1000 (0.03 against 0.005, plus the dev set's binomial noise)
    assert lora.at[100, "se"] > lora.at[1000, "se"]
    assert (out["p_adj"] >= out["p_val"] - 1e-12).all() and set(out["adjust"]) == {"holm"}


def test_intervals_cover_the_true_differences() -> None:
    """40 simulated studies: the 95% (unadjusted) intervals of the 6 contrasts cover the truth about 95% of
    the time (a loose bound: 240 intervals, binomial SD 1.4 points)."""
    hits = []
    for rng in range(40):
        out = arm_contrasts(_study(100 + rng), "best_dev", adjust="none")
        for row in out.itertuples():
            code = {v: k for k, v in ARMS.items()}[(row.arm, row.arm_level)]
            truth = TRUE[(code, row.train_size)] - TRUE[(0, row.train_size)]
            hits.append(row.ci_low <= truth <= row.ci_high)
    assert 0.89 <= np.mean(hits) <= 0.995


def test_noninferiority_is_holm_adjusted_within_a_size_and_the_answer_names_the_cheapest() -> None:
    from freezestats.stats.comparisons.arm_levels import arm_answer, arm_noninferiority

    contrasts = arm_contrasts(_study(3), "best_dev")
    ni = arm_noninferiority(contrasts, margin=0.01)
    assert (ni["p_adj"] >= ni["p_val"] - 1e-12).all()
    by = ni.set_index(["arm", "train_size"])
    # the probe loses 10 points at both sizes: never non-inferior within 1 point
    assert not by.loc[("probe", 100), "noninferior"] and not by.loc[("probe", 1000), "noninferior"]
    # hand-made table: two arm levels pass at one size, none at the other
    table = pd.DataFrame(
        {
            "arm": ["lora", "freeze", "lora", "freeze"], "arm_level": [16, 4, 16, 4],
            "train_size": [100, 100, 1000, 1000],
            "reference_arm": "freeze", "reference_level": 0, "estimate": [0.0, 0.0, -0.05, -0.04],
            "se": [0.001, 0.001, 0.01, 0.01], "df": [10.0] * 4,
        }
    )  # fmt: skip
    ni = arm_noninferiority(table, margin=0.01)
    cost = pd.DataFrame({"arm": ["lora", "freeze"], "arm_level": [16, 4], "trainable_params": [300_000, 9_000_000]})
    answer = arm_answer(ni, cost).set_index("train_size")["statement"]
    assert answer[100].endswith("lora 16 (300,000)") and "freeze 4" in answer[100]
    assert answer[1000].startswith("no arm level was shown non-inferior") and "freeze 4" in answer[1000]
    with pytest.raises(ModelFitError, match="margin"):
        arm_noninferiority(table, margin=0.0)


def test_analyze_gives_a_table_of_several_arms_the_arm_model_and_the_freeze_model_its_own_rows() -> None:
    from freezestats.analysis.pipeline import analyze

    table = _study(4).assign(trainable_params=lambda t: t["arm"].map({"freeze": 2e7, "probe": 770, "lora": 3e5}))
    result = analyze(table, response="best_dev")
    assert len(result.tables["arm_contrasts"]) == 3 * len(SIZES)
    assert set(result.tables["arm_noninferiority"]["margin"]) == {0.01}
    answer = result.tables["arm_answer"]
    assert len(answer) == len(SIZES) and answer["statement"].str.contains("full fine-tuning").all()
    # the freeze-depth model saw the freeze arm only: levels 0 and 4
    assert set(result.tables["contrasts"]["frozen_layers"]) == {4}
    assert any("freeze-depth analysis uses the freeze arm" in w for w in result.warnings)


def test_the_report_answers_which_arm(tmp_path) -> None:
    from freezestats.report import build_report

    table = _study(5).assign(
        trainable_params=lambda t: t["arm"].map({"freeze": 2e7, "probe": 770, "lora": 3e5}),
        wall_seconds=lambda t: t["arm"].map({"freeze": 60.0, "probe": 0.1, "lora": 40.0}),
        metric="accuracy",
        role="grid",
    )
    table.to_csv(tmp_path / "runs.csv", index=False)
    build_report(tmp_path / "r", results=tmp_path / "runs.csv", formats="html", metric="best_dev", n_boot=50,
                 show_progress=False)  # fmt: skip
    section = (tmp_path / "r" / "report.qmd").read_text().split("## Which arm?", 1)[1].split("## Shared", 1)[0]
    assert section.count("full fine-tuning within 1 point at n =") == len(SIZES)
    assert "sst2-arms" in section and "sst2-arm-contrasts" in section
    assert (tmp_path / "r" / "figures" / "sst2-arms.svg").stat().st_size > 1000


def test_the_probe_curve_needs_two_layers_and_draws_one_panel_per_probe_variant() -> None:
    from freezestats.report.sections.arms import probe_curve_figure

    table = _study(6)
    assert probe_curve_figure(table, "best_dev", "accuracy") is None  # the probe read one layer only
    second = table[table["arm"] == "probe"].assign(arm_level=3, best_dev=lambda t: t["best_dev"] - 0.05)
    other = second.assign(arm="probe-cls")
    figure = probe_curve_figure(pd.concat([table, second, other]), "best_dev", "accuracy")
    assert figure is not None and [ax.get_title() for ax in figure.axes] == ["probe", "probe-cls"]


def test_the_names_from_before_arm_levels_still_work_and_say_the_new_one() -> None:
    """``strategy_*`` (from freezestats.stats and from the old module) warn, naming ``arm_*``, and are the same."""
    import freezestats.stats
    from freezestats.stats.comparisons import arm_levels

    with pytest.warns(DeprecationWarning, match=r"strategy_contrasts is deprecated: use .*arm_levels\.arm_contrasts"):
        old = freezestats.stats.strategy_contrasts
    assert old is freezestats.stats.arm_contrasts is arm_levels.arm_contrasts
    pd.testing.assert_frame_equal(old(_study(1), "best_dev"), arm_contrasts(_study(1), "best_dev"))
    with pytest.warns(DeprecationWarning, match="ARM_CONTRAST_COLUMNS"):
        from freezestats.stats.comparisons.strategies import STRATEGY_CONTRAST_COLUMNS
    assert STRATEGY_CONTRAST_COLUMNS is ARM_CONTRAST_COLUMNS
    with pytest.raises(AttributeError):
        freezestats.stats.strategy_nothing  # noqa: B018


def test_an_analysis_folder_written_before_the_rename_reads_its_tables_as_arm_tables(tmp_path) -> None:
    from freezestats.analysis.pipeline import analyze
    from freezestats.analysis.result import read_analysis, write_analysis
    from freezestats.exceptions import RenamedWarning

    result = analyze(_study(4), response="best_dev")
    result.tables = {("strategy" + k[3:] if k.startswith("arm_") else k): v for k, v in result.tables.items()}
    write_analysis(result, tmp_path)  # the folder an older freezestats wrote
    assert (tmp_path / "strategy_contrasts.parquet").is_file()
    with pytest.warns(RenamedWarning, match=r"deprecated analysis tables `strategy_\*`: now `arm_\*`"):
        again = read_analysis(tmp_path)
    assert {"arm_contrasts", "arm_noninferiority", "arm_answer"} <= set(again.tables)
    assert not any(name.startswith("strategy") for name in again.tables)

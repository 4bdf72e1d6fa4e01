"""bench/adaptive_seeds.py's reading of the equal-power fixed design between the grid's designs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _scripts import load_script

BENCH = Path(__file__).resolve().parents[1] / "bench" / "adaptive_seeds.py"


def test_the_equal_power_fixed_design_is_read_between_the_two_designs_that_bracket_the_power() -> None:
    interpolated = load_script(BENCH).interpolated_seeds
    power = {"4": 0.1, "8": 0.15, "12": 0.2, "16": 0.25, "20": 0.3}  # as a saved record has them (JSON keys)
    fwer = {"4": 0.03, "8": 0.02, "12": 0.02, "16": 0.01, "20": 0.01}
    seeds, low, high = interpolated(0.225, power, fwer, 0.05)
    assert (low, high) == (12, 16) and seeds == pytest.approx(14.0)
    assert interpolated(0.3, power, fwer, 0.05) == pytest.approx((20.0, 16, 20))
    # a design over its level is no match: 12 seeds erring in 0.08 drops out, and 8..16 bracket the power
    seeds, low, high = interpolated(0.225, power, {**fwer, "12": 0.08}, 0.05)
    assert (low, high) == (8, 16) and seeds == pytest.approx(8 + 0.075 / 0.1 * 8)
    assert interpolated(0.35, power, fwer, 0.05) is None and interpolated(0.05, power, fwer, 0.05) is None
    assert interpolated(0.225, {4: 0.1, 12: 0.2, 16: 0.25}, {4: 0.0, 12: 0.0, 16: 0.0}, 0.05)[0] == pytest.approx(14)


def test_the_allocation_floor_gives_each_cell_its_own_seeds_and_the_reference_the_most_of_its_size() -> None:
    floor = load_script(BENCH.with_name("allocation_floor.py")).allocation_floor
    rows = [
        {"train_size": 50, "frozen_layers": 1, "truth": 0.0, "fixed_4": 0.3, "fixed_8": 0.6},
        {"train_size": 50, "frozen_layers": 2, "truth": -0.1, "fixed_4": 0.0, "fixed_8": 0.0},  # below the margin
        {"train_size": 100, "frozen_layers": 1, "truth": 0.0, "fixed_4": 0.5, "fixed_8": 0.5},  # flat in seeds
    ]
    # every cell gets at least the 2-seed screen; a shown depth needs its reference at as many seeds as it has
    assert floor(rows, 0.03, [4, 8], 0.25) == 2 + 2 + 2 + 4 + 4  # n=100's depth at 4 seeds, the rest screened
    assert floor(rows, 0.03, [4, 8], 0.4) == (4 + 4 + 2) + (4 + 4)  # both at 4: power (0.3 + 0.5) / 2
    assert floor(rows, 0.03, [4, 8], 0.55) == (8 + 8 + 2) + (4 + 4)  # n=50's at 8: (0.6 + 0.5) / 2
    assert floor(rows, 0.03, [4, 8], 0.6) is None
    assert floor(rows[1:2], 0.03, [4, 8], 0.1) is None  # no comparison within the margin: no power to reach


def _study_rows(study: int, claims: dict, null_claims: dict) -> list[dict]:
    """One simulated study as bench/adaptive_seeds.py saves it: two sizes, a reference and two depths at each
    (depth 2 at n = 100 is below the margin), and the null study of the same index."""
    rows = []
    for n, k, truth in [(50, 1, 0.0), (50, 2, 0.0), (100, 1, 0.0), (100, 2, -0.2)]:
        adaptive, fixed_4, fixed_8, seeds = claims[(n, k)]
        rows.append({"scenario": "alternative", "study": study, "train_size": n, "frozen_layers": k, "truth": truth,
                     "seeds": seeds, "decision": "noninferior" if adaptive else "exhausted",
                     "fixed_4": fixed_4, "fixed_8": fixed_8})  # fmt: skip
        shown = null_claims.get((n, k), (False, False, False))
        rows.append({"scenario": "null", "study": study, "train_size": n, "frozen_layers": k, "seeds": 2,
                     "decision": "noninferior" if shown[0] else "exhausted", "fixed_4": shown[1],
                     "fixed_8": shown[2], "fixed": shown[2]})  # fmt: skip
    for n in (50, 100):
        rows.append({"scenario": "alternative", "study": study, "train_size": n, "frozen_layers": 0, "seeds": 6})
        rows.append({"scenario": "null", "study": study, "train_size": n, "frozen_layers": 0, "seeds": 2,
                     "fixed": False})  # fmt: skip
    return rows


def test_the_runs_ratio_is_recomputed_from_per_study_rows_and_chunks_of_other_plans_are_refused(tmp_path) -> None:
    ratio = load_script(BENCH.with_name("adaptive_ratio.py"))
    # (adaptive claim, 4-seed claim, 8-seed claim, seeds) per comparison
    first = {(50, 1): (True, True, True, 6), (50, 2): (False, False, True, 6), (100, 1): (True, False, False, 4),
             (100, 2): (False, False, False, 2)}  # fmt: skip
    second = {(50, 1): (False, False, True, 4), (50, 2): (False, False, False, 2), (100, 1): (False, False, True, 2),
              (100, 2): (False, False, False, 2)}  # fmt: skip
    studies = pd.DataFrame(_study_rows(0, first, {(50, 2): (False, True, False)}) + _study_rows(1, second, {}))
    table = ratio.per_study(studies, 0.03, [4, 8])
    # the target comparisons are the three with truth 0; study 0 shows 2 of 3 adaptively, study 1 none
    assert table["power_adaptive"].tolist() == pytest.approx([2 / 3, 0.0])
    assert table["power_fixed_4"].tolist() == pytest.approx([1 / 3, 0.0])
    assert table["power_fixed_8"].tolist() == pytest.approx([2 / 3, 2 / 3])
    assert table["runs"].tolist() == [6 + 6 + 4 + 2 + 12, 4 + 2 + 2 + 2 + 12]
    assert table["fwer_fixed_4"].tolist() == [1.0, 0.0] and table["fwer_adaptive"].tolist() == [0.0, 0.0]
    # the pooled numbers are the per-study means, read between the designs as the bench reads them
    point = ratio.ratios(table.mean(), [4, 8], alpha=0.6, cells=6)
    between = 4 + (1 / 3 - 1 / 6) / (2 / 3 - 1 / 6) * 4
    assert point["power"] == pytest.approx(1 / 3) and point["between_seeds"] == pytest.approx(between)
    assert point["between"] == pytest.approx(26 / (6 * between)) and point["grid"] == pytest.approx(26 / 48)
    # and they are the bench's own summary of the same rows
    alt, null = (studies[studies["scenario"] == name] for name in ("alternative", "null"))
    summary = ratio.seeds_bench.summarise(alt, null, 2, 0.03, fixed_seeds=(4, 8), alpha=0.6)[-1]
    assert summary["power_adaptive"] == pytest.approx(point["power"]) and summary["runs_adaptive"] == point["runs"]
    assert summary["power_fixed"] == pytest.approx({4: 1 / 6, 8: 2 / 3}) and summary["runs_ratio"] == point["grid"]
    # 4 seeds erring in half the null studies is no match at alpha 0.05: nothing brackets the power from below
    assert np.isnan(ratio.ratios(table.mean(), [4, 8], alpha=0.05, cells=6)["between"])

    record = {"plan": {"alpha": 0.05, "margin": 0.03}, "margin": 0.03, "fixed_seeds": [4, 8], "simulated_seeds": 8,
              "failure_rates": "pooled"}  # fmt: skip
    for name, plan in [("a", record), ("b", record), ("c", {**record, "fixed_seeds": [4, 8, 12]})]:
        (tmp_path / f"{name}.json").write_text(json.dumps(plan))
    studies[studies["study"] == 0].to_parquet(tmp_path / "a_studies.parquet")
    studies[studies["study"] == 1].to_parquet(tmp_path / "b_studies.parquet")
    studies[studies["study"] == 1].to_parquet(tmp_path / "c_studies.parquet")
    _, merged = ratio.load([tmp_path / "a.json", tmp_path / "b.json"])
    assert sorted(merged["study"].unique()) == [0, 1]
    with pytest.raises(ValueError, match=r"not a chunk of .*fixed_seeds differ"):
        ratio.load([tmp_path / "a.json", tmp_path / "c.json"])
    with pytest.raises(ValueError, match="share studies"):
        ratio.load([tmp_path / "a.json", tmp_path / "a.json"])
    (tmp_path / "d.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match="no per-study rows beside it"):
        ratio.load([tmp_path / "d.json"])

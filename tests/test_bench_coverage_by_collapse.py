"""``bench/coverage_by_collapse.py``: the split of saved coverage rows by whether the contrast showed a collapse."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from _scripts import load_script

BENCH = load_script(Path(__file__).resolve().parents[1] / "bench" / "coverage_by_collapse.py")


def _rows() -> pd.DataFrame:
    rows = []
    for study in range(4):
        for n, depth, shown, covered, width, error in [(50, -1, True, False, 0.3, 0.1), (100, -1, True, study < 3, 0.2,
                                                        0.01 * study), (100, -1, False, True, 0.04, 0.0),
                                                       (200, 1, False, True, 0.05, 0.0)]:  # fmt: skip
            rows.append({"kind": "alternative", "study": study, "train_size": n, "frozen_layers": depth,
                         "collapse": shown, "task": covered, "width": width, "error": error})  # fmt: skip
    rows.append({**rows[0], "kind": "null", "task": False, "noninferior": True})  # study 0's null: an error
    rows.append({**rows[1], "kind": "null", "noninferior": False})  # study 0's other null contrast
    rows.append({**rows[0], "kind": "null", "study": 1, "noninferior": False})
    return pd.DataFrame(rows)


def test_contrasts_split_by_a_collapse_shown_at_n_100_and_above_of_the_shared_studies() -> None:
    table = BENCH.split({"a": _rows()}, studies=3, depths=[-1]).set_index(["depth", "collapse"])
    # n = 50 and the null rows are left out, study 3 is past --studies, and depth 1 was not asked for
    assert table.loc[(-1, True), "contrasts"] == 3 and table.loc[(-1, True), "cover"] == 1.0
    assert table.loc[(-1, False), "width"] == pytest.approx(4.0)  # points
    assert table.loc[(-1, True), "error_sd"] == pytest.approx(1.0)  # errors 0, 1, 2 points
    assert set(table.index) == {(-1, True), (-1, False)}


def test_each_depth_over_every_size_and_the_familywise_error_of_the_shared_studies() -> None:
    table = BENCH.over_sizes({"a": _rows()}, studies=3)
    # depth -1 over studies 0-2: n = 50 never covers, n = 100 with a collapse always, without always: 6 of 9
    assert table.loc["a", "frozen -1"] == pytest.approx(6 / 9) and table.loc["a", "frozen 1"] == 1.0
    assert table.loc["a", "familywise error"] == 0.5  # null studies 0 (a claim) and 1 (none)

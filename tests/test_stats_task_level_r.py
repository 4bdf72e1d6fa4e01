"""``crossed_contrast`` against lme4: the crossed seed x item layout of one contrast's per-item differences.

Reference values: ``lmerTest::lmer(d ~ 1 + (1 | seed) + (1 | item), REML = TRUE)``, the intercept's estimate, SE
and Satterthwaite df (tests/data/task_level_reference.R on tests/data/task_level_fixture.csv, written by
tests/data/make_task_level_fixture.py; committed as tests/data/task_level_reference.json from R 4.2.2,
lme4 1.1-31, lmerTest 3.1-3). For balanced data with every variance component inside its range REML is the
ANOVA estimate, so the two agree to the optimiser's tolerance: about 4e-7 relative in the SE, 1e-6 in the df.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _r_reference import r_reference
from _scripts import load_script

from freezestats.stats.items.task_level import crossed_contrast

DATA = Path(__file__).parent / "data"
GENERATOR = load_script(DATA / "make_task_level_fixture.py")
INSIDE = ["accuracy", "pseudo_values"]  # every component > 0


def _fixture() -> pd.DataFrame:
    return pd.read_csv(DATA / "task_level_fixture.csv")


def _mean_squares(d: np.ndarray) -> tuple[float, float, float]:
    """``MS_seed, MS_item, MS_res`` of the two-way layout without replication."""
    n_seeds, n_items = d.shape
    rows, cols = d.mean(axis=1), d.mean(axis=0)
    resid = d - rows[:, None] - cols[None, :] + d.mean()
    ms_res = float(np.sum(resid**2) / ((n_seeds - 1) * (n_items - 1)))
    return float(n_items * np.var(rows, ddof=1)), float(n_seeds * np.var(cols, ddof=1)), ms_res


def _compare(reference: dict) -> None:
    table = _fixture()
    for case in INSIDE:
        r = reference["cases"][case]
        assert not r["is_singular"] and r["var_seed"] > 1e-3 and r["var_item"] > 1e-2  # inside their range
        out = crossed_contrast(GENERATOR.differences(table, case))
        assert out["estimate"] == pytest.approx(r["estimate"], rel=1e-9)
        assert out["se"] == pytest.approx(r["se"], rel=2e-6)
        assert out["df"] == pytest.approx(r["df"], rel=1e-4)

    # Seed variance at 0 (the fixture's per-seed means agree better than chance: MS_seed < MS_res). lmer drops
    # (1 | seed) and fits the one-way layout over items: SE^2 = MS_item / (S I) on I - 1 df. crossed_contrast
    # keeps the untruncated seed part s_d^2 / S = MS_seed / (S I) (the paired t's) beside the item part
    # (MS_item - MS_res) / (S I), so its variance is smaller than lmer's by (MS_res - MS_seed) / (S I) > 0:
    # here lmer is the conservative one (0.0187 against 0.0132), and its df is the items' alone. Both estimate
    # Var(mean D) without bias before truncation; they differ by design, exactly by that amount.
    r = reference["cases"]["seed_boundary"]
    d = GENERATOR.differences(table, "seed_boundary")
    ms_seed, ms_item, ms_res = _mean_squares(d)
    cells = d.size
    assert r["is_singular"] and r["var_seed"] == 0 and ms_seed < ms_res
    out = crossed_contrast(d)
    assert out["estimate"] == pytest.approx(r["estimate"], rel=1e-9)
    assert r["se"] == pytest.approx(np.sqrt(ms_item / cells), rel=2e-6)
    assert r["df"] == pytest.approx(d.shape[1] - 1, rel=1e-4)
    assert out["se"] ** 2 == pytest.approx(r["se"] ** 2 - (ms_res - ms_seed) / cells, rel=1e-5)
    assert out["se_item"] < out["se"] < r["se"]


def test_the_fixture_is_what_its_generator_writes() -> None:
    pd.testing.assert_frame_equal(GENERATOR.make_fixture(), _fixture(), check_dtype=False)


def test_crossed_contrast_matches_the_committed_lmer_fit() -> None:
    _compare(json.loads((DATA / "task_level_reference.json").read_text()))


def test_crossed_contrast_matches_lmer_run_now_where_r_is(tmp_path: Path) -> None:
    script, fixture, committed = "task_level_reference.R", "task_level_fixture.csv", "task_level_reference.json"
    _compare(r_reference(script, fixture, committed, ("lme4", "lmerTest", "jsonlite"), tmp_path))

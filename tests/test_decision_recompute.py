"""The Methods paragraph is enough: an independent 40-line script (pandas + scipy) rebuilds every bound."""

from __future__ import annotations

import subprocess
import sys
from io import StringIO
from pathlib import Path

import pandas as pd
import pytest

from freezestats.analysis.decision import METHODS, decide
from tests.test_decision_answer import _study

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "docs" / "recompute_decision.py"
EXAMPLE = ROOT / "examples" / "sst2-decide-minilm"


def _recompute(results: Path, predictions: Path) -> pd.DataFrame:
    done = subprocess.run([sys.executable, str(SCRIPT), str(results), str(predictions)], capture_output=True,
                          text=True, check=True)  # fmt: skip
    return pd.read_csv(StringIO(done.stdout))


def _same(ours: pd.DataFrame, theirs: pd.DataFrame) -> None:
    ours = ours.sort_values(["train_size", "frozen_layers"]).reset_index(drop=True)
    theirs = theirs.sort_values(["train_size", "frozen_layers"]).reset_index(drop=True)
    assert ours[["train_size", "frozen_layers", "both_trained"]].to_numpy().tolist() == (
        theirs[["train_size", "frozen_layers", "both_trained"]].to_numpy().tolist()
    )
    for column in ("cost", "ci_low", "ci_high"):
        assert ours[column].to_numpy() == pytest.approx(theirs[column].to_numpy(), abs=1e-9, nan_ok=True)
    assert ours["excess_collapse_p"].to_numpy() == pytest.approx(theirs["excess_p"].to_numpy())
    for verdict, column in (("within the margin", "within"), ("costs more than the margin", "beyond")):
        assert (ours["verdict"] == verdict).tolist() == theirs[column].astype(bool).tolist(), column


def test_the_methods_paragraph_is_at_most_150_words_and_the_script_40_lines() -> None:
    assert len(METHODS.split()) <= 150
    assert len(SCRIPT.read_text().splitlines()) <= 40


def test_the_script_rebuilds_the_committed_example_from_its_export() -> None:
    runs, items = pd.read_csv(EXAMPLE / "results.csv"), pd.read_parquet(EXAMPLE / "predictions.parquet")
    pool = pd.read_parquet(EXAMPLE / "predictions-pool.parquet")
    (decision,) = decide(runs, items, pool)
    _same(decision.table(), _recompute(EXAMPLE / "results.csv", EXAMPLE / "predictions.parquet"))


def test_the_script_rebuilds_a_study_with_collapsed_runs(tmp_path: Path) -> None:
    runs, items, pool = _study({50: 0.5, 1000: 0.05}, {0: 0.0, -1: 0.0, 1: -0.2, 2: -1.0, 6: -12.0})
    runs.to_csv(tmp_path / "results.csv", index=False)
    items.to_parquet(tmp_path / "predictions.parquet")
    pool.to_parquet(tmp_path / "predictions-pool.parquet")
    ours = decide(runs, items, pool)[0].table()
    assert (ours["depth_collapsed"] + ours["full_collapsed"]).sum() > 0
    _same(ours, _recompute(tmp_path / "results.csv", tmp_path / "predictions.parquet"))

"""The cost interval against lmerTest (``d ~ 1 + (1|pair) + (1|item)``, REML, Satterthwaite) on the pilot's data.

The committed R output is always compared; with ``Rscript`` (and lmerTest) on PATH, R is run again first.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

R_DIR = Path(__file__).resolve().parents[1] / "bench" / "r"


def _python(folder: Path) -> pd.DataFrame:
    subprocess.run([sys.executable, str(R_DIR / "crossed_cost.py"), str(folder)], check=True, capture_output=True)
    return pd.read_csv(folder / "crossed_cost_python.csv")


def test_the_cost_interval_matches_lmertest(tmp_path: Path) -> None:
    ours = _python(tmp_path)
    if (
        shutil.which("Rscript")
        and subprocess.run(["Rscript", "-e", "library(lmerTest)"], capture_output=True).returncode == 0
    ):
        subprocess.run(["Rscript", str(R_DIR / "crossed_cost.R"), str(tmp_path)], check=True, capture_output=True)
        theirs = pd.read_csv(tmp_path / "crossed_cost_r.csv")
    else:
        theirs = pd.read_csv(R_DIR / "crossed_cost_r.csv")  # committed: R 4.x, lmerTest, on this same data
    for column in ("estimate", "se", "ci_low", "ci_high"):
        assert ours[column].to_numpy() == pytest.approx(theirs[column].to_numpy(), abs=1e-3), column
    assert ours["df"].to_numpy() == pytest.approx(theirs["df"].to_numpy(), rel=1e-2)

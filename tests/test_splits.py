"""The shipped split index files are exactly what freezestats draws at run time."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _scripts import load_script

REPO = Path(__file__).resolve().parents[1]


def _make_splits():
    return load_script(REPO / "data" / "splits" / "make_splits.py")


@pytest.mark.parametrize("task", ["sst2", "cola"])
def test_shipped_splits_match_a_fresh_draw(task: str, glue_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FREEZESTATS_DATA", str(glue_dir))
    shipped = json.loads((REPO / "data" / "splits" / f"{task}_draw0.json").read_text())
    assert shipped == json.loads(json.dumps(_make_splits().splits_for(task)))
    labels = pd.read_parquet(glue_dir / task / "train.parquet")["label"].to_numpy()
    sizes = sorted(int(s) for s in shipped["indices"])
    previous: set[int] = set()
    for size in sizes:
        idx = np.asarray(shipped["indices"][str(size)])
        assert len(idx) == size and previous <= set(idx.tolist())
        previous = set(idx.tolist())
        share = labels[idx].mean()
        assert abs(share - labels.mean()) <= 1 / size + 1e-9  # within one example of the pool's proportion

"""A smaller version of the shipped ``study/multitask-minilm.toml``, run end to end: run, export, analyze.

Same tasks, group, sampling, ``freeze_for`` and cross/bi axis as the shipped study; a 2-layer random model, one
train size, two seeds and one epoch instead, so that it runs in the suite. The shipped study's full run and
its findings are in ``examples/multitask-minilm/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest
from _factories import write_spec

from freezestats.analysis.result import read_analysis
from freezestats.cli.main import main
from freezestats.tasks.bundled import bundled_path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


SMALL_GLUE = True  # runs score 256 dev rows per task (conftest.glue_dir): these tests check the study, not scores


def _small_study(model: Path) -> dict:
    raw = tomllib.loads(bundled_path("study/multitask-minilm.toml").read_text())
    raw["model"]["name"] = str(model)
    raw["grid"] |= {"frozen_layers": [0, 2], "bi_frozen_layers": [2], "train_sizes": [32], "seeds": [1, 2]}
    raw["training"] |= {"epochs": 1, "eval_every_epochs": 1, "max_length": 64, "eval_batch_size": 256}
    return raw


def test_the_shipped_multitask_study_runs_small_and_analyzes(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = _small_study(tiny_model)
    assert raw["tasks"] == ["sst2", "mrpc", "stsb"] and raw["groups"][0]["tasks"] == ["sst2", "mrpc", "stsb"]
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    spec = write_spec(tmp_path, raw)
    assert main(["run", "--study", str(spec), "--storage", storage, "--data-dir", str(glue_dir), "--no-progress"]) == 0
    # alone: 3 tasks x 2 levels x 2 seeds + bi for mrpc and stsb at level 2; the group: 2 levels + bi, x 2 seeds
    assert "22/22 cells complete, 0 failed" in capsys.readouterr().out
    results = tmp_path / "results.parquet"
    assert main(["export", "--storage", storage, "-o", str(results)]) == 0
    table = pd.read_parquet(results)
    assert len(table) == 16 + 6 * 3  # one row per (trial, task)
    assert set(table.loc[table.task == "stsb", "metric"]) == {"pearson"}
    assert set(table.loc[table.task == "mrpc", "metric"]) == {"f1"}
    out = tmp_path / "analysis"
    assert main(["analyze", "--results", str(results), "-o", str(out), "--metric", "best_dev"]) == 0
    analysis = read_analysis(out)
    pairs = analysis.tables["pair_encoding"]
    assert sorted(set(zip(pairs["task"], pairs["trained_with"], strict=True))) == [
        ("mrpc", "mrpc"),
        ("mrpc", "sst2+mrpc+stsb"),
        ("sst2", "sst2+mrpc+stsb"),  # the group's SST-2 shares the encoder that read the pairs apart
        ("stsb", "sst2+mrpc+stsb"),
        ("stsb", "stsb"),
    ]
    assert pairs["frozen_layers"].eq(2).all() and pairs["n_pairs"].eq(2).all()
    shared = analysis.tables["shared_encoder"]
    assert set(shared["task"]) == {"sst2", "mrpc", "stsb"}
    # the report says what a group and a bi run are, and counts the rows the freeze model sets aside
    report = tmp_path / "report"
    args = ["report", "--storage", storage, "--analysis", str(out), "-o", str(report), "--format", "html"]
    assert main([*args, "--no-progress"]) == 0
    qmd = (report / "report.qmd").read_text()
    assert 'runs alone (and 12 in groups, 10 bi-encoded), mixed model"' in qmd.split("\n---", 1)[0]
    assert "**Task groups.** `sst2+mrpc+stsb` trains one shared encoder with a head per task" in qmd
    assert "sampling `proportional`" in qmd and "no update from any task's batches (`freeze_for = 'all'`)" in qmd
    assert "**Pair encoding.**" in qmd and "at frozen 2, bi-encoded as well" in qmd
    assert "**Runs.** 12 cross-encoded runs alone (and 12 in groups, 10 bi-encoded); the freeze model's 6 cells" in qmd
    pair_section = qmd.split("## Cross against bi encoding", 1)[1].split("\n## ", 1)[0]
    sst2, mrpc = pair_section.split("### sst2", 1)[1], pair_section.split("### mrpc", 1)[1].split("### ", 1)[0]
    assert sst2.lstrip().startswith("sst2 has single sentences") and "single sentences" not in mrpc
    assert "over 2 seeds of a discrete choice" in qmd  # the operating point's bootstrap: this study's seeds

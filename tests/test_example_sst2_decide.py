"""The committed ``examples/sst2-decide-minilm``: its runs, pool predictions and subsets, and the README's numbers."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

from freezestats.analysis.plan import plan_study
from freezestats.results.item_predictions import study_artifacts

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sst2-decide-minilm"


def _findings() -> ModuleType:
    """The example's findings.py, loaded as a module."""
    spec = importlib.util.spec_from_file_location("sst2_decide_findings", EXAMPLE / "findings.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_every_run_was_scored_on_the_whole_pool_with_its_own_subset() -> None:
    runs = pd.read_csv(EXAMPLE / "results.csv")
    pool = pd.read_parquet(EXAMPLE / "predictions-pool.parquet")
    assert (runs["n_pool"] == 5000).all() and (runs["subset_draw"] == runs["seed"]).all()
    assert runs.groupby(["train_size", "frozen_layers"]).size().eq(10).all()
    accuracy = pool.assign(right=pool["prediction"] == pool["label"]).groupby("trial")["right"].mean()
    assert accuracy.reindex(runs["trial"]).to_numpy() == pytest.approx(runs["pool_score"].to_numpy())


def test_the_readme_findings_are_what_the_analysis_computes_from_the_export() -> None:
    findings = _findings()
    assert findings.readme_section(EXAMPLE / "README.md") == findings.findings_markdown(), (
        "run examples/sst2-decide-minilm/findings.py --write"
    )


def test_the_database_gives_the_export_and_the_plan_reads_it() -> None:
    study, folder = study_artifacts(f"sqlite:///{EXAMPLE / 'study.db'}", None)
    (plan,) = plan_study(study, folder)
    runs = pd.read_csv(EXAMPLE / "results.csv")
    assert plan.items == 5000 and plan.population == "SST-2 sentences outside training"
    assert {(d.train_size, d.depth) for d in plan.depths} == {
        (n, k) for n, k in runs[["train_size", "frozen_layers"]].itertuples(index=False) if k != 0
    }
    readme = (EXAMPLE / "README.md").read_text(encoding="utf-8").replace("−", "-")
    pilot = [d for d in plan.depths if d.train_size == 1000 and d.depth in (1, 2)]
    for row in pilot:  # the pilot's table, written before stage 2, is what the database still gives for its cells
        c = row.cost
        shown = f"| frozen {row.depth} | {c.estimate:+.2f} [{c.ci_low:+.2f}, {c.ci_high:+.2f}]"
        assert shown.replace("+", "") in readme.replace("+", ""), shown
        seeds = row.at_study_items.seeds if row.at_study_items else ">200"
        assert re.search(rf"\| {seeds} / ", readme.split(f"| frozen {row.depth} |")[1].split("\n")[0])


def test_the_main_readme_opens_its_findings_with_this_example() -> None:
    readme = (EXAMPLE.parents[1] / "README.md").read_text(encoding="utf-8")
    first = readme.split("## What it found on real data", 1)[1].strip().splitlines()[0]
    assert first == _findings().readme_line()

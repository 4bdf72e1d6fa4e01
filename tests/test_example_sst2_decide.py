"""The committed pilot of ``examples/sst2-decide-minilm``: its pool predictions, subsets and the README's numbers."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from freezestats.analysis.plan import plan_study
from freezestats.results.item_predictions import study_artifacts

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sst2-decide-minilm"


def test_every_pilot_run_was_scored_on_the_whole_pool_with_its_own_subset() -> None:
    runs = pd.read_csv(EXAMPLE / "results.csv")
    pool = pd.read_parquet(EXAMPLE / "predictions-pool.parquet")
    assert len(runs) == 30 and (runs["n_pool"] == 5000).all() and (runs["subset_draw"] == runs["seed"]).all()
    accuracy = pool.assign(right=pool["prediction"] == pool["label"]).groupby("trial")["right"].mean()
    assert accuracy.reindex(runs["trial"]).to_numpy() == pytest.approx(runs["pool_score"].to_numpy())


def test_the_readme_table_is_what_plan_computes_from_the_database() -> None:
    study, folder = study_artifacts(f"sqlite:///{EXAMPLE / 'study.db'}", None)
    (plan,) = plan_study(study, folder)
    readme = (EXAMPLE / "README.md").read_text(encoding="utf-8").replace("−", "-")
    for row in plan.depths:
        c = row.cost
        shown = f"| frozen {row.depth} | {c.estimate:+.2f} [{c.ci_low:+.2f}, {c.ci_high:+.2f}]"
        assert shown.replace("+", "") in readme.replace("+", ""), shown
        seeds = row.at_study_items.seeds if row.at_study_items else ">200"
        assert re.search(rf"\| {seeds} / ", readme.split(f"| frozen {row.depth} |")[1].split("\n")[0])

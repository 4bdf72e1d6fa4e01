"""Write ``data/plan/prior.csv``: the variance components and run times that ``freezestats plan SPEC`` prices a
design with before any pilot, from the committed decisive example's database (its decision table).

    python bench/plan_prior.py   # after examples/sst2-decide-minilm changes
"""

from __future__ import annotations

from pathlib import Path

from freezestats.analysis.decision import decide
from freezestats.results.export import results_table
from freezestats.results.item_predictions import item_predictions, pool_item_predictions, study_artifacts

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "sst2-decide-minilm"
COLUMNS = ["task", "metric", "population", "items", "train_size", "frozen_layers", "both_trained", "cost", "sd_seed",
           "sd_item", "sd_res", "seconds", "full_seconds"]  # fmt: skip


def main() -> None:
    study, folder = study_artifacts(f"sqlite:///{EXAMPLE / 'study.db'}", None)
    runs = results_table(study)
    pools = {"sst2": "SST-2 sentences outside training"}
    (decision,) = decide(runs, item_predictions(runs, folder), pool_item_predictions(runs, folder), populations=pools)
    table = decision.table()[COLUMNS].assign(source="examples/sst2-decide-minilm", device=runs["device"].iloc[0],
                                             precision=runs["precision"].iloc[0])  # fmt: skip
    out = ROOT / "data" / "plan" / "prior.csv"
    table.to_csv(out, index=False, float_format="%.6g")
    print(f"wrote {out} ({len(table)} rows)")


if __name__ == "__main__":
    main()

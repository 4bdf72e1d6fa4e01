"""Write the pilot's per-item differences (frozen 1 and 2 against 0, n = 1000, pool items) for the R check.

python bench/r/crossed_cost.py && Rscript bench/r/crossed_cost.R
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from freezestats.analysis.decision import paired_differences
from freezestats.results.export import results_table
from freezestats.results.item_predictions import item_predictions, pool_item_predictions, study_artifacts
from freezestats.stats.decision.collapse import collapsed
from freezestats.stats.decision.crossed import crossed_cost

HERE = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
DB = Path(__file__).resolve().parents[2] / "examples" / "sst2-decide-minilm" / "study.db"

study, folder = study_artifacts(f"sqlite:///{DB}", None)
runs = results_table(study)
items = item_predictions(runs, folder)
pool = pool_item_predictions(runs, folder).rename(columns={"prediction": "answer"})
gone = collapsed(items, regression=False)
rows, ours = [], []
for depth in (1, 2):
    d, _ = paired_differences(runs, pool, gone, 1000, depth)
    k, m = d.shape
    rows.append(pd.DataFrame({"depth": depth, "pair": np.repeat(np.arange(k), m), "item": np.tile(np.arange(m), k),
                              "d": d.ravel()}))  # fmt: skip
    c = crossed_cost(d)
    ours.append(
        {"depth": depth, "estimate": c.estimate, "se": c.se, "df": c.df, "ci_low": c.ci_low, "ci_high": c.ci_high}
    )
pd.concat(rows).to_csv(HERE / "crossed_cost_input.csv", index=False)
pd.DataFrame(ours).to_csv(HERE / "crossed_cost_python.csv", index=False)
print(pd.DataFrame(ours).to_string(index=False))

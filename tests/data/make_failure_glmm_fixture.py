"""Write tests/data/failure_glmm_fixture.csv: which runs failed in one simulated blog-shaped SST-2 study.

    python tests/data/make_failure_glmm_fixture.py [OUTPUT_CSV]

The study is ``bench/coverage.py``'s scenario b (run SD per cell from the blog appendix, 5% of runs collapsed to
the majority class) with a 10% collapse rate instead, so that the pooled failure model has failures at most
levels; failure is judged as ``analyze`` judges it (the binomial rule on the best checkpoint). On top, runs of
frozen 8 and 10 fail with probability 0.3 more, and the cells at n = 100 of frozen -1, 2 and 4 with 0.4, so that
both of the model's random-effect SDs (level and cell) are away from zero and glmer's fit is not singular. The
fixture keeps
what the failure model sees: ``frozen_layers, train_size, seed, failed``, plus the model's covariate
``log2_size_c`` (log2 of the size, centred over the runs that enter the fit) and ``cell``, both for R.
``tests/data/failure_glmm_reference.R`` fits it with glmer; ``tests/test_stats_failure_pooled.py`` compares.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from freezestats.stats import simulate_results
from freezestats.stats.failures.rates import flag_failures
from freezestats.stats.simulation.results import blog_run_sds

STUDY_SEED = 7
EXTRA_FAILURE = {8: 0.3, 10: 0.3}  # per frozen level
EXTRA_CELL_FAILURE = {(-1, 100): 0.4, (2, 100): 0.4, (4, 100): 0.4}


def fixture() -> pd.DataFrame:
    table = simulate_results(
        seed_sd=0.01, seed_size_sd=0.005, resid_sd=blog_run_sds("sst2", per="cell"), fail_rate=0.10, rng=STUDY_SEED
    )
    failed = flag_failures(table, checkpoint="best", rule="binomial").fillna(False).astype(bool)
    out = table[["frozen_layers", "train_size", "seed"]].assign(failed=failed.to_numpy().astype(int))
    extra = np.array(
        [
            EXTRA_FAILURE.get(level, 0.0) + EXTRA_CELL_FAILURE.get((level, size), 0.0)
            for level, size in zip(out["frozen_layers"], out["train_size"], strict=True)
        ]
    )
    draws = np.random.default_rng(STUDY_SEED).random(len(out))
    out["failed"] = (out["failed"].astype(bool) | (draws < extra)).astype(int)
    out["cell"] = out["frozen_layers"].astype(str) + ":" + out["train_size"].astype(str)
    return out


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("failure_glmm_fixture.csv")
    fixture().to_csv(target, index=False, float_format="%.17g")
    print(f"wrote {target}")

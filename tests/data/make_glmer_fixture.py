"""Write tests/data/glmer_fixture.csv: a simulated SST-2 accuracy table for the binomial GLMM tests.

    python tests/data/make_glmer_fixture.py [OUTPUT_CSV]

The table has the blog's shape (task sst2, frozen_layers {0, 2, 4, 6}, train_size {50, 200, 1000}, five seeds, one
run per seed and cell, 872 evaluation items) and is drawn from the model that
``freezestats.stats.models.laplace.fit_binomial_laplace`` fits and ``tests/data/glmer_reference.R`` fits with glmer::

    n_correct ~ Binomial(872, expit(cell logit + seed effect + run effect)),
    seed effect ~ N(0, 0.1^2),   run effect ~ N(0, sd_run(train_size)^2),  sd_run = 0.6 / 0.25 / 0.08.

The run-level SD shrinks with the training set on purpose: a model with one run variance for all sizes is then
misspecified, which is what the per-size variance terms are for. The numpy seed is fixed, so the committed CSV is
reproducible; it was chosen among the first few seeds so that glmer's estimates of every SD are away from zero
(lme4 computes no Hessian, hence no ``use.hessian = TRUE`` standard errors, for a singular fit).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit, logit

NUMPY_SEED = 20240607
FROZEN_LAYERS = (0, 2, 4, 6)
TRAIN_SIZES = (50, 200, 1000)
SEEDS = (1, 2, 3, 4, 5)
N_EVAL = 872
SEED_SD = 0.1
RUN_SD = {50: 0.6, 200: 0.25, 1000: 0.08}
# True accuracies (rows: frozen layers, columns: train sizes): freezing helps a little with 50 examples and costs
# a little with 1000, so the interaction terms are not zero.
TRUE_ACCURACY = {
    0: (0.62, 0.80, 0.895),
    2: (0.64, 0.80, 0.89),
    4: (0.63, 0.78, 0.875),
    6: (0.58, 0.74, 0.85),
}


def make_fixture(numpy_seed: int = NUMPY_SEED) -> pd.DataFrame:
    """Draw the table; one row per run, in (frozen_layers, train_size, seed) order."""
    rng = np.random.default_rng(numpy_seed)
    seed_effect = dict(zip(SEEDS, rng.normal(0.0, SEED_SD, size=len(SEEDS)), strict=True))
    rows = []
    run = 0
    for frozen in FROZEN_LAYERS:
        for size_index, size in enumerate(TRAIN_SIZES):
            for seed in SEEDS:
                eta = logit(TRUE_ACCURACY[frozen][size_index]) + seed_effect[seed] + rng.normal(0.0, RUN_SD[size])
                rows.append(
                    {
                        "task": "sst2",
                        "frozen_layers": frozen,
                        "train_size": size,
                        "seed": seed,
                        "run": run,
                        "n_correct": int(rng.binomial(N_EVAL, expit(eta))),
                        "n_eval": N_EVAL,
                    }
                )
                run += 1
    return pd.DataFrame(rows)


def main(argv: list[str]) -> None:
    output = Path(argv[0]) if argv else Path(__file__).resolve().parent / "glmer_fixture.csv"
    make_fixture().to_csv(output, index=False)


if __name__ == "__main__":
    main(sys.argv[1:])

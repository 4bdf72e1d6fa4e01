"""Write tests/data/shared_encoder_fixture.csv: one STS-B-shaped task trained alone and in a group, for the
nlme cross-check of the shared-encoder model (tests/data/shared_encoder_reference.R).

The cell means and run SDs are the multi-task worked example's STS-B cells, rounded (examples/multitask-minilm),
with 5 seeds instead of 3, run SDs of at least 0.02 and seed and seed:size effects, so that every variance of
the fit lies inside its range. With the example's own SDs (0.004 in some group cells, against seed effects of
0.01) and 3-4 seeds, REML puts some cell's variance at its floor in almost every draw, and nlme cannot follow a
variance to a floor: such a fixture would test the two optimisers' stopping rules rather than the model.

    python tests/data/make_shared_encoder_fixture.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

GROUP = "sst2+mrpc+stsb"
# (trained_with, frozen_layers, train_size) -> (mean, run SD)
CELLS = {
    ("stsb", 0, 200): (0.506, 0.073), ("stsb", 3, 200): (0.460, 0.066), ("stsb", 5, 200): (0.137, 0.048),
    ("stsb", 0, 1000): (0.807, 0.011), ("stsb", 3, 1000): (0.743, 0.011), ("stsb", 5, 1000): (0.478, 0.007),
    (GROUP, 0, 200): (0.618, 0.008), (GROUP, 3, 200): (0.623, 0.010), (GROUP, 5, 200): (0.238, 0.023),
    (GROUP, 0, 1000): (0.799, 0.006), (GROUP, 3, 1000): (0.772, 0.004), (GROUP, 5, 1000): (0.518, 0.011),
}  # fmt: skip
SEEDS, SEED_SD, SEED_SIZE_SD, SD_FLOOR, RNG = 5, 0.02, 0.01, 0.02, 1


def make_fixture(rng: int = RNG) -> pd.DataFrame:
    """The fixture's runs: one row per (cell, seed), the held-out metric rounded to 6 decimals."""
    gen = np.random.default_rng(rng)
    seed_effect = gen.normal(0, SEED_SD, SEEDS)
    seed_size = {(s, n): gen.normal(0, SEED_SIZE_SD) for s in range(SEEDS) for n in (200, 1000)}
    rows = []
    for (trained_with, frozen, size), (mean, sd) in CELLS.items():
        for s in range(SEEDS):
            value = mean + seed_effect[s] + seed_size[(s, size)] + gen.normal(0, max(sd, SD_FLOOR))
            rows.append(("stsb", trained_with, frozen, size, s + 1, round(value, 6), False))
    columns = ["task", "trained_with", "frozen_layers", "train_size", "seed", "heldout", "failed"]
    return pd.DataFrame(rows, columns=columns)


if __name__ == "__main__":
    make_fixture().to_csv(Path(__file__).with_name("shared_encoder_fixture.csv"), index=False)

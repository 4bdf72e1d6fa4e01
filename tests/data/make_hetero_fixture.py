"""Regenerate ``hetero_fixture.csv``: a blog-shaped SST-2 table whose run SD shrinks with the train size.

    python tests/data/make_hetero_fixture.py

Per-size residual SDs 0.07 / 0.02 / 0.0044 at 50 / 200 / 1000 examples (the blog appendix's median SST-2 cell
SDs are 0.071 at 50 and 0.0044 at 1000), a seed SD of 0.01 and a seed-by-size SD of 0.012; 5 seeds, frozen
-1/0/2/4. ``nlme_reference.R`` fits it with nlme; ``tests/test_stats_grouped.py`` compares.
"""

from __future__ import annotations

from pathlib import Path

from freezestats.stats import simulate_results

if __name__ == "__main__":
    table = simulate_results(
        frozen_levels=(-1, 0, 2, 4),
        train_sizes=(50, 200, 1000),
        seed_sd=0.01,
        seed_size_sd=0.012,
        resid_sd={50: 0.07, 200: 0.02, 1000: 0.0044},
        rng=20261122,
    )
    columns = ["task", "frozen_layers", "train_size", "seed", "best_dev", "n_eval", "failed", "role", "state"]
    table[columns].to_csv(Path(__file__).with_name("hetero_fixture.csv"), index=False, float_format="%.10g")

"""The rate difference's 95% interval of one pair of cells, unpaired, paired by seed (SD 0-4) and with the limit
where the seed decides, for a few failure patterns of 5 seeds at each of 5 sizes.

Why: how much concordant failures can narrow the difference a five-seed pair leaves open is the bound on what any
pairing can take off the shallow depths' failure part (README, *Letting the seed decide*).

    python bench/seed_decide_pair.py
"""

from __future__ import annotations

import pandas as pd

from freezestats.stats.failures import seed_pairs
from freezestats.stats.failures.pooled_rates import pooled_failure_fit
from freezestats.stats.items.task_two_part import PAIR_LEVEL_SD, seed_groups

SIZES = (50, 100, 200, 500, 1000)
#: failing seeds (of 0-4) per (depth, size); the reference is depth 0
PATTERNS = {
    "concordant at 50 and 100": {(-1, 50): {0, 1, 2}, (0, 50): {0, 1, 2}, (-1, 100): {0}, (0, 100): {0}},
    "concordant at 50-200": {
        (-1, 50): {0, 1, 2, 3},
        (0, 50): {0, 1, 2, 3},
        (-1, 100): {0, 1},
        (0, 100): {0, 1},
        (-1, 200): {0},
        (0, 200): {0},
    },
    "discordant at 50 and 100": {(-1, 50): {0, 1, 2, 3}, (0, 50): {0, 1}, (-1, 100): {0}},
}


def pair(failing: dict[tuple[int, int], set[int]]) -> pd.DataFrame:
    rows = [{"frozen_layers": depth, "train_size": n, "seed": s, "failed": s in failing.get((depth, n), set())}
            for depth in (-1, 0) for n in SIZES for s in range(5)]  # fmt: skip
    return pd.DataFrame(rows)


def main() -> None:
    for name, failing in PATTERNS.items():
        runs = pair(failing)
        print(f"{name}: P(depth) - P(reference), 95% interval, per size")
        for label, groups, decide in (("unpaired", None, False), ("paired, SD 0-4", seed_groups(runs), False),
                                      ("the seed may decide", seed_groups(runs), True)):  # fmt: skip
            seed_pairs.SEEDS_DECIDE = decide
            p, _, posterior = pooled_failure_fit(runs, runs["failed"].to_numpy(), PAIR_LEVEL_SD, seed_groups=groups)
            cells = []
            for n in SIZES:
                low, high = posterior.interval([((-1, n), 1.0), ((0, n), -1.0)], 0.95)
                cells.append(f"{n}: {p[(-1, n)] - p[(0, n)]:+.2f} [{low:+.2f}, {high:+.2f}]")
            print(f"  {label:20s} " + "  ".join(cells))


if __name__ == "__main__":
    main()

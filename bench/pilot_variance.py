"""Issue 60's pilot: the paired difference's variance split three ways, and the plan each implies.

For every depth of the pilot (frozen 1 and 2 against 0 at n = 1000, 10 seeds with their own subsets), the seed
pairs in which neither run collapsed give per-item differences in points, and the crossed cost interval
(``freezestats.stats.decision.crossed``) splits their variance into seed, item and residual parts. Three item sets:

* the 436 items of the dev set's score half (what the blog protocol scores);
* 436 items drawn from the evaluation pool (same count, new sentences: the population changes, not the size);
* all 5,000 pool items.

Printed per set: the cost interval, the seed SD of the paired difference (its seed part), its item SD, the
residual SD, the share of Var(mean) each carries at 10 seeds, and the seeds the plan asks for a 1-point margin
at 80% power.

    python bench/pilot_variance.py --storage sqlite:///examples/sst2-decide-minilm/study.db
"""

from __future__ import annotations

import argparse

import numpy as np

from freezestats.analysis.decision import paired_differences
from freezestats.results.export import results_table
from freezestats.results.item_predictions import item_predictions, pool_item_predictions, study_artifacts
from freezestats.stats.decision.collapse import collapsed
from freezestats.stats.decision.crossed import crossed_cost
from freezestats.stats.decision.plan import seeds_needed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", required=True)
    parser.add_argument("--margin", type=float, default=1.0)
    args = parser.parse_args()
    study, folder = study_artifacts(args.storage, None)
    runs = results_table(study)
    items, pool = item_predictions(runs, folder), pool_item_predictions(runs, folder)
    gone = collapsed(items, regression=False)
    dev = items[items["half"] == "score"].rename(columns={"prediction_heldout": "answer"})
    pool = pool.rename(columns={"prediction": "answer"})
    rng = np.random.default_rng(0)
    few = rng.choice(pool["idx"].unique(), size=dev["idx"].nunique(), replace=False)
    sets = {"dev score half (436)": dev, "pool, 436 drawn": pool[pool["idx"].isin(few)], "pool (5000)": pool}
    print(f"{len(runs)} runs; collapsed (select half, >= 95% one class): {int(gone.sum())}")
    for size in sorted(runs["train_size"].unique()):
        for depth in sorted(d for d in runs[runs["train_size"] == size]["frozen_layers"].unique() if d != 0):
            print(f"n = {size}, frozen {depth} - frozen 0:")
            for name, scored in sets.items():
                d, _ = paired_differences(runs, scored, gone, int(size), int(depth))
                c = crossed_cost(d)
                k, m = d.shape
                v = c.parts
                total = v.seed / k + v.item / m + v.residual / (k * m)
                need = seeds_needed(v, m, args.margin)
                print(
                    f"  {name:>22}: {c.estimate:+.2f} [{c.ci_low:+.2f}, {c.ci_high:+.2f}] pts, {k} pairs; "
                    f"SD seed {v.seed**0.5:.2f}, item {v.item**0.5:.2f}, residual {v.residual**0.5:.1f}; "
                    f"Var(mean) shares seed {v.seed / k / total:.0%} item {v.item / m / total:.0%} "
                    f"residual {v.residual / (k * m) / total:.0%}; seeds for 80% at {m} items: "
                    f"{need.seeds if need else '>200'}"
                )


if __name__ == "__main__":
    main()

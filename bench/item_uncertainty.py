"""Does the interval with item uncertainty cover the task's truth, and how often is the answer right with it?

Simulates studies with item-level predictions (``freezestats.stats.simulation.items``): frozen 0/2/4/6, 8 seeds,
train sizes 200 and 1000, task accuracies 90/89.5/87/80% at n=1000 and 85/84.5/82/75% at n=200 (freezing 2
layers costs 0.5 points, 4 costs 3 points), run SD of the reference cell 0.3 points at n=1000 and 1 point at
n=200 on the 436-item score half, margin 1 point. Items: 872 validation items with standard-normal probit
difficulty, a per-level item deviation of SD ``--item-sd`` (0.05: levels find ~1% of items easier or harder
than full fine-tuning does) and run-by-item noise of SD ``--noise-sd`` (0.02). Each study draws new items.

For each contrast it prints, over the studies:

* how often the fixed-sequence answer names the depth non-inferior, with the seed-only intervals and with item
  uncertainty added (the issue's targets: frozen 2 >= 80% at n=1000 seed-only, frozen 4 <= 5%);
* the two-sided 95% coverage of the seed-only interval for the truth *on the drawn items* (what it is about) and
  for the task's truth (new items), and of the interval with items for the task's truth.

    python bench/item_uncertainty.py --studies 1000     # ~30 min on 2 cores (idle)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as st

from freezestats.stats import fit_mixed
from freezestats.stats.inference.noninferiority import noninferiority_sequence
from freezestats.stats.items.uncertainty import noninferiority_with_items
from freezestats.stats.simulation.items import simulate_item_study

ACCURACY = {1000: {0: 0.90, 2: 0.895, 4: 0.87, 6: 0.80}, 200: {0: 0.85, 2: 0.845, 4: 0.82, 6: 0.75}}
RUN_SD = {1000: 0.003, 200: 0.01}
MARGIN = 0.01


def one_study(rng: int, item_sd: float, noise_sd: float) -> list[dict]:
    study = simulate_item_study(ACCURACY, RUN_SD, seeds=8, item_sd=item_sd, noise_sd=noise_sd, rng=rng)
    fit = fit_mixed(study.results, "heldout")
    sequence = noninferiority_sequence(fit, margin=MARGIN)
    table = noninferiority_with_items(sequence, study.results, study.items, "heldout", "accuracy")
    rows = []
    for row in table.itertuples(index=False):
        key = (int(row.train_size), int(row.frozen_layers))
        half_seed = st.t.ppf(0.975, row.df_seed) * row.se_seed
        half_total = st.t.ppf(0.975, row.df) * row.se
        rows.append(
            {
                "study": rng,
                "train_size": key[0],
                "frozen_layers": key[1],
                "ni_seed": bool(row.noninferior_seed),
                "ni_items": bool(row.noninferior),
                "cover_seed_items": abs(row.estimate - study.truth_items[key]) <= half_seed,
                "cover_seed_task": abs(row.estimate - study.truth_task[key]) <= half_seed,
                "cover_items_task": abs(row.estimate - study.truth_task[key]) <= half_total,
                "item_share": row.item_share,
            }
        )
    return rows


def summarise(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.groupby(["train_size", "frozen_layers"]).agg(
        studies=("study", "size"),
        ni_seed=("ni_seed", "mean"),
        ni_items=("ni_items", "mean"),
        cover_seed_items=("cover_seed_items", "mean"),
        cover_seed_task=("cover_seed_task", "mean"),
        cover_items_task=("cover_items_task", "mean"),
        item_share=("item_share", "median"),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--studies", type=int, default=1000)
    parser.add_argument("--item-sd", type=float, default=0.05)
    parser.add_argument("--noise-sd", type=float, default=0.02)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "item_uncertainty"))
    args = parser.parse_args()
    start = time.perf_counter()
    rows = [row for rng in range(args.studies) for row in one_study(rng, args.item_sd, args.noise_sd)]
    frame = pd.DataFrame(rows)
    table = summarise(frame)
    mcse = np.sqrt(0.95 * 0.05 / args.studies)
    text = (
        f"{args.studies} simulated studies, item_sd={args.item_sd}, noise_sd={args.noise_sd}, margin={MARGIN}; "
        f"{time.perf_counter() - start:.0f} s. Monte Carlo SE of a 95% coverage: {mcse:.3f}.\n"
        + table.round(3).to_string()
    )
    print(text)
    out = Path(args.out)
    out.with_suffix(".txt").write_text(text + "\n")
    out.with_suffix(".json").write_text(
        json.dumps({"args": vars(args), "table": table.reset_index().to_dict("records")})
    )


if __name__ == "__main__":
    main()

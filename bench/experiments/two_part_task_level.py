"""Experiment (not the analysis): a two-part task-level contrast with collapse rates shrunk across a size's depths.

The default answer's paired seed x item contrast under-covers deep freezes whose truth includes a collapse rate the
5 seeds did not show, and its familywise error at the margin is 0.117 (bench/coverage_task_level.py). This tries
the fix: the healthy pairs' crossed contrast (seeds and items), minus the collapse part p_k g_k - p_0 g_0, with
each cell's collapse rate shrunk towards its size's rate (beta prior by moments, strength clipped to 2..50) and
its posterior variance added. It is not wired into ``analyze``: the covariance of the shrunk rates, cells with no
healthy run, df, and the failure rule of real tables (binomial, not the simulator's collapse flag) are open.

    python bench/experiments/two_part_task_level.py 200     # ~140 s: coverage per cell, familywise error

bench/results/two_part_task_level_trial.txt holds a 200-study run.
"""

import sys
import time

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.stats.inference.task_family import task_noninferiority
from freezestats.stats.items.run_pairs import pairs_at_size
from freezestats.stats.items.task_level import _item_differences, crossed_contrast
from freezestats.stats.items.uncertainty import run_pseudo_values
from freezestats.stats.simulation.realistic import blog_shaped, null_at_margin, realistic_task, simulate_realistic


def shrunk_rates(at: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Each depth's collapse rate at one size, shrunk towards the size's rate (beta prior by moments)."""
    x = at.groupby("frozen_layers")["failed"].agg(["sum", "count"])
    pbar = x["sum"].sum() / x["count"].sum()
    excess = (x["sum"] / x["count"]).var(ddof=1) - pbar * (1 - pbar) / x["count"].mean()
    strength = float(np.clip(pbar * (1 - pbar) / excess - 1 if excess > 0 else 50.0, 2.0, 50.0))
    rate = (x["sum"] + pbar * strength) / (x["count"] + strength)
    return rate, rate * (1 - rate) / (x["count"] + strength + 1)


def two_part(runs: pd.DataFrame, items: pd.DataFrame, ref: int = 0) -> pd.DataFrame:
    """Healthy pairs' crossed contrast minus the collapse part, per (size, depth); NaN without 2 healthy pairs."""
    phi = run_pseudo_values(items, "heldout", "accuracy")
    rows = []
    for n, at in runs.groupby("train_size"):
        rate, rate_var = shrunk_rates(at)
        fail_score = at.loc[at["failed"], "heldout"].mean() if at["failed"].any() else 0.51
        healthy = at[~at["failed"]]
        means = healthy.groupby("frozen_layers")["heldout"].mean()
        for k in sorted(set(at["frozen_layers"]) - {ref}):
            row = {"train_size": n, "frozen_layers": k, "estimate": np.nan, "se": np.nan, "df": np.nan}
            pairs = pairs_at_size(healthy, k, ref, "heldout")
            if len(pairs) >= 2 and k in means and ref in means:
                out = crossed_contrast(_item_differences(pairs, phi, n, k), per_seed=pairs["difference"].to_numpy())
                gap_k, gap_0 = means[k] - fail_score, means[ref] - fail_score
                var = out["se"] ** 2 + gap_k**2 * rate_var[k] + gap_0**2 * rate_var[ref]
                df = var**2 / (out["se"] ** 4 / out["df"]) if out["se"] > 0 else np.inf
                estimate = out["estimate"] - (rate[k] * gap_k - rate[ref] * gap_0)
                row.update(estimate=estimate, se=np.sqrt(var), df=df)
            rows.append(row)
    table = pd.DataFrame(rows)
    crit = stats.t.ppf(0.975, table["df"])
    return table.assign(
        ci_low=table["estimate"] - crit * table["se"],
        ci_high=table["estimate"] + crit * table["se"],
        reference=ref,
        population="task",
        se_seed=0.0,
        se_item=0.0,
    )


def main(n_studies: int) -> None:
    alt, null = realistic_task(blog_shaped()), realistic_task(null_at_margin(0.01))
    covered, familywise = [], []
    for i in range(n_studies):
        study = simulate_realistic(alt, rng=1000 + i)
        for r in two_part(study.results, study.items).itertuples():
            truth = study.truth_task[(r.train_size, r.frozen_layers)]
            hit = (r.ci_low <= truth <= r.ci_high) if np.isfinite(r.se) else np.nan
            covered.append({"n": r.train_size, "k": r.frozen_layers, "cover": hit})
        at_null = simulate_realistic(null, rng=5000 + i)
        tests = two_part(at_null.results, at_null.items).dropna()
        familywise.append(bool(task_noninferiority(tests, margin=0.01)["noninferior"].any()))
    print(pd.DataFrame(covered).groupby(["n", "k"])["cover"].mean().unstack().round(3).to_string())
    print("FWER", np.mean(familywise), "n", n_studies)


if __name__ == "__main__":
    start = time.time()
    main(int(sys.argv[1]))
    print(f"{time.time() - start:.0f} s")

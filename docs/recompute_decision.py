"""Recompute the decision from an export alone (pandas + scipy): python recompute_decision.py RESULTS PREDICTIONS [M]"""
import sys

import numpy as np
import pandas as pd
from scipy import stats

runs, items = pd.read_csv(sys.argv[1]), pd.read_parquet(sys.argv[2])
pool = pd.read_parquet(sys.argv[2].replace(".parquet", "-pool.parquet"))  # the scored items (accuracy)
m = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
sel = items[items["half"] == "select"].groupby("trial")["prediction_heldout"]
gone = sel.agg(lambda p: p.value_counts(normalize=True).iloc[0] >= 0.95)
right = pool.assign(r=100.0 * (pool["prediction"] == pool["label"])).pivot(index="trial", columns="idx", values="r")
out = []
for (n, k), cell in runs.groupby(["train_size", "frozen_layers"]):
    full = runs[(runs["train_size"] == n) & (runs["frozen_layers"] == 0)].set_index("seed")["trial"]
    mine = cell.set_index("seed")["trial"].reindex(full.index).dropna().astype(int)
    if k == 0 or mine.empty:
        continue
    a, f = gone[mine].to_numpy(), gone[full[mine.index]].to_numpy()
    b, c = int((a & ~f).sum()), int((f & ~a).sum())
    p = stats.binomtest(b, b + c, 0.5, "greater").pvalue if b + c else 1.0
    d = right.loc[mine[~a & ~f]].to_numpy() - right.loc[full[mine.index][~a & ~f]].to_numpy()
    s, i = d.shape
    g, rs, cs = d.mean(), d.mean(1), d.mean(0)
    ms = [i * ((rs - g) ** 2).sum() / (s - 1), s * ((cs - g) ** 2).sum() / (i - 1)]
    ms.append(((d - rs[:, None] - cs[None, :] + g) ** 2).sum() / ((s - 1) * (i - 1)))
    v = ms[0] + ms[1] - ms[2]  # Satterthwaite df; at or below MS_res, the residual's floor and its df
    df = v**2 / (ms[0] ** 2 / (s - 1) + ms[1] ** 2 / (i - 1) + ms[2] ** 2 / ((s - 1) * (i - 1)))
    v, df = (v, df) if v >= ms[2] else (ms[2], (s - 1) * (i - 1))
    h, g = (stats.t.ppf(0.975, df) * np.sqrt(v / (s * i)), g) if s >= 3 else (np.nan, np.nan)  # k >= 3 pairs
    out.append(dict(train_size=n, frozen_layers=k, both_trained=s, cost=g, ci_low=g - h, ci_high=g + h, excess_p=p))
t = pd.DataFrame(out).sort_values(["train_size", "frozen_layers"])
for _, r in t.groupby("train_size"):  # the fixed sequences of each size
    excess = (r["excess_p"] < 0.025)[::-1].cumprod()[::-1].astype(bool)
    t.loc[r.index, "excess"] = excess
    t.loc[r.index, "within"] = ((r["ci_low"] > -m) & ~excess).cumprod().astype(bool)
    t.loc[r.index, "beyond"] = (r["ci_high"] < -m)[::-1].cumprod()[::-1].astype(bool)
print(t.to_csv(index=False))

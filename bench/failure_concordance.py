"""Do failed runs fail by seed? Concordance of the failure flags of each depth with the reference, seed by seed.

    python bench/failure_concordance.py                     # the 20-seed SST-2 study and the blog example
    python bench/failure_concordance.py --example examples/blog2020-minilm --tasks sst2

Why: the two-part contrast (:mod:`freezestats.stats.items.task_two_part`) takes the depth's and the reference's
failure rates from a pooled GLMM with no seed in it, as if a seed's run at one depth said nothing about its run
at the other, and the realistic simulator (``freezestats.stats.simulation.realistic``) draws collapses
independently per depth and seed. If failures instead follow the seed (its head initialisation and data order
decide whether a run escapes the majority class, whatever the depth), the difference of two rates is known far
better from the pairs than from two separate rates, and both the interval and the simulator miss it.

For every (task, size, depth) with failed runs in the depth or the reference, over the seeds both ran: the seeds
where both failed, where both were healthy, the discordant seeds, the number of discordant seeds expected if the
two cells failed independently at their observed rates (``S (p_k (1 - p_0) + p_0 (1 - p_k))``), and Fisher's
exact one-sided p value for a positive association (scipy), which is conditional on the margins and so valid for
any pair of rates. Failure is the analysis's own flag (``metric_failures``: the binomial rule against the
majority rate on the scored half).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
from scipy import stats

from freezestats.analysis.task import metric_failures
from freezestats.stats.design.input_table import normalize_results

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = (ROOT / "examples" / "sst2-20seeds-minilm", ROOT / "examples" / "blog2020-minilm")


def concordance(results: pd.DataFrame, task: str, reference: int = 0) -> pd.DataFrame:
    """One row per (size, depth) of ``task`` whose pair has a failed run: the concordance counts above."""
    runs = results[results["task"] == task].reset_index(drop=True)
    runs = runs.assign(failed=metric_failures(runs, "heldout")[0].to_numpy().astype(bool))
    rows = []
    for size, at in runs.groupby("train_size"):
        flags = at.pivot_table(index="seed", columns="frozen_layers", values="failed", aggfunc="first")
        for depth in [k for k in flags.columns if k != reference]:
            pair = flags[[depth, reference]].dropna().astype(bool)
            k, r = pair[depth], pair[reference]
            if not (k.any() or r.any()):
                continue
            both, neither = int((k & r).sum()), int((~k & ~r).sum())
            only_k, only_r = int((k & ~r).sum()), int((~k & r).sum())
            p_k, p_r = k.mean(), r.mean()
            expected = len(pair) * (p_k * (1 - p_r) + p_r * (1 - p_k))
            p_value = stats.fisher_exact([[both, only_k], [only_r, neither]], alternative="greater").pvalue
            rows.append({"task": task, "train_size": int(size), "frozen_layers": int(depth), "seeds": len(pair),
                         "both_failed": both, "both_healthy": neither, "discordant": only_k + only_r,
                         "expected_if_independent": round(float(expected), 2),
                         "fisher_p": round(float(p_value), 4)})  # fmt: skip
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", type=Path, action="append", help="an example folder with results.csv")
    parser.add_argument("--tasks", default="sst2", help="comma-separated (default sst2: accuracy is flagged so)")
    parser.add_argument("--output", default="bench/results/failure_concordance.txt")
    args = parser.parse_args()
    parts = []
    for example in args.example or EXAMPLES:
        results = normalize_results(pd.read_csv(example / "results.csv"))
        for task in args.tasks.split(","):
            table = concordance(results, task)
            name = example.resolve().relative_to(ROOT) if example.resolve().is_relative_to(ROOT) else example
            parts.append(f"{name}, {task}:\n{table.to_string(index=False) if len(table) else '  no failed run'}\n")
    head = "bench/failure_concordance.py: failure flags of each depth and the reference, seed by seed\n\n"
    text = head + "\n".join(parts)
    Path(args.output).write_text(text)
    print(text)


if __name__ == "__main__":
    main()

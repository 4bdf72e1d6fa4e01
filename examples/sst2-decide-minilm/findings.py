"""The numbers in this folder's README, computed from the committed export by today's analysis.

    python examples/sst2-decide-minilm/findings.py [--write | --check]

Inputs: ``results.csv``, ``predictions.parquet`` and ``predictions-pool.parquet`` (this study's export), the
350-run blog example's export (``../blog2020-minilm/``) for the comparison of designs, and the pilot's slice of
this study (n = 1000, frozen 0/1/2) for what the plan predicted before stage 2 ran.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from freezestats.analysis.decision import decide, verdict_words
from freezestats.report.figures import frozen_label
from freezestats.stats.decision.crossed import VarianceParts
from freezestats.stats.decision.plan import power

HERE = Path(__file__).resolve().parent
BLOG = HERE.parent / "blog2020-minilm"
sys.path.insert(0, str(HERE.parent))
from readme_findings import main, readme_section, table_head, table_row  # noqa: E402, F401

MARGIN = 1.0
POPULATION = "SST-2 sentences outside training"


def decision_table() -> pd.DataFrame:
    """This study's decision: cost when both train, on the 5,000-sentence pool."""
    runs = pd.read_csv(HERE / "results.csv")
    items, pool = pd.read_parquet(HERE / "predictions.parquet"), pd.read_parquet(HERE / "predictions-pool.parquet")
    (decision,) = decide(runs, items, pool, margin=MARGIN, populations={"sst2": POPULATION})
    return decision.table()


def blog_table() -> pd.DataFrame:
    """The same answer on the blog example's SST-2 runs: 5 seeds, one shared subset, the 436-item score half."""
    runs = pd.read_csv(BLOG / "results.csv")
    items = pd.read_parquet(BLOG / "predictions.parquet")
    (decision,) = decide(runs[runs["task"] == "sst2"], items[items["task"] == "sst2"], margin=MARGIN)
    return decision.table()


def pilot_power(table: pd.DataFrame) -> dict[tuple[int, int], float]:
    """What the pilot (n = 1000, frozen 1 and 2) predicted for each cell at this design (10 seeds, 5,000 items),
    if its true cost were 0: the pilot's components at the nearest pilot depth, as ``plan`` prices them."""
    pilot = table[(table["train_size"] == 1000) & table["frozen_layers"].isin([1, 2])].set_index("frozen_layers")
    out = {}
    for row in table.itertuples():
        p = pilot.loc[1 if row.frozen_layers in (-1, 1) else 2]
        parts = VarianceParts(p["sd_seed"] ** 2, p["sd_item"] ** 2, p["sd_res"] ** 2)
        out[(row.train_size, row.frozen_layers)] = power(parts, 10, 5000, MARGIN).power
    return out


def findings_markdown() -> str:
    table = decision_table()
    runs = pd.read_csv(HERE / "results.csv")
    lines = _what_ran(runs)
    lines += _decision_lines(table)
    lines += _designs(table, blog_table())
    return "\n".join(lines) + "\n"


def readme_line() -> str:
    """The main README's first finding: this example's answer in one sentence (a test compares the two)."""
    table = decision_table()
    parts = []
    for size, rows in table.groupby("train_size"):
        within = rows[rows["verdict"] == "within the margin"].sort_values("frozen_layers")
        beyond = rows[rows["verdict"] == "costs more than the margin"].sort_values("frozen_layers")
        said = []
        if not within.empty:
            r = within.iloc[-1]
            said.append(f"freezing up to {_depth_words(r['frozen_layers'])} costs less than 1 point when training "
                        f"works ({r['cost']:+.2f} [{r['ci_low']:+.2f}, {r['ci_high']:+.2f}])")  # fmt: skip
        if not beyond.empty:
            said.append(f"freezing {_depth_words(beyond.iloc[0]['frozen_layers'])} or more costs more than 1 point")
        parts.append(f"at n = {size}, " + (" and ".join(said) if said else "no depth is decided"))
    return (
        "- [`examples/sst2-decide-minilm/`](examples/sst2-decide-minilm/) (freezestats' own design: MiniLM-L6 on "
        "SST-2, 10 seeds with their own subsets, scored on 5,000 sentences outside training): "
        + "; ".join(parts)
        + f"; {int(table['decided'].sum())} of {len(table)} depth x size cells decided."
    )


def _depth_words(depth: int) -> str:
    return "the embeddings" if depth == -1 else f"{depth} layer{'s' if depth != 1 else ''}"


def _what_ran(runs: pd.DataFrame) -> list[str]:
    cells = runs.groupby(["train_size", "frozen_layers"]).size()
    hours = runs["wall_seconds"].sum() / 3600
    return [
        f"**What ran.** {len(runs)} runs ({len(cells)} cells x {int(cells.max())} seeds), on {runs['device'].iloc[0]}"
        f" in {runs['precision'].iloc[0]}; {hours:.1f} CPU-hours of run time (sum of `wall_seconds`, two runs at "
        "a time on the 2-core machine of `bench/README.md`).",
        "",
    ]


def _decision_lines(table: pd.DataFrame) -> list[str]:
    power = pilot_power(table)
    lines = table_head(
        f"**The decision** (cost = depth − full fine-tuning when both runs of a seed trained, accuracy points on "
        f"{int(table['items'].iloc[0]):,} {POPULATION.lower().replace('sst-2', 'SST-2')}, seeds and sentences "
        "crossed; verdicts: fixed sequence per train size, one-sided 2.5%, margin 1 point; pilot power: what the "
        "pilot's components promised at this design if the true cost were 0):",
        [
            "n",
            "frozen",
            "cost [95% CI]",
            "pairs trained",
            "collapsed (depth / full)",
            "time saved",
            "verdict",
            "pilot power",
        ],
        "rrrrrrlr",
    )
    for r in table.itertuples():
        cost = "–" if pd.isna(r.cost) else f"{r.cost:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}]"
        lines.append(table_row([r.train_size, frozen_label(r.frozen_layers), cost, f"{r.both_trained} / {r.seeds}",
                                f"{r.depth_collapsed} / {r.full_collapsed}", f"{1 - r.seconds / r.full_seconds:.0%}",
                                verdict_words(r), f"{power[(r.train_size, r.frozen_layers)]:.2f}"]))  # fmt: skip
    decided = int(table["decided"].sum())
    lines += ["", f"**Decided: {decided} of {len(table)} cells** ({decided / len(table):.0%}; the goal is 2/3)."]
    return [*lines, ""]


def _designs(mine: pd.DataFrame, blog: pd.DataFrame) -> list[str]:
    """The same contrasts under the blog's design and this one: interval widths, and the pool's share."""
    both = mine.merge(blog, on=["train_size", "frozen_layers"], suffixes=("", "_blog"))
    both = both[both["cost"].notna() & both["cost_blog"].notna()]
    lines = table_head(
        "**Beside the 350-run blog example** (same model, SST-2, same answer; there: 5 seeds on one shared subset, "
        "scored on the dev set's 436-item score half; here: 10 seeds with their own subsets, 5,000 pool sentences). "
        "Item share: the part of this design's variance of the cost that the items carry, at 436 items and at the "
        "pool's 5,000, from this study's own components:",
        [
            "n",
            "frozen",
            "blog: cost [95% CI]",
            "width",
            "here: cost [95% CI]",
            "width",
            "width ratio",
            "item share at 436 → 5,000",
        ],
        "rrrrrrrr",
    )
    ratios = []
    for r in both.itertuples():
        w_blog, w_here = r.ci_high_blog - r.ci_low_blog, r.ci_high - r.ci_low
        ratios.append(w_here / w_blog)
        share = [_item_share(r, m) for m in (436, 5000)]
        lines.append(table_row([r.train_size, frozen_label(r.frozen_layers),
                                f"{r.cost_blog:+.2f} [{r.ci_low_blog:+.2f}, {r.ci_high_blog:+.2f}]", f"{w_blog:.2f}",
                                f"{r.cost:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}]", f"{w_here:.2f}",
                                f"{w_here / w_blog:.2f}", f"{share[0]:.0%} → {share[1]:.0%}"]))  # fmt: skip
    if ratios:
        lines += ["", f"Median width ratio (here / blog): {np.median(ratios):.2f} over {len(ratios)} contrasts."]
    return lines


def _item_share(row: object, items: int) -> float:
    seed, item, res = (getattr(row, c) ** 2 for c in ("sd_seed", "sd_item", "sd_res"))
    k = row.both_trained  # type: ignore[attr-defined]
    total = seed / k + item / items + res / (k * items)
    return (item / items + res / (k * items)) / total


if __name__ == "__main__":
    raise SystemExit(main(HERE / "README.md", findings_markdown, __doc__.splitlines()[0]))

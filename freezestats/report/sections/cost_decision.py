"""Page 1: per task and train size, each depth's cost when both runs train, its collapse risk, what it saves, and
a verdict in plain words; then one sentence per task and the decision figure.

Everything here is read from the analysis's ``decision`` table (:meth:`freezestats.analysis.decision.TaskDecision
.table`); nothing is fitted. An undecided depth says what would decide it: the seeds the plan prices at the
items the study scores.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from freezestats.analysis.decision import verdict_words
from freezestats.report import figures as F
from freezestats.report.figures import frozen_label
from freezestats.report.inputs import ReportInputs

__all__ = ["cost_decision_section", "decision_figure", "price_figure"]


def _shown(table: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in table.itertuples():
        cost = "–" if pd.isna(r.cost) else f"{r.cost:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}]"
        saved = 1 - r.seconds / r.full_seconds if r.full_seconds else np.nan
        rows.append({"n": int(r.train_size), "frozen layers": frozen_label(r.frozen_layers),
                     "cost when both train, points [95% CI]": cost,
                     "collapsed (depth / full)": f"{r.depth_collapsed} / {r.full_collapsed} of {r.seeds}",
                     "time saved": "–" if pd.isna(saved) else f"{saved:.0%}", "verdict": verdict_words(r)})  # fmt: skip
    return pd.DataFrame(rows)


def _sentence(task: str, table: pd.DataFrame) -> str:
    parts = []
    for size, rows in table.groupby("train_size"):
        within = rows[rows["verdict"] == "within the margin"]
        if within.empty:
            parts.append(
                f"at n = {size}, no depth is shown within {rows['margin'].iloc[0]:g} point of full fine-tuning"
            )
        else:
            deepest = within.sort_values("frozen_layers").iloc[-1]
            saved = 1 - deepest["seconds"] / deepest["full_seconds"]
            parts.append(f"at n = {size}, freezing up to {frozen_label(deepest['frozen_layers'])} costs less than "
                         f"{deepest['margin']:g} point when training works ({saved:.0%} less time)")  # fmt: skip
    return f"**{task}**: " + "; ".join(parts) + "."


def _panels(table: pd.DataFrame, xlabel: str) -> tuple[Any, list[tuple[Any, pd.DataFrame]]]:
    """One panel per train size, sharing the cost axis, with 0 and the margin (dashed) drawn: the figure and, per
    panel, its axes and the size's rows that have an interval (shallow to deep)."""
    plt = F._plt()
    sizes = sorted(table["train_size"].unique())
    fig, axes = plt.subplots(1, len(sizes), figsize=(F.WIDTH, 2.6), sharey=True, squeeze=False)
    panels = []
    for ax, size in zip(axes[0], sizes, strict=True):
        ax.axhline(0, color="#999999", lw=0.8)
        ax.axhline(-float(table["margin"].iloc[0]), color="#b2182b", lw=0.8, ls="--")
        ax.set_title(f"n = {size}", fontsize=9)
        ax.set_xlabel(xlabel)
        rows = table[(table["train_size"] == size) & table["cost"].notna()].sort_values("frozen_layers")
        panels.append((ax, rows))
    axes[0][0].set_ylabel("cost when both train (points)")
    return fig, panels


def decision_figure(table: pd.DataFrame) -> Any:
    """Per train size, each depth's cost interval against the margin (dashed)."""
    fig, panels = _panels(table, "frozen layers")
    for ax, rows in panels:
        x = np.arange(len(rows))
        colours = ["#1b7837" if v == "within the margin" else "#b2182b" if v != "not known" else "#555555"
                   for v in rows["verdict"]]  # fmt: skip
        for xi, low, mid, high, colour in zip(x, rows["ci_low"], rows["cost"], rows["ci_high"], colours, strict=True):
            ax.errorbar([xi], [mid], yerr=[[mid - low], [high - mid]], fmt="none", ecolor=colour, capsize=3)
        ax.scatter(x, rows["cost"], c=colours, zorder=3, s=14)
        ax.set_xticks(x, [frozen_label(d) for d in rows["frozen_layers"]])
    fig.tight_layout()
    return fig


def price_figure(table: pd.DataFrame) -> Any:
    """Per train size, each depth's cost when both train against the run time it saves, labelled by depth."""
    fig, panels = _panels(table, "run time saved (%)")
    for ax, rows in panels:
        saved = 100 * (1 - rows["seconds"] / rows["full_seconds"])
        ax.errorbar(saved, rows["cost"], yerr=[rows["cost"] - rows["ci_low"], rows["ci_high"] - rows["cost"]],
                    fmt="o", ms=3, color="#333333", capsize=2)  # fmt: skip
        for x, y, depth in zip(saved, rows["cost"], rows["frozen_layers"], strict=True):
            ax.annotate(frozen_label(depth), (x, y), textcoords="offset points", xytext=(4, 3), fontsize=7)
    fig.tight_layout()
    return fig


def cost_decision_section(inputs: ReportInputs, w: Any) -> str:
    """The decision table per task, a sentence per task, and the decision figure."""
    decision = inputs.analysis.tables.get("decision")
    if decision is None or decision.empty:
        return ("No decision table: it needs the runs' per-item predictions (`freezestats export --predictions`, "
                "or the study database with its artifacts) and runs of full fine-tuning (frozen 0).")  # fmt: skip
    parts = []
    for task, table in decision.groupby("task", sort=False):
        first = table.iloc[0]
        caption = (
            f"{task}: cost of each depth against full fine-tuning when both runs of a seed trained, in points of "
            f"{first['metric']} on {first['items']:,} items ({first['population']}), seeds and items crossed; runs "
            f"paired by seed ({first['subsets']}). Verdicts: a fixed sequence per train size at one-sided 2.5%, read "
            "off the interval shown. Collapsed: the run answered one class on ≥95% of the validation items that "
            "chose its checkpoint. Time saved: mean run time against full fine-tuning's, same size."
        )
        parts.append(w.table(_shown(table), f"{task}-cost-decision", caption))
        parts.append(_sentence(str(task), table))
        caption = (f"{task}: each depth's cost interval per train size; dashed: the margin. Green: within the "
                   "margin; red: shown to cost more or collapse more; grey: not known.")  # fmt: skip
        parts.append(w.figure(decision_figure(table), f"{task}-cost-figure", caption))
        caption = (f"{task}: what freezing saves against what it costs. Each depth's mean run time saved against "
                   "full fine-tuning's (same size) and its cost interval; labels: frozen layers.")  # fmt: skip
        parts.append(w.figure(price_figure(table), f"{task}-price-figure", caption))
    return "\n\n".join(parts)

"""The report's "Which arm?" section: every arm level against full fine-tuning, by cost, per train size.

A study with several arms (freeze, probe, LoRA, re-initialised layers) asks a different question from the
freeze grid: not "how deep can I freeze" but "which way of adapting the model, at what cost". So the section
shows each arm level's score against what it costs (trainable parameters, wall time per run), one panel per
train size, and states the answer the way the freeze answer is stated: which arm levels are shown
non-inferior to full fine-tuning within the margin (Holm over the size's arm levels, since they have no
order), and the cheapest of them. The numbers come from the analysis tables ``arm_contrasts``,
``arm_noninferiority`` and ``arm_answer``; the figure plots the runs' cell means.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from freezestats.analysis.summary import fmt_p
from freezestats.report import figures as F
from freezestats.report.tables import adjusted_interval, present

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from freezestats.report.inputs import ReportInputs

__all__ = ["arm_figure", "arm_section", "probe_curve_figure"]

_ONE_ARM = (
    "This study has one arm (freeze), so there is nothing to compare across arms; a spec with several "
    "`[[arms]]` (probe, LoRA, re-initialised layers) gets this section."
)


def arm_figure(runs: pd.DataFrame, response: str, metric: str) -> Figure:
    """Mean score of each arm level against its trainable parameters (top) and its median wall time per run
    (bottom), one column per train size; full fine-tuning is the reference every other point is read against."""
    plt = F._plt()
    sizes = sorted(int(s) for s in runs["train_size"].unique())
    cells = (
        runs.groupby(["arm", "arm_level", "train_size"])
        .agg(score=(response, "mean"), params=("trainable_params", "median"), wall=("wall_seconds", "median"))
        .reset_index()
    )
    arms = sorted(cells["arm"].unique())
    colors = dict(zip(arms, plt.get_cmap("tab10")(np.arange(len(arms))), strict=True))
    fig, axes = plt.subplots(
        2, len(sizes), figsize=(F.WIDTH, 4.2), sharey="col", constrained_layout=True, squeeze=False
    )
    for column, size in enumerate(sizes):
        at = cells[cells["train_size"] == size]
        for arm in arms:
            part = at[at["arm"] == arm]
            for row, x in enumerate(("params", "wall")):
                axes[row, column].scatter(part[x], part["score"], s=16, color=colors[arm], label=arm)
        for row in range(2):
            axes[row, column].set_xscale("log")
            axes[row, column].grid(alpha=0.3)
        axes[0, column].set_title(f"n = {size}")
        axes[1, column].set_xlabel("wall s / run")
    axes[0, 0].set_xlabel("trainable parameters")
    axes[0, 0].set_ylabel(f"{metric} ({response})")
    axes[1, 0].set_ylabel(f"{metric} ({response})")
    F.legend_below(fig, axes[0, 0])
    return fig


def probe_curve_figure(runs: pd.DataFrame, response: str, metric: str) -> Figure | None:
    """The layer-wise probing curve: each probe variant's score against the layer it reads, one line per train
    size, with full fine-tuning's mean as a dashed line of the same colour. None when no probe ran at two layers."""
    probes = runs[runs["arm"].astype(str).str.startswith("probe")]
    if probes.empty or probes["arm_level"].nunique() < 2:
        return None
    plt = F._plt()
    variants = sorted(probes["arm"].unique())
    sizes = sorted(int(s) for s in runs["train_size"].unique())
    colors = F._size_colors(sizes)
    full = runs[(runs["arm"] == "freeze") & (runs["arm_level"] == 0)].groupby("train_size")[response].mean()
    fig, axes = plt.subplots(
        1, len(variants), figsize=(F.WIDTH, 2.6), sharey=True, constrained_layout=True, squeeze=False
    )
    for ax, variant in zip(axes[0], variants, strict=True):
        curve = probes[probes["arm"] == variant].groupby(["train_size", "arm_level"])[response].mean()
        for size in sizes:
            if size in curve.index.get_level_values(0):
                line = curve.loc[size]
                ax.plot(line.index, line.to_numpy(), marker="o", color=colors[size], label=f"n={size}")
            if size in full.index:
                ax.axhline(full[size], color=colors[size], linestyle="--", linewidth=0.8)
        ax.set_title(variant)
        ax.set_xlabel("layer (0: embeddings)")
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel(f"{metric} ({response})")
    F.legend_below(fig, axes[0, 0])
    return fig


def arm_section(inputs: ReportInputs, w: Any) -> str:
    """Per task: the answer sentences, the cost figure and the contrasts table; or why there is none."""
    tables = inputs.analysis.tables
    if "arm_contrasts" not in tables:
        return _ONE_ARM
    parts = []
    for task in inputs.analysis.settings["tasks"]:
        response = inputs.response_of(task)
        contrasts = tables["arm_contrasts"]
        contrasts = contrasts[contrasts["task"] == task]
        if contrasts.empty:
            parts.append(f"### {task}\n\nThe across-arm model could not be fitted (see Model details).")
            continue
        answer = tables.get("arm_answer")
        lines = [f"### {task}", ""]
        if answer is not None:
            lines += [f"- {s}." for s in answer[answer["task"] == task]["statement"]]
        runs = inputs.task_runs(task, all_arms=True)
        if runs is not None and {"arm", "trainable_params", "wall_seconds"} <= set(runs.columns):
            metric = str(runs["metric"].dropna().iloc[0]) if "metric" in runs.columns else response
            caption = f"{task}: each arm level's mean {response} against its cost, per train size."
            lines += ["", w.figure(arm_figure(runs, response, metric), f"{task}-arms", caption)]
            curve = probe_curve_figure(runs, response, metric)
            if curve is not None:
                text = f"{task}: layer-wise probe curve (dashed: full fine-tuning at the same size)."
                lines += ["", w.figure(curve, f"{task}-probe-curve", text)]
        lines += ["", w.table(_shown(contrasts), f"{task}-arm-contrasts", _caption(contrasts, task))]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _shown(contrasts: pd.DataFrame) -> pd.DataFrame:
    table = contrasts.assign(difference=contrasts.apply(adjusted_interval, axis=1))
    return present(
        table[["train_size", "arm", "arm_level", "difference", "p_adj"]],
        {
            "train_size": "n",
            "arm": "arm",
            "arm_level": "level",
            "difference": "vs full fine-tuning [95%]",
            "p_adj": "p (adjusted)",
        },
        {"p_adj": fmt_p},
    )


def _caption(contrasts: pd.DataFrame, task: str) -> str:
    adjust = str(contrasts["adjust"].iloc[0])
    return (
        f"{task}: each arm level minus full fine-tuning per train size, one mixed model with a residual variance "
        f"per cell (seed terms shared by the arms); p values {adjust}-adjusted over the size's arm levels"
        + ("; intervals Bonferroni-adjusted (Holm's procedure has no interval form)." if adjust == "holm" else ".")
    )

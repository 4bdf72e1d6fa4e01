"""The report's "Shared encoder" section: each task trained alone and in a group, against frozen layers.

The question of the shared-encoder study behind this section is "does freezing help when tasks share an
encoder, and for which task?", so per task it shows the metric against frozen layers, alone against
together (one panel per train size), and states per size what the shared-encoder contrasts say
(:mod:`freezestats.stats.comparisons.shared_encoder`): the group's difference from training alone at each depth, and how
much more (or less) freezing helps in the group than alone, with Holm-adjusted intervals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from freezestats.analysis.summary import fmt_p
from freezestats.report import figures as F
from freezestats.report.tables import adjusted_interval, present

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from freezestats.report.inputs import ReportInputs

__all__ = ["group_methods", "shared_encoder_figure", "shared_encoder_section"]

_NONE = (
    "No task of this study was trained in a group, so there is no shared-encoder comparison; a spec with "
    "`[[groups]]` gets this section."
)


_SAMPLING = {
    "proportional": "every batch of every task once an epoch, in shuffled order (MT-DNN)",
    "uniform": "each step draws its task with equal probability",
}


def group_methods(spec: dict[str, Any]) -> str | None:
    """The Methods paragraph on the spec's task groups: what a group trains, how it mixes tasks, what freezes.

    A reader of the shared-encoder answers needs the sampling and ``freeze_for`` to know which of the source's
    variants was run; None when the study has no groups.
    """
    groups = spec.get("groups") or []
    if not groups:
        return None
    parts = []
    for group in groups:
        sampling = group.get("sampling", "proportional")
        how = _SAMPLING.get(sampling) or (
            f"each step draws task t with probability ∝ n_t^(1/T), T = {group.get('temperature', 2.0):g}"
        )
        freeze_for = group.get("freeze_for", "all")
        frozen = (
            "the frozen layers take no update from any task's batches"
            if freeze_for == "all"
            else f"the frozen layers take no update from the batches of {', '.join(freeze_for)} (the optimiser "
            "does not step them) and are updated by the other tasks'"
        )
        parts.append(
            f"`{group['name']}` trains one shared encoder with a head per task ({', '.join(group['tasks'])}) on "
            f"mixed mini-batches, each step one task's batch; sampling `{sampling}`: {how}; {frozen} "
            f"(`freeze_for = {freeze_for!r}`)"
        )
    return (
        "**Task groups.** "
        + "; ".join(parts)
        + ". A group cell of size n trains on n examples of each task, the nested subsets of the single-task "
        "cells, with the same seeds. Each task's freeze analysis uses its runs trained alone; its group runs "
        "enter the shared-encoder model."
    )


def shared_encoder_figure(runs: pd.DataFrame, task: str, response: str, metric: str) -> Figure:
    """Mean score against frozen layers, trained alone and with each group, one panel per train size; each run is
    a faint dot beside its setting's mean (with three seeds, the spread is the first thing a reader checks)."""
    plt = F._plt()
    sizes = sorted(int(s) for s in runs["train_size"].unique())
    labelled = runs.assign(setting=runs["trained_with"].where(runs["trained_with"] != task, "alone"))
    names = sorted(labelled["setting"].unique(), key=lambda s: (s != "alone", s))
    fig, axes = plt.subplots(1, len(sizes), figsize=(F.WIDTH, 2.6), sharey=True, constrained_layout=True, squeeze=False)
    for ax, size in zip(axes[0], sizes, strict=True):
        at = labelled[labelled["train_size"] == size]
        order = F.frozen_order(at["frozen_layers"].unique())
        for i, name in enumerate(names):
            mine = at[at["setting"] == name]
            if mine.empty:  # this setting did not run at this size
                continue
            offset = 0.06 * (i - (len(names) - 1) / 2)  # settings side by side, so their runs do not overlap
            position = {k: j + offset for j, k in enumerate(order)}
            line = mine.groupby("frozen_layers")[response].mean()
            levels = sorted((int(k) for k in line.index), key=order.index)
            drawn = ax.plot([position[k] for k in levels], line.loc[levels].to_numpy(), marker="o", label=name)
            x = mine["frozen_layers"].astype(int).map(position)
            ax.scatter(x, mine[response], s=10, alpha=0.5, color=drawn[0].get_color(), linewidths=0)
        ax.set_xticks(range(len(order)), [F.frozen_label(k) for k in order])
        ax.set_title(f"n = {size}")
        ax.set_xlabel("frozen layers")
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel(f"{metric} ({response})")
    F.legend_below(fig, axes[0, 0])
    return fig


def shared_encoder_section(inputs: ReportInputs, w: Any) -> str:
    """Per task with group runs: the answer lines, the figure and the contrasts table."""
    table = inputs.analysis.tables.get("shared_encoder")
    if table is None or table.empty:
        return _NONE
    parts = []
    for task in sorted(table["task"].unique()):
        response = inputs.response_of(task)
        mine = table[table["task"] == task]
        lines = [f"### {task}", "", *[f"- {s}" for s in _answer_lines(mine)]]
        runs = inputs.runs
        if runs is not None and "trained_with" in runs.columns:
            rows = runs[(runs["task"] == task) & (runs.get("role", "grid") == "grid")]
            if "pair_encoding" in rows.columns:  # bi runs have their own section; the contrasts are of cross runs
                rows = rows[rows["pair_encoding"].fillna("cross") == "cross"]
            metric = str(rows["metric"].dropna().iloc[0]) if "metric" in rows.columns else response
            figure = shared_encoder_figure(rows, task, response, metric)
            lines += ["", w.figure(figure, f"{task}-shared-encoder", f"{task}: {response} alone and in groups.")]
        lines += ["", w.table(_shown(mine), f"{task}-shared-encoder", _caption(task))]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _answer_lines(table: pd.DataFrame) -> list[str]:
    lines = []
    gains = table[table["comparison"] == "freezing_gain_difference"]
    for row in gains.sort_values(["train_size", "trained_with", "frozen_layers"]).itertuples():
        if row.p_adj < 0.05:
            verdict = "helps more in the group than alone" if row.estimate > 0 else "helps less in the group than alone"
        else:
            verdict = "was not shown to help more or less in the group than alone (not a finding of equal gains)"
        lines.append(
            f"n = {row.train_size}, with {row.trained_with}: freezing {row.frozen_layers} layers {verdict}; gain "
            f"together − gain alone = {row.estimate:+.4f} [{row.ci_low_adj:+.4f}, {row.ci_high_adj:+.4f}] "
            f"(p adj. {fmt_p(row.p_adj)})."
        )
    return lines or ["The groups share no frozen depth with the runs trained alone besides 0: see the table."]


def _shown(table: pd.DataFrame) -> pd.DataFrame:
    shown = table.assign(difference=table.apply(adjusted_interval, axis=1))
    return present(
        shown[["train_size", "comparison", "trained_with", "frozen_layers", "difference", "p_adj"]],
        {
            "train_size": "n",
            "comparison": "comparison",
            "trained_with": "group",
            "frozen_layers": "frozen",
            "difference": "difference [95%]",
            "p_adj": "p (adjusted)",
        },
        {"p_adj": fmt_p},
    )


def _caption(task: str) -> str:
    return (
        f"{task}: the group against training alone at each depth, depths within the group against its frozen 0, "
        "and the difference in freezing gain; one mixed model of the task with a residual variance per cell, "
        "intervals and p values Holm-adjusted within each comparison and size (intervals Bonferroni)."
    )

"""The report's "How the seeds were spent" (an adaptive study, ``[adaptive]``): seeds per cell, its decision and round.

An adaptive study stops a cell once its comparison with full fine-tuning is decided, so its cells hold different
numbers of seeds; a reader needs to see where the runs went and why, or the uneven grid reads as a flaw. The table
and the figure come from :func:`freezestats.stats.sequential.replay` on the study's runs, the same rule the run's
decision steps applied (replayed in seed order), so they show what the loop saw at each look, not a fit made after.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from freezestats.report.figures import WIDTH, frozen_label, frozen_order
from freezestats.report.inputs import ReportInputs

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["seeds_figure", "seeds_spent_section", "seeds_spent_table"]

#: The decisions that close a comparison, and the colour each is drawn in.
_COLOURS = {
    "noninferior": "#1b7837",
    "inferior": "#b2182b",
    "open": "#999999",
    "exhausted": "#e08214",
    "reference": "#2166ac",
}
_POPULATION = {
    "task": "the task (new seeds and new evaluation items)",
    "evaluation_set": "this evaluation set (new seeds, the same items)",
}


def seeds_spent_table(replayed: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per (train size, depth): the seeds its runs used, its last decision and the round that decided it.

    ``replayed``: one task's replay (a row per comparison and look: train_size, frozen_layers, round, decision);
    ``runs``: that task's runs, which give the seeds of each cell (the reference, frozen 0, included).
    """
    seeds = runs.groupby(["train_size", "frozen_layers"]).size().rename("seeds").reset_index()
    rows = []
    for cell in seeds.itertuples(index=False):
        mine = replayed[(replayed["train_size"] == cell.train_size) & (replayed["frozen_layers"] == cell.frozen_layers)]
        mine = mine.sort_values("round")
        decided = mine[mine["decision"].isin(("noninferior", "inferior"))]
        if cell.frozen_layers == 0:
            decision, when = "reference", None
        elif len(mine):
            decision = str(mine["decision"].iloc[-1])
            when = int(decided["round"].iloc[0]) if len(decided) else None
        else:
            decision, when = "open", None
        round_ = "–" if when is None else str(when)
        rows.append({"train size": int(cell.train_size), "frozen": frozen_label(cell.frozen_layers),
                     "seeds": int(cell.seeds), "decision": decision, "decided in round": round_,
                     "_level": int(cell.frozen_layers)})  # fmt: skip
    table = pd.DataFrame(rows)
    order = {level: i for i, level in enumerate(frozen_order(table["_level"]))} if len(table) else {}
    table = table.assign(_order=table["_level"].map(order)).sort_values(["train size", "_order"])
    return table.drop(columns=["_order"]).reset_index(drop=True)


def seeds_figure(table: pd.DataFrame, max_seeds: int) -> Figure:
    """Bars of seeds per cell, one panel per train size, coloured by decision, labelled with the deciding round."""
    from freezestats.report.figures import _plt

    plt = _plt()
    sizes = sorted(table["train size"].unique())
    fig, axes = plt.subplots(1, len(sizes), figsize=(WIDTH, 2.6), sharey=True, squeeze=False)
    for ax, size in zip(axes[0], sizes, strict=True):
        part = table[table["train size"] == size]
        x = range(len(part))
        ax.bar(x, part["seeds"], color=[_COLOURS.get(d, "#666666") for d in part["decision"]], width=0.7)
        for i, (seeds, when) in enumerate(zip(part["seeds"], part["decided in round"], strict=True)):
            if when != "–":
                ax.annotate(f"r{when}", (i, seeds), ha="center", va="bottom", fontsize=7)
        ax.axhline(max_seeds, color="#444444", linestyle=":", linewidth=0.8)
        ax.set_xticks(list(x), list(part["frozen"]))
        ax.set_xlabel("frozen layers")
        ax.set_title(f"n = {size}")
    axes[0][0].set_ylabel("seeds run")
    shown = [d for d in _COLOURS if d in set(table["decision"])]
    handles = [plt.Rectangle((0, 0), 1, 1, color=_COLOURS[d]) for d in shown]
    fig.legend(handles, shown, loc="lower center", ncol=len(shown), frameon=False, bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


def seeds_spent_section(inputs: ReportInputs, w: Any, items: pd.DataFrame | None = None) -> str:
    """Per task, the seeds-per-cell table and figure; for a study that did not run adaptively, a sentence why not.

    ``items``: the runs' per-item predictions, when the report has them (the decisions then speak of the task).
    """
    plan = inputs.spec.get("adaptive")
    if not plan:
        return (
            "This study ran every seed of every cell (its spec has no `[adaptive]` table), so there is no "
            "allocation of seeds to show."
        )
    if inputs.runs is None:
        return "The runs are not at hand (give --storage or --results), so how the seeds were spent is left out."
    from freezestats.stats.sequential import SequentialPlan, replay
    from freezestats.stats.sequential.spending import spending_words

    sequential = SequentialPlan(**{k: v for k, v in plan.items() if k != "budget"})
    log = (inputs.study or {}).get("adaptive") or {}
    parts = [_intro(plan, log, len(inputs.runs))]
    for task in inputs.analysis.settings.get("tasks", []):
        runs = inputs.task_runs(task)
        if runs is None or runs.empty:
            continue
        mine = None if items is None else items[items["task"] == task].reset_index(drop=True)
        replayed = replay(
            runs.reset_index(drop=True),
            mine,
            sequential,
            response=inputs.response_of(task),
            metric=inputs.metric_of(task),
        )
        table = seeds_spent_table(replayed, runs)
        population = _population(replayed, mine)
        caption = (
            f"{task}: seeds run per cell (train size × frozen layers) in the adaptive study, coloured by the cell's "
            f"decision against full fine-tuning (margin {plan['margin']:g} points of {inputs.metric_of(task)}, "
            f"one-sided level {plan.get('alpha', 0.05):g}, {spending_words(sequential.spending)} spending); "
            f"rN: the round that decided it; dotted: max_seeds. The decisions speak of {population}."
        )
        name = f"{task}-seeds-spent"
        shown = table.drop(columns=["_level"])
        parts.append(
            (f"### {task}\n\n" if len(inputs.analysis.settings.get("tasks", [])) > 1 else "")
            + w.figure(seeds_figure(table, int(plan.get("max_seeds", 10))), name, caption)
            + "\n\n"
            + w.table(shown, name, f"{task}: seeds per cell, its decision and the round that decided it.")
        )
    return "\n\n".join(parts)


def _intro(plan: dict[str, Any], log: dict[str, Any], n_runs: int) -> str:
    stops = {
        "decided": "every comparison was decided",
        "budget": "the next round would have spent more than the budget",
        "exhausted": "the open comparisons had no seed left",
    }
    stopped = stops.get(log.get("stopped", ""), "it had not stopped when this report was made")
    budget = "" if plan.get("budget") is None else f", a budget of {plan['budget']} runs"
    return (
        f"The study ran adaptively: every cell first ran {_first_round(plan)}, then after each round "
        f"only the cells still open got {plan.get('seeds_per_round', 1)} more, up to {plan.get('max_seeds', 10)}"
        f"{budget}. It used {n_runs} runs in {len(log.get('rounds', []))} rounds and stopped because {stopped}."
    )


def _first_round(plan: dict[str, Any]) -> str:
    """The first round in words: ``min_seeds`` seeds, or the screening look's and then ``min_seeds``."""
    seeds, screen = plan.get("min_seeds", 2), plan.get("futility_seeds")
    if screen is None:
        return f"{seeds} seeds"
    return f"{screen} seeds, a futility-only look stopped the cells that could not close, the others ran {seeds}"


def _population(replayed: pd.DataFrame, items: pd.DataFrame | None) -> str:
    if "population" in replayed.columns and replayed["population"].notna().any():
        value = str(replayed["population"].dropna().iloc[0])
        return _POPULATION.get(value, value)
    return _POPULATION["task" if items is not None else "evaluation_set"]

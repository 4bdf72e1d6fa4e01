r"""A stored study run again as if it had been adaptive: which cells would have stopped when, and the runs saved.

:func:`replay` plays the adaptive design's rounds on runs that exist (a fixed-design study, or a simulated one
with ``max_seeds`` per cell): every cell starts with ``min_seeds`` runs, each round decides the comparisons
that reached the round's look (:func:`~freezestats.stats.sequential.decisions.sequential_decisions`' steps, on
exactly the runs the adaptive study would have had), and only the cells :func:`~freezestats.stats.sequential.
decisions.next_seeds` names get the next look's runs. A cell whose stored runs end before the round's look
stays where it is (``open``, not reached). :func:`replay_summary` counts the runs the rounds used against the
fixed design's, and :func:`fixed_design` is the fixed analysis on the same runs, to compare decisions with.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from freezestats.stats.inference.task_family import task_noninferiority
from freezestats.stats.items.task_level import task_level_contrasts
from freezestats.stats.sequential import decisions
from freezestats.stats.sequential.decisions import (
    family_history,
    look_contrasts,
    next_seeds,
    ranked_runs,
)
from freezestats.stats.sequential.plan import SequentialPlan

__all__ = ["REPLAY_COLUMNS", "fixed_design", "replay", "replay_summary"]

REPLAY_COLUMNS = [
    "train_size", "frozen_layers", "round", "look", "seeds", "decision", "decided_round", "estimate", "lower",
    "upper", "alpha", "at_trial",
]  # fmt: skip


def replay(
    runs: pd.DataFrame,
    items: pd.DataFrame | None,
    plan: SequentialPlan,
    *,
    order: str = "seed",
    response: str = "heldout",
    metric: str = "accuracy",
    reference: int = 0,
) -> pd.DataFrame:
    """The adaptive design's rounds on stored runs, one row per cell and round.

    ``order`` says which of a cell's stored runs come first (``"seed"``, or ``"trial"``: the order they ran);
    the other arguments are :func:`~freezestats.stats.sequential.decisions.sequential_decisions`'.

    Returns
    -------
    pandas.DataFrame
        :data:`REPLAY_COLUMNS`: per cell (the reference too, ``decision="reference"``) and ``round`` (1 = the
        first look), the state after that round: ``look`` the last look the comparison reached, ``seeds`` the
        runs the cell had in that round, ``decision`` as then taken and ``decided_round`` the round it was first
        reached (NaN while open), the repeated interval ``lower, upper`` at the local level ``alpha``, and
        ``at_trial`` the largest trial number among the cell's runs used (when, in the stored order, the cell's
        last look could have been taken).
    """
    view = ranked_runs(runs, plan, order=order)
    history = family_history(runs, plan, reference, items)
    cells = sorted({(int(n), int(k)) for n, k in zip(view["train_size"], view["frozen_layers"], strict=True)})
    allocation = dict.fromkeys(cells, plan.looks()[0])
    decided_round: dict[tuple[int, int], int] = {}
    frames = []
    for round_, count in enumerate(plan.looks(), start=1):
        keys = list(zip(view["train_size"].astype(int), view["frozen_layers"].astype(int), strict=True))
        at = view[view["rank"].to_numpy() <= np.array([allocation[key] for key in keys])]
        contrasts = look_contrasts(at, items, history, count, response=response, metric=metric)
        if contrasts is None:
            break
        for cell in history.step(round_, contrasts):
            decided_round[cell] = round_
        table = history.table()
        frames.append(_snapshot(table, at, round_, decided_round, reference))
        wanted = next_seeds(table, plan)
        if not len(wanted):
            break
        for row in wanted.itertuples(index=False):
            key = (int(row.train_size), int(row.frozen_layers))
            if key in allocation:
                allocation[key] = max(allocation[key], int(row.seeds_target))
    if not frames:
        return pd.DataFrame(columns=REPLAY_COLUMNS)
    return pd.concat(frames, ignore_index=True)[REPLAY_COLUMNS]


def replay_summary(replayed: pd.DataFrame, plan: SequentialPlan, fixed_seeds: int | None = None) -> pd.DataFrame:
    """Runs the replay used against a fixed design of ``fixed_seeds`` per cell (default ``plan.max_seeds``).

    Returns one row per train size and a last row ``train_size = -1`` for the whole task: ``comparisons``, the
    count of each decision at the end, ``runs_adaptive`` (each cell's runs in its last round), ``runs_fixed``
    (cells times ``fixed_seeds``), ``runs_ratio`` and ``last_round``.
    """
    seeds = plan.max_seeds if fixed_seeds is None else int(fixed_seeds)
    last = replayed.sort_values("round").groupby(["train_size", "frozen_layers"], as_index=False).last()
    rows = []
    for size, group in [*last.groupby("train_size"), (-1, last)]:
        compared = group[group["decision"] != "reference"]
        counts = compared["decision"].value_counts()
        used, fixed = int(group["seeds"].sum()), len(group) * seeds
        rows.append({"train_size": int(size), "comparisons": len(compared),
                     **{d: int(counts.get(d, 0)) for d in ("noninferior", "inferior", "open", "exhausted")},
                     "runs_adaptive": used, "runs_fixed": fixed, "runs_ratio": used / fixed,
                     "last_round": int(group["round"].max())})  # fmt: skip
    return pd.DataFrame(rows)


def fixed_design(
    runs: pd.DataFrame,
    items: pd.DataFrame | None,
    plan: SequentialPlan,
    *,
    seeds: int | None = None,
    response: str = "heldout",
    metric: str = "accuracy",
) -> pd.DataFrame:
    """The fixed analysis (:func:`~freezestats.stats.inference.task_family.task_noninferiority` at the plan's
    margin and level) on every cell's first ``seeds`` runs by seed (default ``plan.max_seeds``)."""
    seeds = plan.max_seeds if seeds is None else int(seeds)
    ordered = runs.sort_values(["train_size", "frozen_layers", "seed", "trial"], kind="stable")
    first = ordered[ordered.groupby(["train_size", "frozen_layers"]).cumcount() < seeds]
    trials = None if items is None else items[items["trial"].isin(first["trial"])]
    population = "task" if items is not None else "evaluation_set"
    contrasts = task_level_contrasts(first, trials, response=response, metric=metric, population=population,
                                     failure_rates=decisions.SEQUENTIAL_FAILURE_RATES)  # as the looks  # fmt: skip
    return task_noninferiority(contrasts, margin=plan.margin, alpha=plan.alpha)


def _snapshot(table: pd.DataFrame, at: pd.DataFrame, round_: int, decided_round: dict, reference: int) -> pd.DataFrame:
    """Every cell's state after a round: the comparisons' decisions and the reference's runs."""
    used = at.groupby(["train_size", "frozen_layers"]).agg(seeds=("rank", "size"), at_trial=("trial", "max"))
    rows = table.drop(columns="seeds").merge(used.reset_index(), how="left", on=["train_size", "frozen_layers"])
    ref = used.reset_index()
    ref = ref[ref["frozen_layers"] == int(reference)].assign(decision="reference", look=np.nan)
    frame = pd.concat([rows, ref], ignore_index=True).assign(round=round_)
    keys = zip(frame["train_size"].astype(int), frame["frozen_layers"].astype(int), strict=True)
    frame["decided_round"] = [decided_round.get(key, np.nan) for key in keys]
    frame["seeds"] = frame["seeds"].fillna(0).astype(int)
    return frame.sort_values(["train_size", "frozen_layers"], ignore_index=True)

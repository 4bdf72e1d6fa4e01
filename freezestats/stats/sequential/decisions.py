r"""An adaptive study's decisions from its stored runs, and the seeds its open cells need next.

:func:`sequential_decisions` is a function of the stored runs alone: it replays the looks in order, each on the
runs the look could see, so recomputing it gives the same table, and a cell decided at a look keeps that
decision whatever runs came later. Each cell's runs are first rounded down to the plan's looks (a cell that ran
a seed beyond its look mid-round is read as if it had not), and look :math:`j` sees every cell's first
:math:`s_j` runs (by seed, or by trial number for ``order="trial"``). A look is *reached* by a comparison when
both the depth and the reference have :math:`s_j` runs there; only depths with an open comparison at the look
enter its contrasts (a depth's contrast, failure part included, depends on its own runs and the reference's
only: :func:`~freezestats.stats.items.task_level.task_level_contrasts`), so a decided depth's later runs, if
any, change nothing.

The statistics of a look are :mod:`freezestats.stats.sequential.history`'s (the family's graph, each
hypothesis's spending boundary) on :mod:`freezestats.stats.sequential.bounds`' (information fractions, the t
scale).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from freezestats.exceptions import ModelFitError
from freezestats.stats.items.task_level import task_level_contrasts
from freezestats.stats.sequential.history import SequentialHistory
from freezestats.stats.sequential.plan import SequentialPlan

__all__ = [
    "NEXT_SEEDS_COLUMNS",
    "SEQUENTIAL_FAILURE_RATES",
    "family_history",
    "look_contrasts",
    "next_seeds",
    "ranked_runs",
    "sequential_decisions",
]

NEXT_SEEDS_COLUMNS = ["train_size", "frozen_layers", "seeds_target"]
#: The failure part of the looks' contrasts: Wilson-MOVER, not the analysis's default (the joint draws), read at each
#: look's own level (:mod:`~freezestats.stats.inference.tail_matched`, via ``LookContrast.ladder``). The joint draws
#: are 3.8x slower a look; at a first test on 4 seeds they cut the false claims on 120 null studies from 8 to 3
#: (``bench/results/adaptive_null_claims_pocock_joint_480_599.txt``), as a first test on 6 seeds with Wilson-MOVER
#: does (``…_pocock_min6_480_599.txt``): where the pair shows no failure at 4 seeds, Wilson-MOVER's pooled rate
#: falls to ~1e-5 with no room above it. They move here when the whole adaptive bench is re-run with them.
SEQUENTIAL_FAILURE_RATES = "pooled"
_ORDERS = ("seed", "trial")


def sequential_decisions(
    runs: pd.DataFrame,
    items: pd.DataFrame | None,
    plan: SequentialPlan,
    *,
    response: str = "heldout",
    metric: str = "accuracy",
    reference: int = 0,
    order: str = "seed",
) -> pd.DataFrame:
    """Each depth's decision against the reference at every train size, as the looks so far have taken it.

    Parameters
    ----------
    runs
        One task's grid runs (the results table: ``trial, train_size, frozen_layers, seed, failed`` and the
        ``response``), any number of seeds per cell.
    items
        Their per-item predictions: the contrasts then speak of the task (seeds and items); ``None``: of the
        evaluation set (seeds only).
    plan
        The looks, the margin, the familywise level and the spending function.
    response, metric
        As in :func:`~freezestats.stats.items.task_level.task_level_contrasts`.
    reference
        The depth every other is compared with (0: full fine-tuning).
    order
        Which runs of a cell come first: ``"seed"`` (by seed number) or ``"trial"`` (the order they ran).

    Returns
    -------
    pandas.DataFrame
        :data:`~freezestats.stats.sequential.history.SEQUENTIAL_COLUMNS`, one row per (train size, depth other
        than the reference): ``seeds`` the paired seeds of its last look (before the first, those it has),
        ``look`` that look's index in ``plan.looks()`` (1-based; 0 = not reached), ``estimate, se, df`` the lower
        side's contrast there, ``lower, upper`` the repeated interval at the local level ``alpha`` (the graph's
        level for the hypothesis at that look), ``p_seq`` the sequential p value the graph tested, ``fraction``
        the information fraction, ``decision`` one of ``noninferior`` (``lower > -margin``), ``inferior``
        (``upper < -margin``), ``open`` (more seeds may close it) or ``exhausted`` (open at ``max_seeds``, or
        unable to close by then), ``population`` and ``procedure``.
    """
    view = ranked_runs(runs, plan, order=order)
    history = family_history(runs, plan, reference, items)
    for look, count in enumerate(plan.looks(), start=1):
        at_look = view[view["rank"] <= count]
        contrasts = look_contrasts(at_look, items, history, count, response=response, metric=metric)
        if contrasts is None:
            break
        history.step(look, contrasts)
    _note_unreached(history, runs, reference)
    return history.table()


def next_seeds(decisions: pd.DataFrame, plan: SequentialPlan) -> pd.DataFrame:
    """The seeds each cell should have after the next round: the next look's count for every open comparison,
    and for the reference of a size the largest of its open depths' (it is paired with each of them).

    Returns :data:`NEXT_SEEDS_COLUMNS`, one row per cell that needs more seeds (none once nothing is open).
    """
    looks = plan.looks()
    open_ = decisions[decisions["decision"] == "open"]
    rows = []
    for row in open_.itertuples(index=False):
        look = int(row.look)
        if look < len(looks):
            rows.append({"train_size": int(row.train_size), "frozen_layers": int(row.frozen_layers),
                         "seeds_target": int(looks[look]), "reference": int(row.reference)})  # fmt: skip
    if not rows:
        return pd.DataFrame(columns=NEXT_SEEDS_COLUMNS)
    table = pd.DataFrame(rows)
    ref = table.groupby(["train_size", "reference"], as_index=False)["seeds_target"].max()
    ref = ref.rename(columns={"reference": "frozen_layers"})
    out = pd.concat([table.drop(columns="reference"), ref], ignore_index=True)
    return out.sort_values(["train_size", "frozen_layers"], ignore_index=True)[NEXT_SEEDS_COLUMNS]


def ranked_runs(runs: pd.DataFrame, plan: SequentialPlan, *, order: str = "seed") -> pd.DataFrame:
    """``runs`` with each run's ``rank`` in its cell (1 = first, by ``order``), each cell cut to the largest of
    the plan's looks it has reached (a cell below the first look loses them all: nothing is decided on it yet)."""
    if order not in _ORDERS:
        raise ModelFitError(f"sequential decisions: `order` must be one of {list(_ORDERS)}, but got {order!r}.")
    missing = [c for c in ("train_size", "frozen_layers", "seed", "trial", "failed") if c not in runs.columns]
    if missing:
        raise ModelFitError(f"sequential decisions: the runs lack {missing} (the results table's columns).")
    keys = [order, "trial"] if order == "seed" else ["trial"]
    table = runs.sort_values(["train_size", "frozen_layers", *keys], kind="stable")
    rank = table.groupby(["train_size", "frozen_layers"]).cumcount().to_numpy() + 1
    table = table.assign(rank=rank)
    size = table.groupby(["train_size", "frozen_layers"])["rank"].transform("max").to_numpy()
    looks = np.array(plan.looks())
    keep_to = np.array([looks[looks <= s].max() if s >= looks[0] else 0 for s in size])
    return table[table["rank"].to_numpy() <= keep_to].reset_index(drop=True)


def look_contrasts(
    at_look: pd.DataFrame,
    items: pd.DataFrame | None,
    history: SequentialHistory,
    count: int,
    *,
    response: str,
    metric: str,
) -> pd.DataFrame | None:
    """The contrasts of the open comparisons that reached a look of ``count`` seeds; ``None`` when no
    comparison can reach it (no cell has that many runs), an empty table when every one that did is decided."""
    cells = at_look.groupby(["train_size", "frozen_layers"]).size()
    if not (cells >= count).any():
        return None
    ref = history.reference
    reached = [(n, k) for n, k in history.open_cells()
               if cells.get((n, k), 0) >= count and cells.get((n, ref), 0) >= count]  # fmt: skip
    if not reached:
        return pd.DataFrame(columns=["train_size", "frozen_layers"])
    depths = {k for _, k in reached} | {ref}
    view = at_look[at_look["frozen_layers"].isin(depths)]
    trials = None if items is None else items[items["trial"].isin(view["trial"])]
    population = "task" if items is not None else "evaluation_set"
    try:
        contrasts = task_level_contrasts(view, trials, response=response, metric=metric, reference=ref,
                                         population=population, failure_rates=SEQUENTIAL_FAILURE_RATES)  # fmt: skip
    except ModelFitError:  # no pair of seeds at all (e.g. the runs' seeds do not match the reference's)
        return pd.DataFrame(columns=["train_size", "frozen_layers"])
    keys = list(zip(contrasts["train_size"].astype(int), contrasts["frozen_layers"].astype(int), strict=True))
    return contrasts[[key in set(reached) for key in keys]]


def family_history(
    runs: pd.DataFrame, plan: SequentialPlan, reference: int, items: pd.DataFrame | None
) -> SequentialHistory:
    """An empty history over every comparison the runs hold."""
    cells = sorted({(int(n), int(k)) for n, k in zip(runs["train_size"], runs["frozen_layers"], strict=True)
                    if int(k) != int(reference)})  # fmt: skip
    if not cells:
        raise ModelFitError("sequential decisions: the runs hold no depth other than the reference.")
    return SequentialHistory(cells, plan, reference, "task" if items is not None else "evaluation_set")


def _note_unreached(history: SequentialHistory, runs: pd.DataFrame, reference: int) -> None:
    """The paired seeds of comparisons that have not reached their first look (what they have so far)."""
    seeds = {(int(n), int(k)): set(cell["seed"]) for (n, k), cell in runs.groupby(["train_size", "frozen_layers"])}
    for n, k in history.cells:
        history.note_seeds((n, k), len(seeds.get((n, k), set()) & seeds.get((n, int(reference)), set())))

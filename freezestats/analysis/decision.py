"""The answer: per task, train size and depth, the cost when both runs train and the collapse risk beside it.

For each depth at each train size, the runs are paired with full fine-tuning (depth 0) by seed, so each pair
shares its training subset. A pair in which either run collapsed (:mod:`freezestats.stats.decision.collapse`) is
counted in the collapse comparison (:mod:`~freezestats.stats.decision.excess`); the k pairs in which both trained
give the cost interval on the scored items, seeds and items crossed (:mod:`~freezestats.stats.decision.crossed`).
The scored items are the evaluation pool where the study has one, else the validation set's score half. The
verdicts come from a fixed sequence per train size (:mod:`~freezestats.stats.decision.verdicts`), and each
undecided depth gets the seeds that would decide it (:mod:`~freezestats.stats.decision.plan`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from freezestats.stats.decision.collapse import collapsed
from freezestats.stats.decision.crossed import VarianceParts, crossed_cost
from freezestats.stats.decision.excess import excess_collapse_p
from freezestats.stats.decision.plan import DesignPower, seeds_needed
from freezestats.stats.decision.verdicts import DepthEvidence, DepthVerdict, fixed_sequence
from freezestats.stats.items.pseudo_values import pseudo_values
from freezestats.tasks.metrics import REGRESSION_METRICS

__all__ = [
    "DepthRow",
    "SizeDecision",
    "TaskDecision",
    "decide",
    "decision_lines",
    "paired_differences",
    "verdict_words",
]

METHODS = (
    "Each depth is paired by seed (so by training subset) with full fine-tuning at its train size. A run "
    "collapsed if ≥95% of its predictions on the validation half that chose its checkpoint are one class. "
    "Excess collapse: of pairs with one run collapsed, b are the depth's; exact one-sided binomial test of b at "
    "1/2. On the k pairs where neither collapsed, d is the per-item difference, in points, on the M scored "
    "items (jackknife pseudo-values for MCC, correlation). The cost is the mean of d; its 95% interval: mean ± "
    "t(df)·sqrt((MS_seed + MS_item − MS_res)/(kM)) from d's two-way ANOVA, Satterthwaite df, floored at MS_res. "
    "Per train size, fixed sequences at one-sided 2.5%: excess collapse and cost beyond margin (upper bound "
    "below −m), deep to shallow; cost within it (lower bound above −m), shallow to deep, stopping also at excess "
    "collapse; each stops at its first depth not shown."
)
"""The Methods paragraph: enough to rebuild every bound from the export (``docs/recompute_decision.py`` does)."""

FAMILY = (
    "each train size: a fixed sequence at one-sided 2.5% (within: shallow to deep; beyond, collapse: deep to shallow)"
)


@dataclass(frozen=True)
class DepthRow:
    """A depth's verdict, what would decide it, and what it saves (means over its runs and full's, same size)."""

    verdict: DepthVerdict
    needs: DesignPower | None  # seeds for the target power at the scored items if the true cost is the estimate
    seconds: float
    full_seconds: float
    peak_mem_bytes: float
    full_peak_mem_bytes: float


@dataclass(frozen=True)
class SizeDecision:
    train_size: int
    subsets: str  # "a training subset per seed" or "one training subset shared by every seed"
    rows: tuple[DepthRow, ...]


@dataclass(frozen=True)
class TaskDecision:
    task: str
    metric: str
    population: str  # what the scored items are a sample of
    items: int
    margin: float
    target: float
    family: str
    sizes: tuple[SizeDecision, ...]

    def table(self) -> pd.DataFrame:
        """One tidy row per size and depth: what the decision table, the figures and the export print."""
        return pd.DataFrame([_tidy(self, size, row) for size in self.sizes for row in size.rows])


def verdict_words(row: Any) -> str:
    """A row's verdict as page 1 prints it."""
    m = f"{row.margin:g} point{'s' if row.margin != 1 else ''}"
    if row.verdict == "within the margin":
        return f"within {m}"
    if row.verdict == "costs more than the margin":
        return f"costs more than {m} (at least {-row.ci_high:.1f})"
    if row.verdict == "collapses more often":
        return f"collapses more often (McNemar p = {row.excess_collapse_p:.3f})"
    if pd.isna(row.cost):
        return f"not known: {row.both_trained} of {row.seeds} pairs trained, 3 needed"
    where = "" if row.reached else "; a shallower depth was not shown"
    if pd.isna(row.seeds_needed):
        return f"not known: more than 200 seeds at {10 * row.items:,} items if its cost is {min(row.cost, 0):+.2f}"
    need = f"{int(row.seeds_needed)} seeds at {int(row.items_needed):,} items"
    return f"not known: needs {need} if its cost is {min(row.cost, 0):+.2f}{where}"


def decision_lines(table: pd.DataFrame) -> list[str]:
    """The decision table of one task as the lines ``analyze`` prints: per size and depth, cost and verdict."""
    first = table.iloc[0]
    lines = [f"  the decision: cost when both runs train, {first['metric']} points on {first['items']:,} items "
             f"({first['population']}); {FAMILY}:"]  # fmt: skip
    for r in table.itertuples():
        cost = "no interval" if pd.isna(r.cost) else f"{r.cost:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}]"
        lines.append(f"    n={r.train_size} frozen {r.frozen_layers}: {cost}, {r.both_trained} of {r.seeds} pairs "
                     f"trained, collapsed {r.depth_collapsed} vs {r.full_collapsed}: {verdict_words(r)}")  # fmt: skip
    return lines


def _tidy(task: TaskDecision, size: SizeDecision, row: DepthRow) -> dict[str, object]:
    e, c, need = row.verdict.evidence, row.verdict.evidence.cost, row.needs
    return {
        "task": task.task, "metric": task.metric, "population": task.population, "items": task.items,
        "train_size": size.train_size, "subsets": size.subsets, "frozen_layers": e.depth, "seeds": e.seeds,
        "both_trained": e.both_trained, "depth_collapsed": e.depth_collapsed, "full_collapsed": e.full_collapsed,
        "cost": c.estimate if c else np.nan, "ci_low": c.ci_low if c else np.nan,
        "ci_high": c.ci_high if c else np.nan, "df": c.df if c else np.nan,
        "sd_seed": np.sqrt(c.parts.seed) if c else np.nan, "sd_item": np.sqrt(c.parts.item) if c else np.nan,
        "sd_res": np.sqrt(c.parts.residual) if c else np.nan,
        "excess_collapse_p": e.excess_p, "margin": task.margin, "verdict": row.verdict.verdict.value,
        "decided": row.verdict.decided, "reached": row.verdict.reached,
        "seeds_needed": need.seeds if need else np.nan,
        "items_needed": need.items if need else np.nan, "seconds": row.seconds, "full_seconds": row.full_seconds,
        "peak_mem_bytes": row.peak_mem_bytes, "full_peak_mem_bytes": row.full_peak_mem_bytes,
    }  # fmt: skip


def decide(
    runs: pd.DataFrame,
    items: pd.DataFrame,
    pool: pd.DataFrame | None = None,
    *,
    margin: float = 1.0,
    target: float = 0.8,
    populations: Mapping[str, str] | None = None,
) -> list[TaskDecision]:
    """The decision of every task with full fine-tuning (depth 0) among its freeze runs.

    ``items`` are the validation predictions (:func:`~freezestats.results.item_predictions.item_predictions`),
    ``pool`` the evaluation-pool predictions (or None), ``populations`` the pool's name per task.
    """
    runs = runs[runs["arm"].fillna("freeze") == "freeze"] if "arm" in runs.columns else runs
    decisions = []
    for task, task_runs in runs.groupby("task"):
        metric = str(task_runs["metric"].iloc[0])
        gone = collapsed(items[items["task"] == task], metric in REGRESSION_METRICS)
        scored, population = _scored_items(str(task), items, pool, populations or {})
        n_items = int(scored["idx"].nunique())
        sizes = tuple(
            _size(at, scored, gone, margin, target, n_items)
            for _, at in task_runs.groupby("train_size")
            if (at["frozen_layers"] == 0).any()
        )
        decisions.append(TaskDecision(str(task), metric, population, n_items, margin, target, FAMILY, sizes))
    return decisions


def _scored_items(
    task: str, items: pd.DataFrame, pool: pd.DataFrame | None, populations: Mapping[str, str]
) -> tuple[pd.DataFrame, str]:
    if pool is not None and (pool["task"] == task).any():
        scored = pool[pool["task"] == task].rename(columns={"prediction": "answer"})
        return scored, populations.get(task, f"{task} evaluation pool")
    scored = items[(items["task"] == task) & (items["half"] == "score")]
    return scored.rename(columns={"prediction_heldout": "answer"}), f"the {task} validation set's score half"


def _size(
    at: pd.DataFrame, scored: pd.DataFrame, gone: pd.Series, margin: float, target: float, n_items: int
) -> SizeDecision:
    evidence = [_evidence(at, scored, gone, int(d)) for d in sorted(at["frozen_layers"].unique()) if d != 0]
    full = at[at["frozen_layers"] == 0]
    rows = []
    for verdict in fixed_sequence(evidence, margin):
        e, mine = verdict.evidence, at[at["frozen_layers"] == verdict.evidence.depth]
        needs = None
        if not verdict.decided and e.cost is not None:
            needs = _what_decides(e.cost.parts, n_items, margin, target, min(e.cost.estimate, 0.0))
        rows.append(DepthRow(verdict, needs, *_mean(mine, full, "wall_seconds"), *_mean(mine, full, "peak_mem_bytes")))
    shared = at.groupby("seed")["subset_draw"].first().nunique() == 1 and at["seed"].nunique() > 1
    subsets = "one training subset shared by every seed" if shared else "a training subset per seed"
    return SizeDecision(int(at["train_size"].iloc[0]), subsets, tuple(rows))


def _what_decides(parts: VarianceParts, items: int, margin: float, target: float, cost: float) -> DesignPower | None:
    """The fewest seeds that decide at the study's items, or else at 2, 4 or 10 times as many (the item term alone
    can keep the interval too wide for any number of seeds); the fewest items among designs of equal seeds."""
    designs = [seeds_needed(parts, items * more, margin, target, true_cost=cost) for more in (1, 2, 4, 10)]
    found = [d for d in designs if d is not None]
    if not found or designs[0] is not None:
        return designs[0]
    return min(found, key=lambda d: (d.seeds, d.items))


def _mean(mine: pd.DataFrame, full: pd.DataFrame, column: str) -> tuple[float, float]:
    if column not in mine.columns:
        return np.nan, np.nan
    return float(mine[column].mean()), float(full[column].mean())


def _evidence(at: pd.DataFrame, scored: pd.DataFrame, gone: pd.Series, depth: int) -> DepthEvidence:
    by_seed, seeds = _pairs(at, depth)
    down = {d: [bool(gone.get(by_seed[d][s], False)) for s in seeds] for d in (0, depth)}
    only_depth = sum(a and not b for a, b in zip(down[depth], down[0], strict=True))
    only_full = sum(b and not a for a, b in zip(down[depth], down[0], strict=True))
    trained = [s for s, a, b in zip(seeds, down[depth], down[0], strict=True) if not (a or b)]
    diffs = _differences(at, scored, by_seed, trained, depth)
    cost = crossed_cost(diffs) if len(diffs) >= 3 else None
    return DepthEvidence(
        depth, len(seeds), len(diffs), sum(down[depth]), sum(down[0]), only_depth, only_full, cost,
        excess_collapse_p(only_depth, only_full),
    )  # fmt: skip


def _pairs(at: pd.DataFrame, depth: int) -> tuple[dict[int, pd.Series], list[int]]:
    """Per depth (0 and ``depth``) its trials by seed at one train size, and the seeds that ran both."""
    by_seed = {d: at[at["frozen_layers"] == d].set_index("seed")["trial"] for d in (0, depth)}
    return by_seed, sorted(set(by_seed[0].index) & set(by_seed[depth].index))


def _differences(
    at: pd.DataFrame, scored: pd.DataFrame, by_seed: dict[int, pd.Series], seeds: list[int], depth: int
) -> np.ndarray:
    """(seeds x items): ``depth``'s per-item points minus full fine-tuning's, one row per seed of ``seeds``."""
    metric = str(at["metric"].iloc[0])
    rows = [_points(scored, by_seed[depth][s], metric) - _points(scored, by_seed[0][s], metric) for s in seeds]
    return np.stack(rows) if rows else np.empty((0, 0))


def paired_differences(
    runs: pd.DataFrame, scored: pd.DataFrame, gone: pd.Series, size: int, depth: int
) -> tuple[np.ndarray, int]:
    """Per seed pair in which neither run collapsed: ``depth``'s per-item points minus full fine-tuning's, on the
    ``scored`` items (column ``answer``); and how many seeds ran both. Rows: pairs; columns: items."""
    at = runs[runs["train_size"] == size]
    by_seed, seeds = _pairs(at, depth)
    pairs = [s for s in seeds if not gone.get(by_seed[0][s], False) and not gone.get(by_seed[depth][s], False)]
    return _differences(at, scored, by_seed, pairs, depth), len(seeds)


def _points(scored: pd.DataFrame, trial: int, metric: str) -> np.ndarray:
    """A run's per-item jackknife pseudo-values of ``metric``, in points, in item order (accuracy: 100 or 0)."""
    run = scored[scored["trial"] == trial].sort_values("idx")
    return 100.0 * pseudo_values(metric, run["answer"].to_numpy(), run["label"].to_numpy())

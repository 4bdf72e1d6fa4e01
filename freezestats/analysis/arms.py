"""The across-arm part of ``analyze``: a table of several arms gets the arm-level model, never the freeze model.

The freeze model compares frozen depths along one ordered axis; a probe's layer or a LoRA rank is not a depth,
so pooling them into it would answer a question nobody asked. A results table with more than one arm
(``arm`` column) therefore gets, per task, :func:`freezestats.stats.comparisons.arm_levels.arm_contrasts` (every
(arm, level) against full fine-tuning, per-cell variances, Holm over a size's arm levels), the non-inferiority
tests at the task's margin and the answer naming the cheapest non-inferior arm level; the freeze analysis runs
on the freeze arm's rows alone, and says so.

The tables were called ``strategy_contrasts``, ``strategy_noninferiority`` and ``strategy_answer`` before;
:func:`freezestats.analysis.result.read_analysis` reads a folder written under those names.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

__all__ = ["add_arm_tables", "freeze_rows"]


def _arms(grid: pd.DataFrame) -> list[str]:
    return sorted(map(str, grid["arm"].dropna().unique())) if "arm" in grid.columns else []


def freeze_rows(grid: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """The rows the freeze-depth model may use, and a warning when other arms were set aside.

    A table without an ``arm`` column (or with the freeze arm only) is returned whole.
    """
    arms = _arms(grid)
    if arms in ([], ["freeze"]):
        return grid, None
    kept = grid[grid["arm"] == "freeze"] if "freeze" in arms else grid.iloc[0:0]
    # other arms leave frozen_layers empty, which made the column float; the freeze rows' depths are integers
    kept = kept.assign(frozen_layers=kept["frozen_layers"].astype("int64"))
    others = [a for a in arms if a != "freeze"]
    return kept, (
        f"the table holds the arms {arms}: the freeze-depth analysis uses the freeze arm's {len(kept)} runs only, "
        f"and every arm ({', '.join(others)} too) is compared with full fine-tuning in arm_contrasts"
    )


def add_arm_tables(
    attempt: Callable[..., None],
    grid: pd.DataFrame,
    tasks: list[str],
    response: str,
    margin_of: Callable[[str], float],
) -> None:
    """``arm_contrasts``, ``arm_noninferiority`` and ``arm_answer`` per task, when the table
    holds more than one arm. ``margin_of(task)`` is the task's non-inferiority margin (its metric's default
    unless the user set one)."""
    from freezestats.stats.comparisons.arm_levels import arm_answer, arm_contrasts, arm_noninferiority

    if len(_arms(grid)) <= 1:
        return
    for task in tasks:
        rows = grid[grid["task"] == task]
        made: dict[str, pd.DataFrame] = {}

        def contrasts(rows: pd.DataFrame = rows, made: dict = made) -> pd.DataFrame:
            made["contrasts"] = arm_contrasts(rows, response)
            return made["contrasts"]

        attempt("arm_contrasts", task, contrasts)
        if "contrasts" not in made:
            continue
        margin = margin_of(task)
        made["ni"] = arm_noninferiority(made["contrasts"], margin=margin)
        attempt("arm_noninferiority", task, lambda made=made: made["ni"])
        cost = None
        if "trainable_params" in rows.columns and rows["trainable_params"].notna().any():
            cost = rows.groupby(["arm", "arm_level"], as_index=False)["trainable_params"].median()
            cost["arm_level"] = cost["arm_level"].astype("int64")
        attempt("arm_answer", task, lambda made=made, cost=cost: arm_answer(made["ni"], cost))

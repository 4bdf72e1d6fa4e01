"""How the report's sections write figures and tables to the output folder, and find their analysis tables.

Every section module takes a :class:`Writer` and the :class:`~freezestats.report.inputs.ReportInputs`; these
helpers are what they share, kept apart from the document assembly (``document.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from freezestats.report import figures as F
from freezestats.report.inputs import ReportInputs
from freezestats.report.tables import markdown

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Writer", "heading", "task_table", "why_missing"]


class Writer:
    """Saves figures and tables under the output folder and returns the markdown that includes them."""

    def __init__(self, out: Path, step: Callable[[str], None]) -> None:
        self.out = out
        self.step = step
        self.figures: list[Path] = []
        self.tables: list[Path] = []

    @staticmethod
    def label(name: str) -> str:
        return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")

    def figure(self, fig: Figure, name: str, caption: str) -> str:
        label = self.label(name)
        width = min(100, round(100 * fig.get_size_inches()[0] / F.WIDTH))
        path = F.save(fig, self.out / "figures" / f"{label}.svg")
        self.figures.append(path)
        self.step(f"figure {label}")
        return f"![{caption}](figures/{path.name}){{#fig-{label} width={width}%}}"

    def table(self, shown: pd.DataFrame, name: str, caption: str) -> str:
        label = self.label(name)
        folder = self.out / "tables"
        folder.mkdir(parents=True, exist_ok=True)
        body = markdown(shown, caption, f"tbl-{label}")
        (folder / f"{label}.md").write_text(body + "\n")
        shown.to_parquet(folder / f"{label}.parquet", index=False)
        self.tables.append(folder / f"{label}.md")
        return body


def task_table(inputs: ReportInputs, name: str, task: str, fit: str | None = "all_runs") -> pd.DataFrame | None:
    table = inputs.analysis.tables.get(name)
    if table is None or "task" not in table.columns:
        return None
    part = table[table["task"] == task]
    if fit is not None and "fit" in part.columns:
        part = part[part["fit"] == fit]
    return part.reset_index(drop=True) if len(part) else None


def why_missing(inputs: ReportInputs, task: str, name: str) -> str:
    """The analysis' own warning for a table that was not computed, or a generic reason."""
    for warning in inputs.analysis.warnings:
        relevant = warning.startswith(f"{task}: {name}") or (
            name in ("emmeans", "contrasts") and "not fitted" in warning
        )
        if relevant and warning.startswith(f"{task}:"):
            return warning.split(": ", 1)[1]
    return f"the analysis has no `{name}` table for {task}"


def heading(inputs: ReportInputs, task: str) -> str:
    return f"### {task}\n\n" if len(inputs.analysis.settings.get("tasks", [])) > 1 else ""

"""The progress display of a run: cells done of the total with an ETA, and the current cell's steps."""

from __future__ import annotations

import sys
from typing import Any

from freezestats.study.cells import Cell, CellRole

__all__ = ["Progress"]


class Progress:
    """Rich progress: cells done / total with ETA, and the steps of the current cell."""

    def __init__(self, enabled: bool, total: int) -> None:
        self.enabled = enabled
        self._bar: Any = None
        if not enabled:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
        )
        self._cells = self._bar.add_task("cells", total=total)
        self._steps = self._bar.add_task("  current cell", total=1, visible=False)
        self._bar.start()

    def set_total(self, total: int) -> None:
        """A new total of cells (an adaptive study's grows round by round)."""
        if self._bar is not None:
            self._bar.update(self._cells, total=total)

    def set_done(self, done: int) -> None:
        if self._bar is not None:
            self._bar.update(self._cells, completed=done)

    def start_cell(self, cell: Cell) -> None:
        if self._bar is not None:
            role = "lr search " if cell.role is CellRole.SEARCH else ""
            level = f"frozen={cell.level}" if cell.arm is None else f"{cell.arm}={cell.level}"
            rate = "" if cell.learning_rate is None else f" lr={cell.learning_rate:g}"
            label = f"  {role}{cell.task} {level} n={cell.train_size} draw={cell.subset_draw} seed={cell.seed}{rate}"
            if cell.order_seed is not None:
                label += f" order_seed={cell.order_seed}"
            if cell.pair_encoding != "cross":
                label += f" pair={cell.pair_encoding}"
            self._bar.reset(self._steps, total=1, description=label, visible=True)

    def step(self, step: int, total: int) -> None:
        if self._bar is not None:
            self._bar.update(self._steps, completed=step, total=total)

    def note(self, message: str) -> None:
        """A line above the bars (or on stderr without them)."""
        if self._bar is not None:
            self._bar.console.print(message, markup=False, highlight=False)
        else:
            print(message, file=sys.stderr)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

"""Fitting without the failed runs: which runs, levels and sizes leave the model, and the notes that say so.

Kept apart from :mod:`.model_frame`, which checks a results table and builds the design: this is the one step of
that preparation with rules of its own (``include_failed=False``): a cell needs healthy runs left, and where the
reference's cell has none the whole train size goes.
"""

from __future__ import annotations

import pandas as pd

from freezestats.exceptions import ModelFitError

__all__ = ["set_failed_aside"]


def set_failed_aside(
    frame: pd.DataFrame, failed: pd.Series, task: str, caller: str, min_healthy_runs: int, notes: list[str]
) -> pd.DataFrame:
    """The healthy runs, less the levels and sizes whose cells keep too few of them (``include_failed=False``);
    what was set aside is appended to ``notes``."""
    if failed.all():
        raise ModelFitError(
            f"include_failed=False leaves no runs: all {len(frame)} runs of task {task!r} failed (collapsed to the "
            "majority baseline); fit with include_failed=True or look at the failure rates instead."
        )
    if failed.any():
        notes.append(
            f"excluded {int(failed.sum())} failed runs (include_failed=False): estimates are conditional on "
            "a run not failing."
        )
    kept = _drop_failed_cells(frame, frame[~failed], notes, min_healthy_runs)
    if kept.empty:
        why = "; ".join(n.rstrip(".") for n in notes if n.startswith("left out"))
        raise ModelFitError(
            f"{caller}: include_failed=False leaves no cell with {min_healthy_runs} healthy run(s) in task "
            f"{task!r} ({why}); fit with include_failed=True or run more seeds."
        )
    return kept


def _drop_failed_cells(
    all_runs: pd.DataFrame, healthy: pd.DataFrame, notes: list[str], min_runs: int = 1
) -> pd.DataFrame:
    """The healthy runs, less the frozen levels (or train sizes) of which some cell has fewer than ``min_runs``
    healthy runs left.

    The interaction model needs a run in every (frozen, size) cell. A cell whose runs all failed (e.g. every
    layer frozen, or CoLA at 50 examples) has no mean "among healthy runs", so its level leaves the fit without
    failed runs, with a note; its failure rate is in the failure summary. When it is the reference level's cell,
    the train size leaves instead, since no contrast can be formed there. A model with a residual variance per
    cell needs two healthy runs a cell (``min_runs=2``): REML fits one run's variance near zero, and the cell's
    interval with it (a simulated lone cell's EMM SE 0.019 against 0.032 under a variance per size).
    """

    def cells(frame: pd.DataFrame) -> pd.Series:
        return frame.groupby(["frozen_layers", "train_size"]).size()

    had = set(cells(all_runs).index)
    frame = healthy
    lone = f"fewer than {min_runs} runs are healthy"
    while had:
        counts = cells(frame)
        levels = sorted({k for k, _ in had})
        reference = 0 if 0 in levels else levels[0]
        short = sorted(c for c in had if counts.get(c, 0) < min_runs)
        if not short or frame.empty:
            return frame
        ref_sizes = sorted({n for k, n in short if k == reference})
        if ref_sizes:
            why = "every run of the reference level there failed" if min_runs <= 1 else f"{lone} in its reference cell"
            notes.append(f"left out train size(s) {ref_sizes}: {why}.")
            had = {(k, n) for k, n in had if n not in ref_sizes}
            frame = frame[~frame["train_size"].isin(ref_sizes)]
        else:
            gone = sorted({k for k, _ in short})
            shown = ", ".join(f"frozen {k} at n={n}" for k, n in short[:6])
            why = "every run failed" if min_runs <= 1 else lone
            notes.append(f"left out frozen level(s) {gone}: {why} in some cell ({shown}).")
            had = {(k, n) for k, n in had if k not in gone}
            frame = frame[~frame["frozen_layers"].isin(gone)]
    return frame.iloc[:0]

"""The correct counts a binomial GLMM reads from the results table: which columns hold them per response, and
their checks.

Kept apart from :mod:`freezestats.stats.models.glmm` (the fit) because it is the model's contract with the results
table: a table written before the runner stored per-checkpoint counts has empty count columns, and that is refused
here, in the user's words, before any fitting starts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.model_frame import _Prepared

__all__ = ["COUNT_COLUMNS", "count_columns", "run_counts"]

COUNT_COLUMNS: dict[str, tuple[str, str]] = {
    "final_dev": ("n_correct", "n_eval"),
    "best_dev": ("n_correct_best", "n_eval"),
    "heldout": ("n_correct_heldout", "n_eval_heldout"),
}
"""For each response: the (correct, scored) counts of the checkpoint it was measured on, in the results table."""


def _has_values(data: pd.DataFrame, column: str) -> bool:
    return column in data.columns and bool(data[column].notna().any())


def count_columns(data: pd.DataFrame, response: str) -> tuple[str, ...]:
    """The count columns to validate with the response, or ``()`` to let ``_prepare`` refuse the input.

    A count column is unavailable when it is absent or holds no value: :func:`freezestats.results.export.results_table`
    writes every column of :data:`~freezestats.results.export.RESULT_COLUMNS`, so a study run before the runner stored
    per-checkpoint counts gives empty ``n_correct_best`` / ``n_correct_heldout`` / ``n_eval_heldout`` columns.
    """
    if response not in COUNT_COLUMNS or not isinstance(data, pd.DataFrame):
        return ()
    counts = COUNT_COLUMNS[response]
    missing = [c for c in counts if not _has_values(data, c)]
    final_ok = all(_has_values(data, c) for c in COUNT_COLUMNS["final_dev"])
    if missing and response != "final_dev" and final_ok:
        raise ModelFitError(
            f"fit_glmm(response={response!r}) models the correct counts of the checkpoint {response} was measured "
            f"on, but the results table has no values in {missing} (tables from before the runner stored "
            "per-checkpoint counts have only n_correct, the final checkpoint's), so fit response='final_dev' instead."
        )
    return counts


def run_counts(prepared: _Prepared, counts: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """Each run's (correct, scored) counts, checked: integers with 0 <= correct <= scored, and not all or none right."""
    correct, scored = counts
    k = prepared.frame[correct].to_numpy(dtype=float)
    n = prepared.frame[scored].to_numpy(dtype=float)
    bad = (k < 0) | (k > n) | (n < 1) | (k != np.round(k)) | (n != np.round(n))
    if bad.any():
        raise ModelFitError(
            f"`{correct}` must be an integer in 0..{scored} ({scored} >= 1), but {int(bad.sum())} runs of task "
            f"{prepared.task!r} violate it (e.g. {correct}={k[bad][0]:g}, {scored}={n[bad][0]:g})."
        )
    if (k == 0).all() or (k == n).all():
        raise ModelFitError(
            f"every evaluation example of task {prepared.task!r} is "
            f"{'wrong' if (k == 0).all() else 'correct'} in every run ({correct}), so a binomial model has nothing "
            "to estimate."
        )
    return k, n

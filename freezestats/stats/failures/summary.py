r"""Per cell: the failure rate beside the mean response with and without the failed runs.

Kept apart from :mod:`freezestats.stats.failures.rates`, which says which runs failed and how often: this module
only reads those flags against the response, so that a depth's cost can be read as "fails more often" or as
"every run is worse".
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from freezestats.exceptions import ModelFitError
from freezestats.stats.design.checks import CELL, _as_flag, check_confidence, prepare
from freezestats.stats.failures.rates import with_wilson_rate

__all__ = ["failure_summary"]

SUMMARY_COLUMNS = [*CELL, "n", "n_failed", "p_fail", "ci_low", "ci_high", "mean_healthy", "mean_all"]


def failure_summary(
    table: pd.DataFrame,
    failed: pd.Series | np.ndarray,
    response: str = "best_dev",
    task: str | None = None,
    confidence: float = 0.95,
) -> pd.DataFrame:
    r"""Per cell: how many runs failed, and the mean response with and without them.

    A mean over all runs mixes two things, how often fine-tuning collapses and how well the healthy runs
    do; this table shows both, so that a depth that "costs 3 points" can be read as "fails one run in five"
    or as "every run is 3 points worse".

    Parameters
    ----------
    table : pandas.DataFrame
        The results table (one row per run); needs ``role, task, train_size, frozen_layers`` and ``response``.
    failed : pandas.Series or numpy.ndarray
        One flag per row of ``table`` (:func:`~.rates.flag_failures`, or the table's ``failed`` column); a Series is
        aligned on the index, an array by position. Missing flags (``<NA>``) drop the run.
    response : str
        The analysed per-run score (``"best_dev"``, ``"final_dev"``, ``"heldout"`` or a ``final_<metric>``).
    task : str or None
        Only this task; None keeps every task.
    confidence : float
        Coverage of the Wilson interval, in (0, 1).

    Returns
    -------
    pandas.DataFrame
        One row per cell, sorted by ``task, train_size, frozen_layers``:

        - ``task``, ``train_size``, ``frozen_layers``: the cell.
        - ``n``: runs with a flag and a finite response.
        - ``n_failed``: failed runs among them.
        - ``p_fail``: ``n_failed / n``.
        - ``ci_low``, ``ci_high``: Wilson score interval of the failure probability (see :func:`~.rates.failure_rates`).
        - ``mean_healthy``: mean response of the runs that did not fail (NaN when every run failed).
        - ``mean_all``: mean response of all ``n`` runs.

    Raises
    ------
    ModelFitError
        As :func:`~.rates.failure_rates`; ``failed`` of the wrong length or index, or with values that are not boolean.

    Notes
    -----
    Only ``role == "grid"`` (and ``state == "complete"``) rows are summarised. Missing data: runs with a
    missing flag or response are dropped (listwise deletion). The Wilson interval treats the runs of a cell as
    independent, which they are when each run has its own seed.
    """
    level = check_confidence(confidence, "failure_summary")
    if not isinstance(table, pd.DataFrame):
        raise ModelFitError(
            f"failure_summary: `table` must be a pandas DataFrame (the results table), but got {type(table).__name__}."
        )
    flags = _aligned_flags(table, failed)
    frame = prepare(
        table.assign(_failed_flag=flags),
        columns=[*CELL, "_failed_flag"],
        response=response,
        task=task,
        caller="failure_summary",
    )
    frame = frame[frame["_failed_flag"].notna()]
    if frame.empty:
        raise ModelFitError("failure_summary: `failed` must be known for some grid run, but every flag is missing.")
    frame = frame.assign(
        _failed_flag=frame["_failed_flag"].astype(bool),
        _healthy=frame[response].where(~frame["_failed_flag"].astype(bool)),
    )
    out = (
        frame.groupby(CELL, sort=True)
        .agg(
            n=("_failed_flag", "size"),
            n_failed=("_failed_flag", "sum"),
            mean_healthy=("_healthy", "mean"),
            mean_all=(response, "mean"),
        )
        .reset_index()
    )
    return with_wilson_rate(out, level, "p_fail")[SUMMARY_COLUMNS]


def _aligned_flags(table: pd.DataFrame, failed: pd.Series | np.ndarray) -> pd.Series:
    """``failed`` as a nullable boolean Series on ``table``'s index (a Series by index, anything else by position)."""
    if isinstance(failed, pd.Series):
        if not table.index.isin(failed.index).all():
            raise ModelFitError(
                "failure_summary: `failed` must have a flag for every row of `table` (a Series is aligned on the "
                "index), but some rows of the table are missing from its index."
            )
        raw = failed.reindex(table.index)
    else:
        values = np.asarray(failed, dtype=object)
        if values.ndim != 1 or len(values) != len(table):
            raise ModelFitError(
                f"failure_summary: `failed` must hold one flag per row of `table` ({len(table)} rows), but got "
                f"shape {values.shape}."
            )
        raw = pd.Series(values, index=table.index)
    known = raw.notna()
    flags = raw[known].map(_as_flag)
    if flags.isna().any():
        value = raw[known][flags.isna()].iloc[0]
        value = value.item() if isinstance(value, np.generic) else value
        raise ModelFitError(f"failure_summary: `failed` must be boolean (True/False), but got failed={value!r}.")
    out = pd.Series(pd.NA, index=table.index, dtype="boolean")
    out[known] = flags.astype(bool).to_numpy()
    return out

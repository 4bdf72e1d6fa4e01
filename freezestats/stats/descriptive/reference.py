"""The 2020 blog post's published figures, and our cells side by side with them.

The blog ("How many layers of my BERT model should I freeze?", 2020) fine-tuned RoBERTa-base on SST-2
and CoLA with 5 seeds per cell and published, per task, training size and freeze depth, the mean,
median, standard deviation, minimum and maximum of the best validation accuracy. freezestats ships
that appendix as ``data/reference/blog2020_roberta_base.csv``; :func:`load_reference` reads it and
:func:`compare_with_reference` lines a reproduction up against it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.exceptions import DataError, ModelFitError
from freezestats.stats.descriptive.variance import cell_summary
from freezestats.stats.design.checks import CELL, check_confidence, prepare

__all__ = ["REFERENCE_FILE", "compare_with_reference", "load_reference"]

REFERENCE_FILE = "data/reference/blog2020_roberta_base.csv"
"""The shipped appendix of the blog post, relative to the source tree (found by ``bundled_path``)."""

REFERENCE_RUNS = 5
"""Runs (seeds) behind every cell of the blog's appendix."""

REFERENCE_METRIC = "accuracy"
"""The metric of every figure in the blog's appendix (CoLA included)."""

_STATS = ["n", "mean", "median", "std", "min", "max"]
REFERENCE_COLUMNS = [*CELL, *_STATS]
COMPARE_COLUMNS = [
    *CELL,
    *_STATS,
    *(f"ref_{s}" for s in _STATS),
    "difference",
    "se",
    "df",
    "ci_low",
    "ci_high",
    "in_reference",
    "note",
]


def load_reference(path: str | Path | None = None) -> pd.DataFrame:
    r"""Read the blog's appendix table (or another table in its format).

    Parameters
    ----------
    path : str, pathlib.Path or None
        A CSV with columns ``task, train_size, frozen_layers, mean, median, std, min, max`` and
        optionally ``n``; None reads the shipped ``data/reference/blog2020_roberta_base.csv``.

    Returns
    -------
    pandas.DataFrame
        One row per cell, sorted by ``task, train_size, frozen_layers``:

        - ``task``, ``train_size``, ``frozen_layers``: the cell (``frozen_layers = -1`` freezes the
          embeddings only).
        - ``n``: runs per cell (the file's ``n`` column, else 5 as in the blog).
        - ``mean``, ``median``, ``std``, ``min``, ``max``: the published statistics of the best
          validation accuracy, as printed (rounded to 3–4 decimals).

    Raises
    ------
    DataError
        The file does not exist, cannot be parsed, lacks a column, has non-numeric statistics,
        non-integer cell coordinates or duplicated cells.
    FileNotFoundError
        ``path`` is None and the shipped file is missing (a broken installation).

    Notes
    -----
    The blog does not say whether ``std`` is the sample standard deviation (``ddof=1``, pandas'
    default, as in :func:`~freezestats.stats.descriptive.variance.cell_summary`) or the population one; with 5
    runs they differ by a factor :math:`\sqrt{5/4} \approx 1.12`, and the rounded figures cannot
    settle it (for most cells no five scores ``k / n_eval`` reproduce all printed statistics under
    either convention). :func:`compare_with_reference` assumes ``ddof=1``. All figures are *best*
    validation accuracy over 10 epochs, checked every half epoch, and so biased upwards (the
    checkpoint is selected on the set it is scored on).

    References
    ----------
    .. [1] "How many layers of my BERT model should I freeze?" (blog post, 2020), appendix tables.
    """
    if path is None:
        from freezestats.tasks.bundled import bundled_path

        path = bundled_path(REFERENCE_FILE)
    path = Path(path)
    if not path.is_file():
        raise DataError(f"load_reference: the reference table must be an existing CSV file, but {path} does not exist.")
    try:
        table = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as err:
        raise DataError(f"load_reference: cannot read the reference table {path}: {err}.") from err
    return _validated(table, str(path))


def _validated(table: pd.DataFrame, source: str) -> pd.DataFrame:
    """The reference table with checked columns and dtypes, sorted; DataError naming ``source`` otherwise."""
    needed = [*CELL, "mean", "median", "std", "min", "max"]
    missing = [c for c in needed if c not in table.columns]
    if missing:
        raise DataError(
            f"load_reference: the reference table must have the columns {needed}, but {source} lacks {missing} "
            f"(columns present: {list(table.columns)})."
        )
    if "n" not in table.columns:
        table["n"] = REFERENCE_RUNS
    table = table[REFERENCE_COLUMNS].copy()
    table["task"] = table["task"].astype(str)
    for column in ("train_size", "frozen_layers", "n"):
        values = pd.to_numeric(table[column], errors="coerce")
        bad = values.isna() | (values != np.round(values))
        if bad.any():
            raise DataError(
                f"load_reference: column {column!r} of {source} must hold integers, but row "
                f"{int(np.flatnonzero(bad)[0])} has {column}={_py(table[column][bad].iloc[0])!r}."
            )
        table[column] = values.astype(np.int64)
    for column in ("mean", "median", "std", "min", "max"):
        values = pd.to_numeric(table[column], errors="coerce")
        if values.isna().any():
            raise DataError(
                f"load_reference: column {column!r} of {source} must be numeric, but row "
                f"{int(np.flatnonzero(values.isna())[0])} has {column}={_py(table[column][values.isna()].iloc[0])!r}."
            )
        table[column] = values.astype(float)
    duplicated = table.duplicated(CELL)
    if duplicated.any():
        first = [_py(v) for v in table.loc[duplicated, CELL].iloc[0]]
        raise DataError(
            f"load_reference: every (task, train_size, frozen_layers) must appear once in {source}, "
            f"but {first} repeats."
        )
    return table.sort_values(CELL, ignore_index=True)


def compare_with_reference(
    data: pd.DataFrame,
    reference: pd.DataFrame | str | Path | None = None,
    response: str = "best_dev",
    task: str | None = None,
    confidence: float = 0.95,
) -> pd.DataFrame:
    r"""Our per-cell statistics next to the blog's, with a Welch interval for the difference of means.

    Parameters
    ----------
    data : pandas.DataFrame
        Our results table (one row per run); needs ``role, task, train_size, frozen_layers`` and
        ``response``; a ``metric`` column, when present, is checked against the reference's accuracy.
    reference : pandas.DataFrame, str, pathlib.Path or None
        The reference table as returned by :func:`load_reference`, a path to one, or None for the
        shipped blog appendix.
    response : str
        Our per-run score to compare; ``"best_dev"`` is the blog's statistic (the best validation
        score during training). ``"final_dev"`` or ``"heldout"`` are less biased but measure something
        else than the blog, so differences then mix protocol and estimator.
    task : str or None
        Only this task; None compares every task of our table.
    confidence : float
        Coverage of the interval for the difference, in (0, 1).

    Returns
    -------
    pandas.DataFrame
        One row per cell of *our* table, sorted by ``task, train_size, frozen_layers``:

        - ``task``, ``train_size``, ``frozen_layers``: the cell.
        - ``n``, ``mean``, ``median``, ``std``, ``min``, ``max``: ours, as in :func:`cell_summary`.
        - ``ref_n``, ``ref_mean``, ``ref_median``, ``ref_std``, ``ref_min``, ``ref_max``: the
          reference's (NaN when the cell is not in it).
        - ``difference``: ``mean - ref_mean``.
        - ``se``: :math:`\sqrt{s_1^2/n_1 + s_2^2/n_2}`.
        - ``df``: Welch–Satterthwaite degrees of freedom.
        - ``ci_low``, ``ci_high``: Welch confidence interval for the difference of the two
          population means.
        - ``in_reference``: whether the exact (task, train_size, frozen_layers) is in the reference.
        - ``note``: empty when the comparison is complete, otherwise why something is NaN (cell or task
          not in the reference, a different metric, fewer than 2 of our runs, no spread on either
          side).

    Raises
    ------
    ModelFitError
        As :func:`cell_summary`; and when *no* cell of our table matches a reference cell (wrong
        task names, sizes or depths: a comparison would be all NaN). Cells or tasks missing from the
        reference are otherwise kept, with NaN and a ``note``.
    DataError
        The reference file cannot be read (see :func:`load_reference`).

    Notes
    -----
    Cells are matched on the exact triple (``task``, ``train_size``, ``frozen_layers``); nothing is
    interpolated. A model with a different depth (e.g. MiniLM's 6 layers against RoBERTa-base's 12)
    therefore matches only the depths both grids contain, -1, 0, 2 and 4 for the shipped studies, and
    those depths mean different *fractions* of the model.

    With our mean :math:`\bar y_1`, SD :math:`s_1` over :math:`n_1` runs, and the reference's
    :math:`\bar y_2, s_2, n_2` (:math:`n_2 = 5`),

    .. math::

        \bar y_1 - \bar y_2 \pm t_{1-\alpha/2,\,\nu}\,\sqrt{\frac{s_1^2}{n_1} + \frac{s_2^2}{n_2}},
        \qquad
        \nu = \frac{(s_1^2/n_1 + s_2^2/n_2)^2}{\frac{(s_1^2/n_1)^2}{n_1-1} + \frac{(s_2^2/n_2)^2}{n_2-1}}.

    The interval is computed from the two summaries alone, as the blog publishes no per-run values.
    It assumes normal responses within each cell; cells that mix collapsed and healthy runs are
    bimodal, so read their intervals as rough. When neither side has any spread (e.g. every run at the
    majority baseline) the interval is not defined and is left NaN with a note. The published figures
    are rounded to 3–4 decimals, which matters only for differences of that order. Different hardware,
    library versions and data order make some difference expected even for a faithful reproduction.

    Missing data: our runs with a missing response are dropped (listwise deletion).

    References
    ----------
    .. [1] Welch, B. L. (1947). The generalization of "Student's" problem when several different
       population variances are involved. *Biometrika*, 34(1–2), 28–35.
    .. [2] "How many layers of my BERT model should I freeze?" (blog post, 2020), appendix tables.
    """
    level = check_confidence(confidence, "compare_with_reference")
    ours = cell_summary(data, response=response, task=task)
    frame = prepare(data, columns=CELL, response=response, task=task, caller="compare_with_reference")
    if reference is None or isinstance(reference, (str, Path)):
        ref = load_reference(reference)
    elif isinstance(reference, pd.DataFrame):
        ref = _validated(reference.copy(), "the reference DataFrame")
    else:
        raise ModelFitError(
            "compare_with_reference: `reference` must be a DataFrame, a path or None, "
            f"but got {type(reference).__name__}."
        )
    ref = ref[REFERENCE_COLUMNS].rename(columns={s: f"ref_{s}" for s in _STATS})

    out = ours.merge(ref, on=CELL, how="left", validate="one_to_one", indicator=True)
    out["in_reference"] = out.pop("_merge").eq("both")
    if not out["in_reference"].any():
        levels = {
            name: (sorted(map(int, t["train_size"].unique())), sorted(map(int, t["frozen_layers"].unique())))
            for name, t in (("ours", ours), ("ref", ref))
        }
        raise ModelFitError(
            "compare_with_reference: at least one of our cells must match a reference cell exactly on (task, "
            f"train_size, frozen_layers), but none does: ours have tasks {sorted(ours['task'].unique())}, "
            f"sizes {levels['ours'][0]}, depths {levels['ours'][1]}; the reference has tasks "
            f"{sorted(ref['task'].unique())}, sizes {levels['ref'][0]}, depths {levels['ref'][1]}."
        )

    n1, s1, m1 = out["n"].to_numpy(float), out["std"].to_numpy(float), out["mean"].to_numpy(float)
    n2, s2, m2 = out["ref_n"].to_numpy(float), out["ref_std"].to_numpy(float), out["ref_mean"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        v1, v2 = s1**2 / n1, s2**2 / n2
        se = np.sqrt(v1 + v2)
        df = (v1 + v2) ** 2 / (v1**2 / (n1 - 1) + v2**2 / (n2 - 1))
        half = stats.t.ppf(1.0 - (1.0 - level) / 2.0, df) * se

    notes = _notes(out, frame, set(ref["task"]))
    comparable = out["in_reference"].to_numpy() & ~notes.str.startswith("not comparable").to_numpy()
    interval = comparable & np.isfinite(se) & (se > 0) & np.isfinite(df)
    out["difference"] = np.where(comparable, m1 - m2, np.nan)
    out["se"] = np.where(interval, se, np.nan)
    out["df"] = np.where(interval, df, np.nan)
    out["ci_low"] = np.where(interval, m1 - m2 - half, np.nan)
    out["ci_high"] = np.where(interval, m1 - m2 + half, np.nan)
    out["note"] = notes.to_numpy()
    return out[COMPARE_COLUMNS]


def _notes(out: pd.DataFrame, frame: pd.DataFrame, ref_tasks: set[str]) -> pd.Series:
    """Why each row's comparison is incomplete ('' when it is complete)."""
    metrics: dict[str, list[str]] = {}
    if "metric" in frame.columns:
        for name, part in frame.groupby("task"):
            metrics[str(name)] = sorted(map(str, part["metric"].dropna().unique()))
    notes = []
    for row in out.itertuples(index=False):
        task_metrics = metrics.get(str(row.task), [])
        if row.task not in ref_tasks:
            notes.append(f"task not in the reference (reference tasks: {', '.join(sorted(ref_tasks))})")
        elif not row.in_reference:
            notes.append("no reference cell for this (task, train_size, frozen_layers)")
        elif task_metrics and task_metrics != [REFERENCE_METRIC]:
            notes.append(
                f"not comparable: our metric is {', '.join(task_metrics)}, the reference reports {REFERENCE_METRIC}"
            )
        elif row.n < 2:
            notes.append("fewer than 2 of our runs: no standard deviation, no interval")
        elif row.std == 0 and row.ref_std == 0:
            notes.append("no spread on either side (both SDs are 0): no Welch interval")
        else:
            notes.append("")
    return pd.Series(notes, index=out.index, dtype=object)


def _py(value: object) -> object:
    """A numpy scalar as the Python scalar it holds, for readable messages."""
    return value.item() if isinstance(value, np.generic) else value

"""The study's answer in words: one sentence per training size from the non-inferiority tables.

:func:`noninferiority_answer` reads the tables of
:func:`~freezestats.stats.inference.noninferiority.noninferiority_sequence`
and :func:`~freezestats.stats.inference.noninferiority.reference_beats_baseline` and says how deep one can freeze within
the margin, or why no cost is stated. It computes no statistic: it is wording over finished tests, checked
separately from them (the tests' numbers against R, the sentences against their rules), so it lives apart from
:mod:`freezestats.stats.inference.noninferiority`, which still exports it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from freezestats.exceptions import ModelFitError
from freezestats.stats.inference.sequence import BASELINE_COLUMNS, NONINFERIORITY_COLUMNS, order_by_depth

__all__ = ["noninferiority_answer"]

ANSWER_COLUMNS = ["train_size", "deepest_noninferior", "margin", "beats_baseline", "statement"]


def noninferiority_answer(table: pd.DataFrame, baseline_check: pd.DataFrame | None) -> pd.DataFrame:
    """The study's answer per training size, in one sentence: how deep can one freeze within the margin?

    Parameters
    ----------
    table
        The output of :func:`noninferiority_sequence`.
    baseline_check
        The output of :func:`reference_beats_baseline` for the same fit, or None to skip the check (then the
        sentences are conditional on the full model having learned something, which they do not say).

    Returns
    -------
    pandas.DataFrame
        One row per training size of ``table``, sorted, with columns

        * ``train_size`` (int)
        * ``deepest_noninferior``: the deepest depth shown non-inferior (an int), or None when none was, or when
          the baseline check failed
        * ``margin``: the margin of the tests
        * ``beats_baseline``: the result of the baseline check (True when ``baseline_check`` is None)
        * ``statement``: e.g. "freezing up to 4 layers is non-inferior to full fine-tuning within 1 point
          (margin 0.01) at n = 1000", "no frozen depth was shown non-inferior ...", or, when the baseline check
          failed, "full fine-tuning was not shown to beat the majority baseline (...) at n = 50; no cost is
          stated"

    Raises
    ------
    ModelFitError
        ``table`` or ``baseline_check`` lacks its columns, or ``baseline_check`` misses a training size of
        ``table``.

    Notes
    -----
    "Up to k" is literal: every shallower depth was shown non-inferior too. A procedure that tests past a depth
    not shown (the task's graphical family) may show a deeper depth alone; the sentence then names it apart,
    and ``deepest_noninferior`` stays the end of the unbroken run. A ``population`` column of ``table`` (what
    the intervals speak of) is carried into the answer. "Not shown" is not "shown inferior": a depth that is
    not claimed may still be non-inferior, and the study was too small to tell.
    """
    _require_columns(table, NONINFERIORITY_COLUMNS, "table", "noninferiority_sequence")
    checks = None
    if baseline_check is not None:
        _require_columns(baseline_check, BASELINE_COLUMNS, "baseline_check", "reference_beats_baseline")
        checks = baseline_check.set_index("train_size")
    rows = []
    for size, part in table.groupby("train_size", sort=True):
        size = int(size)
        margin = float(part["margin"].iloc[0])
        reference = int(part["reference"].iloc[0])
        check = _baseline_row(checks, size)
        if check is not None and not bool(check["beats_baseline"]):
            rows.append((size, None, margin, False, _no_baseline_statement(check, size, reference)))
            continue
        part = order_by_depth(part)
        shown = part["noninferior"].astype(bool).to_numpy()
        prefix = int(shown.cumprod().sum())  # the depths shown with every shallower one shown too
        deepest = int(part["frozen_layers"].iloc[prefix - 1]) if prefix else None
        statement = _answer_statement(deepest, part, size, margin, reference)
        beyond = [int(k) for k in part["frozen_layers"].iloc[prefix:][shown[prefix:]]]
        if beyond:  # a procedure that tests past a failure (the task's graph) can show a deeper depth alone
            statement += _beyond_gap(beyond, int(part["frozen_layers"].iloc[prefix]), deepest)
        rows.append((size, deepest, margin, True, statement))
    out = pd.DataFrame(rows, columns=ANSWER_COLUMNS)
    if "population" in table.columns:
        out["population"] = str(table["population"].iloc[0])
    out["deepest_noninferior"] = out["deepest_noninferior"].astype(object)
    out.loc[out["deepest_noninferior"].isna(), "deepest_noninferior"] = None
    return out


def _require_columns(frame: object, columns: list[str], name: str, producer: str) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise ModelFitError(
            f"noninferiority_answer: `{name}` must be the DataFrame from {producer}, but got {type(frame).__name__}."
        )
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ModelFitError(
            f"noninferiority_answer: `{name}` must have the columns of {producer}, but {missing} are missing."
        )


def _baseline_row(checks: pd.DataFrame | None, size: int) -> pd.Series | None:
    if checks is None:
        return None
    if size not in checks.index:
        raise ModelFitError(
            f"noninferiority_answer: `baseline_check` must have a row for every train size of `table`, but "
            f"train_size={size} is missing (present: {sorted(map(int, checks.index))})."
        )
    return checks.loc[size]


def _reference_name(reference: int) -> str:
    if reference == 0:
        return "full fine-tuning"
    return f"frozen_layers={reference}"


def _points(margin: float) -> str:
    points = 100.0 * margin
    return f"{points:g} point{'' if points == 1 else 's'} (margin {margin:g})"


def _depth_phrase(depth: int) -> str:
    if depth < 0:
        return "freezing the embeddings only"
    return f"freezing up to {depth} layer{'' if depth == 1 else 's'}"


def _answer_statement(deepest: int | None, part: pd.DataFrame, size: int, margin: float, reference: int) -> str:
    against = _reference_name(reference)
    if deepest is not None:
        return f"{_depth_phrase(deepest)} is non-inferior to {against} within {_points(margin)} at n = {size}"
    first = part.iloc[0]
    bound = float(first["lower"])
    why = (
        f"has lower bound {bound:.4f} against -{margin:g}"
        if np.isfinite(bound)
        else "has no spread to bound: every run of it and of the reference scored the same"
    )
    return (
        f"no frozen depth was shown non-inferior to {against} within {_points(margin)} at n = {size} (the first "
        f"depth of the sequence, frozen_layers={int(first['frozen_layers'])}, {why})"
    )


def _beyond_gap(beyond: list[int], gap: int, deepest: int | None) -> str:
    """The depths shown non-inferior past one that was not: named, never folded into "up to"."""
    names = ", ".join(str(k) for k in beyond)
    return (
        f"{'; ' if deepest is not None else '; but '}frozen_layers={names} "
        f"{'is' if len(beyond) == 1 else 'are'} shown non-inferior too, although frozen_layers={gap} is not"
    )


def _no_baseline_statement(check: pd.Series, size: int, reference: int) -> str:
    return (
        f"{_reference_name(reference)} was not shown to beat the majority baseline (mean {float(check['estimate']):.4f}"
        f" vs baseline {float(check['baseline']):.4f}, one-sided p = {float(check['p_val']):.2g}) at n = {size}; "
        "no cost is stated"
    )

"""Honest summaries of a validation curve: the score blog posts report, next to an unbiased one.

:func:`summarize_curve` separates the number that blog posts report (the best validation score over
training, which selects *and* scores the checkpoint on the same data, hence is biased upward) from
an unbiased held-out estimate obtained by selecting on one half of the validation set and scoring
on the other (see Dodge et al., 2020, "Fine-Tuning Pretrained Language Models: Weight
Initializations, Data Orders, and Early Stopping", on how much checkpoint selection inflates
reported scores).

Kept apart from :mod:`freezestats.tasks.metrics` (which re-exports both names) because it works on a run's
sequence of scores, not on predictions: it needs none of the metric code, only the convention that a
``nan`` score is the worst one, and it is what every trial's record is built from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["CurveSummary", "summarize_curve"]


@dataclass(frozen=True)
class CurveSummary:
    """What one fine-tuning run's validation curve amounts to.

    Attributes
    ----------
    best_dev
        Maximum of the whole-validation-set curve -- the number usually reported. Biased upward: the
        same examples choose the checkpoint and score it, so it rewards noise.
    best_step
        Index (evaluation number) of ``best_dev``; first occurrence on ties.
    final_dev
        Whole-validation-set score of the last evaluation (no selection at all).
    heldout
        Score on the "score" half at the checkpoint that maximises the "select" half: checkpoint
        selection and scoring use disjoint examples, so this estimate is unbiased for the selected
        checkpoint (at the price of selecting on half the data).
    heldout_step
        Index of the checkpoint chosen on the "select" half; first occurrence on ties.
    """

    best_dev: float
    best_step: int
    final_dev: float
    heldout: float
    heldout_step: int


def _curve(name: str, scores: Sequence[float] | np.ndarray) -> np.ndarray:
    arr = np.asarray(scores, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence of scores, but got shape {arr.shape}.")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} must contain at least one evaluation, but it is empty.")
    return arr


def _argmax_nan_low(arr: np.ndarray) -> int:
    """Index of the maximum with ``nan`` ranked below every number; first index on ties.

    A checkpoint whose metric is ``nan`` (diverged) must never be selected over one with a real
    score; if every score is ``nan``, index 0 is returned and the caller reports ``nan``.
    """
    return int(np.argmax(np.where(np.isnan(arr), -np.inf, arr)))


def summarize_curve(
    scores_full: Sequence[float],
    scores_select: Sequence[float],
    scores_score: Sequence[float],
) -> CurveSummary:
    """Summarise a run's validation curve, with both the biased and an unbiased selected score.

    Parameters
    ----------
    scores_full
        Primary metric at each evaluation on the whole validation set.
    scores_select
        The same, on the fixed "select" half (see :func:`freezestats.tasks.subsets.validation_halves`).
    scores_score
        The same, on the complementary "score" half.

    Returns
    -------
    CurveSummary
        See its attributes. ``nan`` scores are treated as ``-inf`` when choosing a checkpoint, but
        reported as they are (``best_dev`` is ``nan`` only when every full score is ``nan``).

    Raises
    ------
    ValueError
        If a sequence is empty or not 1-D, or the three lengths differ (they must index the same
        evaluations).

    Examples
    --------
    >>> s = summarize_curve([.5, .7, .9, .6], [.5, .8, .7, .6], [.5, .6, .95, .6])
    >>> s.best_dev, s.best_step, s.final_dev, s.heldout, s.heldout_step
    (0.9, 2, 0.6, 0.6, 1)
    """
    full = _curve("scores_full", scores_full)
    select = _curve("scores_select", scores_select)
    score = _curve("scores_score", scores_score)
    if not (full.shape[0] == select.shape[0] == score.shape[0]):
        raise ValueError(
            "scores_full, scores_select and scores_score must have one entry per evaluation (equal "
            f"lengths), but got lengths {full.shape[0]}, {select.shape[0]} and {score.shape[0]}."
        )
    best_step = _argmax_nan_low(full)
    heldout_step = _argmax_nan_low(select)
    return CurveSummary(
        best_dev=float(full[best_step]),
        best_step=best_step,
        final_dev=float(full[-1]),
        heldout=float(score[heldout_step]),
        heldout_step=heldout_step,
    )

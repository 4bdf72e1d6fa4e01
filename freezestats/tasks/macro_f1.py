"""Macro-averaged F1: the multi-class metric that weighs every class alike, however rare.

Accuracy on a multi-class task is carried by its large classes; a model that never predicts a rare class loses
little accuracy. Macro-F1 averages the per-class F1 over the classes, so it does not (Sokolova & Lapalme, 2009,
"A systematic analysis of performance measures for classification tasks"). It is a multi-class task's second
default metric, beside accuracy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from freezestats.tasks.metric_inputs import as_pair

__all__ = ["macro_f1"]


def macro_f1(pred: Sequence | np.ndarray, ref: Sequence | np.ndarray) -> float:
    """Unweighted mean over the classes of each class's F1 (``2 TP / (2 TP + FP + FN)``).

    The classes are those in ``ref`` or ``pred``, so a class predicted but never present scores F1 0 and pulls the
    mean down, as in ``sklearn.metrics.f1_score(ref, pred, average="macro", zero_division=0)``, which it equals.

    Returns
    -------
    float
        In ``[0, 1]``. A constant predictor scores ``1 / K`` of its class's F1: no skill, and below any model that
        tells the classes apart.

    Examples
    --------
    >>> macro_f1([0, 1, 2, 2], [0, 1, 1, 2])
    0.7777777777777777
    """
    p, r = as_pair(pred, ref)
    classes = np.union1d(p, r)
    scores = []
    for k in classes:
        tp = int(np.count_nonzero((p == k) & (r == k)))
        fp = int(np.count_nonzero((p == k) & (r != k)))
        fn = int(np.count_nonzero((p != k) & (r == k)))
        scores.append(2.0 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores))

"""The one check every metric makes of its inputs: two 1-D arrays of equal, non-zero length.

Apart from :mod:`freezestats.tasks.metrics` so that metrics defined in their own modules
(:mod:`freezestats.tasks.macro_f1`, which ``metrics`` imports into its registry) use the same check and messages.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["as_pair"]


def as_pair(pred: Sequence | np.ndarray, ref: Sequence | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return ``pred`` and ``ref`` as 1-D arrays of equal, non-zero length.

    Metrics on misaligned arrays silently compute garbage (numpy broadcasting would even accept a
    length-1 ``pred``), so shape problems are errors rather than something to be coerced.
    """
    p = np.asarray(pred)
    r = np.asarray(ref)
    if p.ndim != 1 or r.ndim != 1:
        raise ValueError(f"predictions and references must be 1-D, but got pred.shape={p.shape}, ref.shape={r.shape}.")
    if p.shape[0] != r.shape[0]:
        raise ValueError(
            "predictions and references must have the same length, "
            f"but got len(pred)={p.shape[0]} and len(ref)={r.shape[0]}."
        )
    if p.shape[0] == 0:
        raise ValueError("metrics need at least one example, but got empty predictions and references.")
    return p, r

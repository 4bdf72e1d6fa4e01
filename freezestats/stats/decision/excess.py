"""Excess collapse: does a depth collapse more often than full fine-tuning, paired by seed?

Of S seeds run at both, b collapsed only at the depth and c only under full fine-tuning (pairs in which both or
neither collapsed say nothing about the difference). Under the null of no excess, each discordant pair is the
depth's with probability 1/2, so the exact one-sided McNemar p-value is ``P(Binomial(b + c, 1/2) >= b)``
(McNemar 1947, in its exact binomial form).
"""

from __future__ import annotations

from scipy import stats

__all__ = ["excess_collapse_p"]


def excess_collapse_p(only_depth: int, only_full: int) -> float:
    """One-sided exact McNemar p-value for "the depth collapses more often" (1.0 with no discordant pair)."""
    if only_depth < 0 or only_full < 0:
        raise ValueError(f"discordant pair counts must be >= 0, but got {only_depth} and {only_full}")
    if only_depth + only_full == 0:
        return 1.0
    return float(stats.binomtest(only_depth, only_depth + only_full, 0.5, alternative="greater").pvalue)

"""Verdicts per train size, read off the 95% intervals shown: a fixed sequence at one-sided 2.5%.

Within one train size (the family: a practitioner reads the row for their own size), each depth d has the cost
when both runs train, ``cost_d`` (depth - full fine-tuning, points), with its 95% interval [L_d, U_d], and the
exact McNemar p-value p_d of excess collapse. With margin m and alpha = 0.025 one-sided:

- *within the margin*: H0 ``cost_d <= -m`` is rejected when ``L_d > -m``. Tested shallow to deep (-1, 1, 2, ...);
  the sequence stops at the first depth not shown, or at one whose excess collapse is shown (below).
- *costs more than m*: H0 ``cost_d >= -m`` is rejected when ``U_d < -m``. Tested deep to shallow, stopping at the
  first depth not shown.
- *collapses more often*: H0 "no excess" is rejected when ``p_d < alpha``. Tested deep to shallow, likewise.

A fixed sequence spends the whole alpha on each test in turn and stops at the first failure, so each of the three
families keeps its familywise error at 2.5% one-sided (Maurer, Hothorn & Lehmacher 1995) and every verdict can be
read off the interval printed, with no other adjusted interval for the same number. Because the within sequence
runs shallow to deep, a deeper depth never changes a shallower depth's verdict; other train sizes never enter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from freezestats.stats.decision.crossed import CrossedCost

__all__ = ["ALPHA", "DepthEvidence", "DepthVerdict", "Verdict", "fixed_sequence"]

ALPHA = 0.025


class Verdict(str, Enum):
    """What a depth's row says, in the words the report prints."""

    WITHIN = "within the margin"
    BEYOND = "costs more than the margin"
    EXCESS = "collapses more often"
    NOT_KNOWN = "not known"


@dataclass(frozen=True)
class DepthEvidence:
    """One depth at one train size against full fine-tuning, paired by seed.

    Of ``seeds`` seeds run at both, ``both_trained`` pairs had no collapsed run (k), ``only_depth`` collapsed only
    at the depth (b), ``only_full`` only under full fine-tuning (c). ``cost`` is None when k < 3."""

    depth: int
    seeds: int
    both_trained: int
    depth_collapsed: int
    full_collapsed: int
    only_depth: int
    only_full: int
    cost: CrossedCost | None
    excess_p: float


@dataclass(frozen=True)
class DepthVerdict:
    evidence: DepthEvidence
    within: bool
    beyond: bool
    excess: bool
    reached: bool  # whether the within-the-margin sequence reached this depth's test

    @property
    def verdict(self) -> Verdict:
        if self.within:
            return Verdict.WITHIN
        if self.beyond:
            return Verdict.BEYOND
        return Verdict.EXCESS if self.excess else Verdict.NOT_KNOWN

    @property
    def decided(self) -> bool:
        return self.verdict is not Verdict.NOT_KNOWN


def fixed_sequence(evidence: Sequence[DepthEvidence], margin: float, alpha: float = ALPHA) -> list[DepthVerdict]:
    """The verdicts of one train size's depths (any order in, shallow to deep out); ``margin`` in points > 0."""
    if not margin > 0:
        raise ValueError(f"the margin must be > 0 points, but got {margin}")
    order = sorted(evidence, key=lambda e: e.depth)
    beyond = _deep_to_shallow(order, lambda e: e.cost is not None and e.cost.ci_high < -margin)
    excess = _deep_to_shallow(order, lambda e: e.excess_p < alpha)
    within: set[int] = set()
    reached: set[int] = set()
    for e in order:
        reached.add(e.depth)
        if e.depth in excess or e.cost is None or not e.cost.ci_low > -margin:
            break
        within.add(e.depth)
    return [DepthVerdict(e, e.depth in within, e.depth in beyond, e.depth in excess, e.depth in reached) for e in order]


def _deep_to_shallow(order: Sequence[DepthEvidence], shown: object) -> set[int]:
    found: set[int] = set()
    for e in reversed(order):
        if not shown(e):  # type: ignore[operator]
            break
        found.add(e.depth)
    return found

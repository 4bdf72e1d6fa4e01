"""The adaptive design's numbers: the margin, the familywise level, the seeds per cell and the spending function.

Plain numbers only, so that the spec's ``[adaptive]`` table maps onto it one key per field and a bench or a test
builds one without a spec.
"""

from __future__ import annotations

from dataclasses import dataclass

from freezestats.exceptions import ModelFitError
from freezestats.stats.sequential.spending import SPENDING_FUNCTIONS

__all__ = ["SequentialPlan"]


@dataclass(frozen=True)
class SequentialPlan:
    """When an adaptive study looks at its contrasts, and at what level it decides them.

    ``margin`` (> 0, on the metric's scale) and ``alpha`` (the familywise one-sided level over the task, as
    in :func:`~freezestats.stats.inference.task_family.task_noninferiority`) are the fixed analysis's. A cell
    is first decided at ``min_seeds`` paired seeds (>= 2: a contrast's spread needs two), then after every
    ``seeds_per_round`` more, and never gets more than ``max_seeds``. ``spending`` names the Lan–DeMets
    function (:data:`~freezestats.stats.sequential.spending.SPENDING_FUNCTIONS`). ``futility`` and ``seek`` set
    the non-binding stop of a cell (:mod:`~freezestats.stats.sequential.history`): ``seek="either"`` keeps a cell
    while it can still be shown non-inferior or inferior, ``"noninferiority"`` only while it can be shown
    non-inferior.
    """

    margin: float
    alpha: float = 0.05
    min_seeds: int = 4
    max_seeds: int = 10
    seeds_per_round: int = 1
    spending: str = "obrien_fleming"
    futility: float | None = None
    seek: str = "either"

    def __post_init__(self) -> None:
        if not self.margin > 0 or not 0 < self.alpha < 0.5:
            raise ModelFitError(f"SequentialPlan: need margin > 0 and 0 < alpha < 0.5, but got {self.margin=}, "
                                f"{self.alpha=}.")  # fmt: skip
        if not 2 <= self.min_seeds <= self.max_seeds or self.seeds_per_round < 1:
            raise ModelFitError(
                f"SequentialPlan: need 2 <= min_seeds <= max_seeds and seeds_per_round >= 1, but got "
                f"{self.min_seeds=}, {self.max_seeds=}, {self.seeds_per_round=}."
            )
        if self.futility is not None and not 0 < self.futility < 0.5:
            raise ModelFitError(f"SequentialPlan: futility (a conditional power) must be in (0, 0.5), but got "
                                f"{self.futility!r}.")  # fmt: skip
        if self.seek not in ("either", "noninferiority"):
            raise ModelFitError(f"SequentialPlan: seek must be 'either' or 'noninferiority', but got {self.seek!r}.")
        if self.spending not in SPENDING_FUNCTIONS:
            raise ModelFitError(f"SequentialPlan: spending must be one of {list(SPENDING_FUNCTIONS)}, but got "
                                f"{self.spending!r}.")  # fmt: skip

    def looks(self) -> tuple[int, ...]:
        """The paired-seed counts at which cells are decided: ``min_seeds``, then every ``seeds_per_round`` more,
        and ``max_seeds`` last (a shorter last round where the rounds do not divide the range).

        >>> SequentialPlan(margin=0.01, min_seeds=3, max_seeds=10, seeds_per_round=3).looks()
        (3, 6, 9, 10)
        """
        counts = list(range(self.min_seeds, self.max_seeds + 1, self.seeds_per_round))
        if counts[-1] != self.max_seeds:
            counts.append(self.max_seeds)
        return tuple(counts)

    def look_of(self, seeds: int) -> int:
        """The index (1-based) of the last look a cell with ``seeds`` paired seeds has reached; 0 before the first."""
        return sum(1 for count in self.looks() if count <= seeds)

"""The adaptive design's numbers: the margin, the familywise level, the seeds per cell and the spending function.

Plain numbers only, so that the spec's ``[adaptive]`` table maps onto it one key per field and a bench or a test
builds one without a spec.
"""

from __future__ import annotations

from dataclasses import dataclass

from freezestats.exceptions import ModelFitError
from freezestats.spec.adaptive import FUTILITY_FAILURES, FUTILITY_POWER, SEEK
from freezestats.stats.sequential.spending import check_spending

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

    ``futility_seeds`` (2 <= it < ``min_seeds``) adds a screening look before the first: at that many paired seeds
    a cell is only checked for futility (the plan's futility rule, on the side ``seek`` names) and stops as
    exhausted where it cannot close; nothing is tested for non-inferiority there and no level is spent, so the
    familywise error is the plan's without it (a non-binding stop can only remove rejections).
    ``futility_power`` (:data:`~freezestats.spec.adaptive.FUTILITY_POWER`) says which power ``futility`` bounds:
    the conditional power under the current estimate, or the predictive power over its uncertainty.
    ``futility_failures`` (:data:`~freezestats.spec.adaptive.FUTILITY_FAILURES`) says whether the stop projects
    the failure part's variance to shrink with the cell's next seeds or to hold.
    """

    margin: float
    alpha: float = 0.05
    min_seeds: int = 4
    max_seeds: int = 10
    seeds_per_round: int = 1
    spending: str = "obrien_fleming"
    futility: float | None = None
    seek: str = "either"
    futility_seeds: int | None = None
    futility_power: str = "conditional"
    futility_failures: str = "shrink"

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
        if self.futility_seeds is not None and not 2 <= self.futility_seeds < self.min_seeds:
            raise ModelFitError(f"SequentialPlan: need 2 <= futility_seeds < min_seeds, but got "
                                f"{self.futility_seeds=}, {self.min_seeds=}.")  # fmt: skip
        if self.seek not in SEEK:
            raise ModelFitError(f"SequentialPlan: seek must be 'either' or 'noninferiority', but got {self.seek!r}.")
        if self.futility_power not in FUTILITY_POWER:
            raise ModelFitError(f"SequentialPlan: futility_power must be one of {list(FUTILITY_POWER)}, but got "
                                f"{self.futility_power!r}.")  # fmt: skip
        if self.futility_failures not in FUTILITY_FAILURES:
            raise ModelFitError(f"SequentialPlan: futility_failures must be one of {list(FUTILITY_FAILURES)}, but "
                                f"got {self.futility_failures!r}.")  # fmt: skip
        check_spending(self.spending)

    def looks(self) -> tuple[int, ...]:
        """The paired-seed counts at which cells are decided: ``futility_seeds`` where set (the screening look),
        ``min_seeds``, then every ``seeds_per_round`` more, and ``max_seeds`` last (a shorter last round where the
        rounds do not divide the range).

        >>> SequentialPlan(margin=0.01, min_seeds=3, max_seeds=10, seeds_per_round=3).looks()
        (3, 6, 9, 10)
        >>> SequentialPlan(margin=0.01, min_seeds=4, max_seeds=8, seeds_per_round=2, futility_seeds=2).looks()
        (2, 4, 6, 8)
        """
        screening = [] if self.futility_seeds is None else [self.futility_seeds]
        counts = screening + list(range(self.min_seeds, self.max_seeds + 1, self.seeds_per_round))
        if counts[-1] != self.max_seeds:
            counts.append(self.max_seeds)
        return tuple(counts)

    def futility_rule(self) -> str:
        """The ``exhausted`` stop in words, so that every label names the threshold, the side and the screening
        look the study used.

        >>> SequentialPlan(margin=0.01, futility=0.1, futility_seeds=2).futility_rule()
        'exhausted: open at max_seeds, or conditional power to close by then below 0.1 (checked from 2 seeds)'
        """
        close = "close" if self.seek == "either" else "be shown non-inferior"
        screen = "" if self.futility_seeds is None else f" (checked from {self.futility_seeds} seeds)"
        held = ", the failure part's variance held at its current size" if self.futility_failures == "hold" else ""
        if self.futility is None:
            return (f"exhausted: open at max_seeds, or unable to {close} by then even one SE better (conditional "
                    f"power <= 2.3%){screen}{held}")  # fmt: skip
        return (f"exhausted: open at max_seeds, or {self.futility_power} power to {close} by then below "
                f"{self.futility:g}{screen}{held}")  # fmt: skip

    def efficacy_counts(self, look: int) -> tuple[int, ...]:
        """The seed counts of the looks up to ``look`` (1-based) that test non-inferiority: the screening look
        spends no level, so the spending function's information fractions leave it out."""
        return tuple(count for count in self.looks()[:look] if count >= self.min_seeds)

    def look_of(self, seeds: int) -> int:
        """The index (1-based) of the last look a cell with ``seeds`` paired seeds has reached; 0 before the first."""
        return sum(1 for count in self.looks() if count <= seeds)

"""The spec's ``[adaptive]`` table: run seeds in rounds and stop a cell once its answer is known (issue 32).

A study with this table spends its seeds where the answer is still open: every (task, train size, depth) cell
first runs ``min_seeds`` seeds (or first ``futility_seeds``, a futility-only look), then after each round the
sequential non-inferiority test against the reference (frozen 0) decides each depth non-inferior, inferior or
open, and only the open cells that can still close within ``max_seeds`` get the next ``seeds_per_round`` seeds.
The decisions themselves are the statistics'
(:mod:`freezestats.stats.sequential`); this module only reads and checks the table, and says which seeds a cell
draws, in which order. The spec may not import the statistics (they sit above it), so :meth:`AdaptiveSpec.plan_kwargs`
hands the plan over as plain keywords.

Kept apart from :mod:`freezestats.spec.study` because it is a table of its own with its own rules (what it can be
combined with, how the budget relates to the grid); a spec without the table stores and hashes exactly as before.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from freezestats.spec.grid import GridSpec
from freezestats.spec.parser import _Parser

__all__ = [
    "FUTILITY_FAILURES",
    "FUTILITY_POWER",
    "SEEK",
    "SPENDING",
    "AdaptiveSpec",
    "parse_adaptive",
    "spending_gamma",
]

SPENDING = ("obrien_fleming", "pocock", "hwang_shih_decani(γ)")
"""How the error rate is spent over the looks: O'Brien-Fleming (strict early looks), Pocock (even), or the
Hwang-Shih-DeCani family between them, its γ in brackets (-4 about O'Brien-Fleming, 1 about Pocock)."""
_HSD = re.compile(r"hwang_shih_decani\((?P<gamma>[-+]?\d+(?:\.\d*)?)\)")
_GAMMA_LIMIT = 40.0  # beyond it 1 - exp(-γ) spends all of the level at the first look or at the last


def spending_gamma(name: str) -> float | None:
    """The γ of ``"hwang_shih_decani(γ)"``, ``None`` for the two spending functions without one.

    The one grammar of a spending name: the spec checks ``adaptive.spending`` with it and the statistics
    (:mod:`freezestats.stats.sequential.spending`, a stage above) read γ with it. Any other name is a
    ``ValueError`` whose message the caller prefixes with where the name came from.

    >>> spending_gamma("hwang_shih_decani(-2)"), spending_gamma("pocock")
    (-2.0, None)
    """
    if name in SPENDING[:2]:
        return None
    match = _HSD.fullmatch(name) if isinstance(name, str) else None
    if match is None or abs(float(match["gamma"])) > _GAMMA_LIMIT:
        raise ValueError(f"must be 'obrien_fleming', 'pocock' or 'hwang_shih_decani(γ)' with γ a number in "
                         f"[-{_GAMMA_LIMIT:g}, {_GAMMA_LIMIT:g}], but got {name!r}")  # fmt: skip
    return float(match["gamma"])


SEEK = ("either", "noninferiority")
"""Which decision more seeds may be spent to reach: either one (non-inferior or inferior), or non-inferiority only
(a cell that could be shown inferior but not non-inferior stops, as exhausted: its answer to "is it non-inferior?"
is already no claim)."""

FUTILITY_POWER = ("conditional", "predictive")
"""What the futility stop reads against ``futility``: the conditional power (the chance of closing by ``max_seeds``
were the truth the current estimate) or the predictive power (that chance averaged over the estimate's own
uncertainty, flat prior; Spiegelhalter, Freedman & Blackburn 1986). At a few seeds the current estimate is noisy
and conditional power takes it at face value, so it stops cells whose truth would close; predictive power widens
the projection by sqrt(max_seeds / seeds) and stops them only when even that cannot close them."""

FUTILITY_FAILURES = ("shrink", "hold")
"""What the futility stop's projection to ``max_seeds`` assumes of the failure part's variance (the room for the
two cells' failure rates): that the cell's next seeds shrink it as they shrink the seeds' part (``shrink``), or
that they leave it as it is, as they leave the items' part (``hold``). The rates are pooled over the train sizes,
so one cell's seeds add little to them, and where no run of the pair has failed yet the room stays however many
seeds follow: on the realistic simulator the fixed design's power at n >= 100 does not grow from 4 seeds to 24
(``bench/results/adaptive_seeds*``), while ``shrink`` projects it to, and keeps those cells running."""


@dataclass(frozen=True)
class AdaptiveSpec:
    """How seeds are allocated in rounds: the non-inferiority margin and level, the seeds a cell may use, the budget.

    ``budget``: the most runs (trials of grid cells) the whole study may use; ``None``: only ``max_seeds`` bounds it.
    ``futility_seeds``: a first round of that many seeds (< ``min_seeds``) after which only the futility stop is
    applied (a cell that cannot be shown non-inferior stops there; nothing is tested and no level spent).
    """

    margin: float
    alpha: float = 0.05
    min_seeds: int = 4
    max_seeds: int = 10
    seeds_per_round: int = 1
    budget: int | None = None
    spending: str = "obrien_fleming"
    futility: float | None = None
    seek: str = "either"
    futility_seeds: int | None = None
    futility_power: str = "conditional"
    futility_failures: str = "shrink"

    @property
    def first_seeds(self) -> int:
        """The seeds every cell runs in the first round: the screening look's, else ``min_seeds``."""
        return self.min_seeds if self.futility_seeds is None else self.futility_seeds

    def plan_kwargs(self) -> dict[str, Any]:
        """The keywords of :class:`freezestats.stats.sequential.SequentialPlan` (the budget is the runner's)."""
        return {
            "margin": self.margin,
            "alpha": self.alpha,
            "min_seeds": self.min_seeds,
            "max_seeds": self.max_seeds,
            "seeds_per_round": self.seeds_per_round,
            "spending": self.spending,
            "futility": self.futility,
            "seek": self.seek,
            "futility_seeds": self.futility_seeds,
            "futility_power": self.futility_power,
            "futility_failures": self.futility_failures,
        }

    def stored_form(self) -> dict[str, Any]:
        """What the study stores and hashes: every key, ``budget``, ``futility`` and ``futility_seeds`` only when
        set (TOML has no null), and ``seek``, ``futility_power`` and ``futility_failures`` only when not their
        defaults, so a study stored before these keys existed keeps its hash."""
        stored = {**self.plan_kwargs(), "budget": self.budget}
        defaults = {"seek": "either", "futility_power": "conditional", "futility_failures": "shrink"}
        return {k: v for k, v in stored.items() if v is not None and defaults.get(k) != v}

    def seed_ladder(self, grid_seeds: tuple[int, ...]) -> tuple[int, ...]:
        """The seeds a cell draws, in order: ``grid.seeds`` as listed, then the integers after their largest.

        A cell that has run k seeds has run the first k of these, so that every cell's k-th seed is the same seed
        and a decision step knows which cell to enqueue next without reading what any other worker is doing.
        """
        seeds = list(grid_seeds[: self.max_seeds])
        after = max(grid_seeds) + 1
        while len(seeds) < self.max_seeds:
            seeds.append(after)
            after += 1
        return tuple(seeds)


def parse_adaptive(p: _Parser, raw: Mapping[str, Any], grid: GridSpec, n_tasks: int) -> AdaptiveSpec | None:
    """``[adaptive]``, or ``None`` without the table; checked against the grid it allocates seeds to."""
    if "adaptive" not in raw:
        return None
    table = p.table(raw, "adaptive")
    p.keys(table, "adaptive.", set(AdaptiveSpec.__dataclass_fields__))
    d = AdaptiveSpec(margin=0.0)
    margin = p.number(p.required(table, "margin", "adaptive."), "adaptive.margin", positive=True)
    alpha = p.number(table.get("alpha", d.alpha), "adaptive.alpha", positive=True)
    if alpha >= 0.5:
        raise p.fail(f"`adaptive.alpha` must be < 0.5 (a one-sided level), but got alpha={alpha}")
    min_seeds = p.integer(table.get("min_seeds", d.min_seeds), "adaptive.min_seeds", low=2)
    max_seeds = p.integer(table.get("max_seeds", d.max_seeds), "adaptive.max_seeds", low=2)
    if max_seeds < min_seeds:
        raise p.fail(f"`adaptive.max_seeds` must be >= `adaptive.min_seeds`, but got {max_seeds} < {min_seeds}")
    budget, screen = table.get("budget"), table.get("futility_seeds")
    if screen is not None:
        screen = p.integer(screen, "adaptive.futility_seeds", low=2)
        if screen >= min_seeds:
            raise p.fail(f"`adaptive.futility_seeds` must be < `adaptive.min_seeds` (a futility-only look before the "
                         f"first test), but got {screen} >= {min_seeds}")  # fmt: skip
    spec = AdaptiveSpec(
        margin=margin,
        alpha=alpha,
        min_seeds=min_seeds,
        max_seeds=max_seeds,
        seeds_per_round=p.integer(table.get("seeds_per_round", d.seeds_per_round), "adaptive.seeds_per_round", low=1),
        budget=None if budget is None else p.integer(budget, "adaptive.budget", low=1),
        spending=_spending(p, table.get("spending", d.spending)),
        futility=_futility(p, table.get("futility")),
        seek=p.choice(table.get("seek", d.seek), "adaptive.seek", SEEK),
        futility_seeds=screen,
        futility_power=p.choice(
            table.get("futility_power", d.futility_power), "adaptive.futility_power", FUTILITY_POWER
        ),
        futility_failures=p.choice(
            table.get("futility_failures", d.futility_failures), "adaptive.futility_failures", FUTILITY_FAILURES
        ),
    )
    if spec.futility is None and "futility_power" in table:
        raise p.fail("`adaptive.futility_power` needs `adaptive.futility` (the power below which a cell stops)")
    _check_grid(p, spec, grid, raw, n_tasks)
    return spec


def _spending(p: _Parser, raw: Any) -> str:
    """``adaptive.spending``: a name :func:`spending_gamma` reads."""
    try:
        spending_gamma(raw)
    except ValueError as error:
        raise p.fail(f"`adaptive.spending` {error}") from None
    return raw


def _futility(p: _Parser, raw: Any) -> float | None:
    """``adaptive.futility``: a conditional power in (0, 0.5), or absent (the lenient one-SE stop)."""
    if raw is None:
        return None
    value = p.number(raw, "adaptive.futility")
    if not 0 < value < 0.5:
        raise p.fail(f"`adaptive.futility` (a conditional power) must be in (0, 0.5), but got {value}")
    return value


def _check_grid(p: _Parser, spec: AdaptiveSpec, grid: GridSpec, raw: Mapping[str, Any], n_tasks: int) -> None:
    """What an adaptive study can be combined with (one run per cell and seed, against frozen 0), and its budget."""
    if len(grid.seeds) > spec.max_seeds:
        raise p.fail(
            f"`grid.seeds` lists {len(grid.seeds)} seeds but `adaptive.max_seeds` is {spec.max_seeds}: a cell draws "
            "its seeds from the list in order, so list at most max_seeds (the rest follow the largest)"
        )
    unsupported = [
        ("arms" in raw, "[[arms]]"),
        ("groups" in raw, "`groups`"),
        (grid.order_seeds is not None, "`grid.order_seeds`"),
        (grid.subset_draws != 1, "`grid.subset_draws` > 1"),
        (grid.subsets != "shared", "`grid.subsets = 'per_seed'`"),
        (grid.pair_encoding != ("cross",), "`grid.pair_encoding` other than ['cross']"),
        (p.table(raw, "lr_search").get("mode", "none") != "none", "a learning-rate search (`lr_search.mode`)"),
    ]
    for present, what in unsupported:
        if present:
            raise p.fail(f"[adaptive] cannot be combined with {what} yet: an adaptive study runs one freeze grid")
    if 0 not in grid.frozen_layers:
        raise p.fail("[adaptive] needs 0 in `grid.frozen_layers`: every depth is compared with the full model")
    if len(grid.frozen_layers) < 2:
        raise p.fail("[adaptive] needs a depth other than 0 in `grid.frozen_layers`: there is nothing to compare")
    first_round = n_tasks * len(grid.train_sizes) * len(grid.frozen_layers) * spec.first_seeds
    if spec.budget is not None and spec.budget < first_round:
        raise p.fail(
            f"`adaptive.budget` must cover the first round ({first_round} runs: {spec.first_seeds} seeds for each "
            f"of {first_round // spec.first_seeds} cells), but got budget={spec.budget}"
        )

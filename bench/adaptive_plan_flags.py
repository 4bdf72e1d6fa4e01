"""The ``[adaptive]`` plan's command-line flags, shared by the adaptive benches.

``adaptive_seeds.py`` (simulated studies) and ``adaptive_replay.py`` (a stored example) each name a plan on the
command line; the flags, their help and the check of the spending function live here once, so that a plan
spelled the same way in both benches is the same plan.
"""

from __future__ import annotations

import argparse
from typing import Any

from freezestats.exceptions import ModelFitError
from freezestats.spec.adaptive import FUTILITY_FAILURES, FUTILITY_POWER, SEEK
from freezestats.stats.sequential.spending import SPENDING_FUNCTIONS, check_spending

#: The SequentialPlan fields these flags set (the margin is each bench's own: its default differs).
PLAN_FIELDS = (
    "min_seeds", "max_seeds", "seeds_per_round", "futility", "seek", "futility_seeds", "futility_power",
    "futility_failures", "spending",
)  # fmt: skip


def add_plan_flags(
    parser: argparse.ArgumentParser, *, min_seeds: int, max_seeds: int, seeds_per_round: int,
    futility: float | None = None, seek: str = "either", futility_seeds: int | None = None,
) -> None:  # fmt: skip
    """Add the plan's flags to ``parser``, with the bench's own defaults for the seeds and the futility stop."""
    first, most = f"seeds at the first test (default {min_seeds})", f"the most seeds a cell (default {max_seeds})"
    parser.add_argument("--min-seeds", type=int, default=min_seeds, help=first)
    parser.add_argument("--max-seeds", type=int, default=max_seeds, help=most)
    per_round = f"seeds added to each open cell per round (default {seeds_per_round})"
    parser.add_argument("--seeds-per-round", type=int, default=seeds_per_round, help=per_round)
    stop = "the one-SE rule" if futility is None else futility
    text = f"stop a cell whose conditional (or predictive) power is below this (default: {stop})"
    parser.add_argument("--futility", type=float, default=futility, help=text)
    text = f"what the futility stop keeps a cell open for: either decision or noninferiority only (default {seek})"
    parser.add_argument("--seek", default=seek, choices=SEEK, help=text)
    text = f"a futility-only look at this many seeds, before --min-seeds (default: {futility_seeds or 'none'})"
    parser.add_argument("--futility-seeds", type=int, default=futility_seeds, help=text)
    power = "which power --futility bounds: conditional (default) or predictive"
    parser.add_argument("--futility-power", default="conditional", choices=FUTILITY_POWER, help=power)
    held = "whether the futility stop projects the failure part to shrink with more seeds (default) or to hold"
    parser.add_argument("--futility-failures", default="shrink", choices=FUTILITY_FAILURES, help=held)
    spending = "how alpha is spent over the looks (default obrien_fleming)"
    parser.add_argument("--spending", default="obrien_fleming", metavar="|".join(SPENDING_FUNCTIONS), help=spending)


def plan_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Any]:
    """The plan's fields from parsed flags; a spending function the package does not know ends the bench with
    the parser's one-line error (exit 2)."""
    try:
        check_spending(args.spending)
    except ModelFitError as error:
        parser.error(str(error))
    return {name: getattr(args, name) for name in PLAN_FIELDS}

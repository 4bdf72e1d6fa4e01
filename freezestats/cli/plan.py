"""The ``plan`` command: what a pilot's runs say each depth needs to decide, in seeds, items and CPU hours."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from freezestats.cli.base import _Command, _storage_arg
from freezestats.exceptions import SpecError

if TYPE_CHECKING:
    from freezestats.analysis.plan import DepthPlan

__all__ = ["_Plan"]


class _Plan(_Command):
    name = "plan"
    help = "from a pilot's runs: the seeds and scored items each depth needs to decide, with their cost"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        _storage_arg(parser, study_name=True)
        parser.add_argument("--margin", type=float, default=1.0, help="the margin in points (default 1)")
        parser.add_argument("--power", type=float, default=0.8, help="the power to plan for (default 0.8)")

    def take_action(self, args: argparse.Namespace) -> int:
        from freezestats.analysis.plan import plan_study
        from freezestats.results.item_predictions import study_artifacts

        if not args.margin > 0:
            raise SpecError(f"`--margin` must be > 0 points, but got {args.margin}.")
        if not 0 < args.power < 1:
            raise SpecError(f"`--power` must be between 0 and 1, but got {args.power}.")
        study, folder = study_artifacts(args.storage, args.study_name)
        for plan in plan_study(study, folder, args.margin, args.power):
            print(f"{plan.task}: scored on {plan.items} items ({plan.population}); margin {plan.margin:g} points, "
                  f"power {plan.target:.0%} if the true cost is 0. Pairs with a collapsed run set aside.")  # fmt: skip
            print(f"  {'n':>5} {'depth':>5} {'pairs':>7} {'cost [95% CI]':>22} {'SD seed':>7} {'SD item':>7} "
                  f"{'seeds @ items':>14} {'seeds @ 436':>11} {'run s':>6} {'CPU h':>6}")  # fmt: skip
            for row in plan.depths:
                print("  " + _row(row))
        return 0


def _row(row: DepthPlan) -> str:
    head = f"{row.train_size:>5} {row.depth:>5} "
    if row.cost is None:
        return head + f"{'<3/' + str(row.seeds_run):>7}  too few pairs in which both runs trained to estimate"
    c = row.cost
    cost = f"{c.estimate:+.2f} [{c.ci_low:+.2f}, {c.ci_high:+.2f}]"
    need = row.at_study_items
    seeds = f"{need.seeds}" if need else ">200"
    dev = f"{row.at_dev_items.seeds}" if row.at_dev_items else ">200"
    hours = f"{need.seeds * row.run_seconds * 2 / 3600:.1f}" if need else "-"  # both runs of each pair
    return (head + f"{c.pairs:>3}/{row.seeds_run:<3} {cost:>22} {c.parts.seed ** 0.5:7.2f} {c.parts.item ** 0.5:7.2f} "
            f"{seeds:>14} {dev:>11} {row.run_seconds:6.0f} {hours:>6}")  # fmt: skip

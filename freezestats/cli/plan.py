"""The ``plan`` command: what each depth needs to decide, in seeds, items and CPU hours.

``freezestats plan SPEC`` prices a spec before any run, from the bundled prior (:mod:`freezestats.analysis.spec_plan`);
``freezestats plan --storage URL`` prices it from a pilot's own runs (:mod:`freezestats.analysis.plan`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from freezestats.cli.base import _Command, _storage_arg
from freezestats.exceptions import SpecError

if TYPE_CHECKING:
    from freezestats.analysis.plan import DepthPlan
    from freezestats.analysis.spec_plan import PlannedDepth

__all__ = ["_Plan"]


class _Plan(_Command):
    name = "plan"
    help = "the seeds and scored items each depth needs to decide, with their cost: for a spec, or from a pilot"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("study", nargs="?", help="a spec file or shipped study to price before it runs")
        parser.add_argument("--data-dir", help="with a spec: local data folder (else $FREEZESTATS_DATA, then the hub)")
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
        if args.study is not None:
            return _plan_spec(args)
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


def spec_plan_lines(prepared: object, margin: float = 1.0, target: float = 0.8) -> list[str]:
    """What ``plan SPEC`` prints for a prepared study (``validate`` prints its warnings too)."""
    from freezestats.analysis.spec_plan import plan_spec, plan_warnings, read_prior

    spec, tasks = prepared.spec, prepared.tasks  # type: ignore[attr-defined]
    items = prepared.scored_items()  # type: ignore[attr-defined]
    plan = plan_spec(spec, items, margin, target)
    prior = read_prior().iloc[0]
    lines = []
    for task in spec.tasks:
        where = "evaluation pool" if tasks[task].pool is not None else "validation set's score half"
        lines.append(f"{task}: {len(spec.grid.seeds)} seeds, scored on {items[task]:,} items ({where}); variance from "
                     f"{prior['source']} ({prior['task']} {prior['metric']}); margin {margin:g} point(s), power "
                     f"{target:.0%} if the true cost is 0.")  # fmt: skip
        lines.append(f"  {'n':>5} {'depth':>5} {'prior':<26} {'SD seed [80% up]':>16} {'power':>5} "
                     f"{'seeds needed [SD up]':>20} {'items needed':>12} {'run s':>6}")  # fmt: skip
        lines.extend("  " + _spec_row(row) for row in plan if row.task == task)
    training = spec.training
    looks = int(training.epochs / training.eval_every_epochs)
    lines.append(f"Evaluation schedule: every {training.eval_every_epochs:g} epoch(s), {looks} looks a run on the "
                 "validation set (each choosing the checkpoint), then the pool once; fewer looks shorten small-n "
                 "runs most.")  # fmt: skip
    runs = prepared.n_cells()  # type: ignore[attr-defined]
    hours = sum(r.run_seconds for r in plan) * len(spec.grid.seeds) / 3600
    lines.append(f"{runs} runs; the frozen depths' runs take about {hours:.1f} CPU hours at the prior's speed "
                 f"({prior['device']}, {prior['precision']}); no GPU timing is in the prior.")  # fmt: skip
    return lines + plan_warnings(plan, target)


def _spec_row(row: PlannedDepth) -> str:
    sd = f"{row.parts.seed**0.5:.2f} [{row.seed_sd_high:.2f}]"
    power = f"{row.at_spec.power:.2f}" if row.at_spec else "-"
    need = f"{row.needs.seeds if row.needs else '>200'} [{row.needs_high.seeds if row.needs_high else '>200'}]"
    items = f"{row.items_needed:,}" if row.items_needed else "no number"
    return (f"{row.train_size:>5} {row.depth:>5} {row.prior:<26} {sd:>16} {power:>5} {need:>20} {items:>12} "
            f"{row.run_seconds:6.0f}")  # fmt: skip


def _plan_spec(args: argparse.Namespace) -> int:
    from freezestats.cli.study import _resolve_study
    from freezestats.runner._prepare import prepare_study
    from freezestats.spec.study import load_spec

    prepared = prepare_study(load_spec(_resolve_study(args.study)), args.data_dir)
    print("\n".join(spec_plan_lines(prepared, args.margin, args.power)))
    return 0

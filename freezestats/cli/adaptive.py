"""The adaptive side of ``run`` and ``status``: a spec with ``[adaptive]`` runs in rounds, and ``status`` shows each
cell's decision and the seeds it used.

Kept apart from :mod:`freezestats.cli.study` so that the study commands stay a page each; like them it parses and
prints only: the round loop is :func:`freezestats.runner.adaptive.run_adaptive`, the decisions
:mod:`freezestats.analysis.adaptive`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from freezestats.exceptions import SpecError

if TYPE_CHECKING:
    import optuna

    from freezestats.runner import RunReport
    from freezestats.runner._layout import WorkerLayout
    from freezestats.runner.adaptive import AdaptiveRun
    from freezestats.spec.study import StudySpec

__all__ = ["adaptive_note", "check_adaptive_flags", "print_adaptive_status", "run_adaptively"]

_STOPPED = {
    "decided": "every comparison is decided",
    "exhausted": "the open comparisons have no seed left to run (max_seeds, or failed runs)",
    "budget": "the next round would spend more runs than `adaptive.budget`",
    "max_trials": "--max-trials was reached; run again to go on",
    "interrupted": "interrupted",
    "enqueued": "the next round is enqueued: start workers, then run this again to take the next decision",
}


def check_adaptive_flags(args: argparse.Namespace, spec: StudySpec) -> bool:
    """Whether ``run`` runs ``spec`` adaptively: with an ``[adaptive]`` table it does (``--adaptive`` only says so
    explicitly); ``--adaptive`` without one, or an adaptive spec with ``--extend`` or ``--fuse``, is refused before
    anything is written."""
    if args.adaptive and spec.adaptive is None:
        raise SpecError(
            f"`--adaptive` needs an [adaptive] table in the spec (margin = ..., see docs/reference.md), {spec.source}."
        )
    if spec.adaptive is not None and args.extend:
        raise SpecError("`--extend` is not supported for an adaptive study: its seeds are the round loop's to add.")
    if spec.adaptive is not None and getattr(args, "fuse", "off") != "off":
        # the round loop's own drain does not fuse yet; refused rather than silently ignored
        raise SpecError("`--fuse` is not supported for an adaptive study yet: run it with `--fuse off` (the default).")
    return spec.adaptive is not None


def run_adaptively(
    args: argparse.Namespace, spec: StudySpec, layout: WorkerLayout, devices: Sequence[str] | None
) -> RunReport | None:
    """``run`` of a spec with ``[adaptive]``: rounds until each depth is decided; prints the rounds and the stop.

    Returns the run's report for ``run``'s closing lines, or ``None`` with ``--enqueue-only`` (nothing ran).
    """
    from freezestats.analysis.adaptive import decide_round
    from freezestats.runner.adaptive import run_adaptive
    from freezestats.stats.sequential import SequentialPlan

    plan = spec.adaptive
    if plan is None:
        raise SpecError(f"Study '{spec.name}' has no [adaptive] table ({spec.source}).")
    budget = "no budget" if plan.budget is None else f"budget {plan.budget} runs"
    stop = SequentialPlan(**plan.plan_kwargs()).futility_rule()
    print(
        f"Adaptive: margin {plan.margin:g}, alpha {plan.alpha:g} ({plan.spending}), {plan.min_seeds}..{plan.max_seeds} "
        f"seeds per cell, {plan.seeds_per_round} per round, {budget}; {stop}."
    )
    result = run_adaptive(
        spec,
        args.storage,
        decide_round,
        data_dir=args.data_dir,
        artifact_dir=args.artifacts,
        max_trials=args.max_trials,
        show_progress=not args.no_progress,
        enqueue_only=args.enqueue_only,
        workers=layout.workers,
        devices=devices,
        auto_workers=layout.auto,
    )
    _print_rounds(result)
    return None if args.enqueue_only else result.report


def _print_rounds(result: AdaptiveRun) -> None:
    for entry in result.log[-result.rounds :] if result.rounds else []:
        counts = "" if "open" not in entry else f" after {entry['decided']} decided, {entry['open']} open"
        print(f"Round {entry['round']}: enqueued {entry['enqueued']} runs ({entry['runs']} in all){counts}.")
    print(f"Stopped: {_STOPPED.get(result.stopped, result.stopped)} ({result.runs_used} runs used).")


def print_adaptive_status(console: Any, study: optuna.Study) -> None:
    """``status`` of an adaptive study: per (task, size, depth) the decision and the seeds used, and the rounds."""
    from rich.table import Table

    from freezestats.analysis.adaptive import cell_seeds
    from freezestats.runner.adaptive import ADAPTIVE_ATTR
    from freezestats.spec.study import StudySpec
    from freezestats.study.trials import SPEC_ATTR

    spec = StudySpec.from_stored(study.user_attrs[SPEC_ATTR], source=f"study '{study.study_name}'")
    log = study.user_attrs.get(ADAPTIVE_ATTR) or {}
    stopped = log.get("stopped") or "not stopped yet"
    console.print(f"Adaptive: {len(log.get('rounds', []))} rounds enqueued; {_STOPPED.get(stopped, stopped)}.")
    table = Table("task", "train_size", "frozen", "seeds", "decision", "estimate", "lower", title="decisions per cell")
    for row in cell_seeds(study, spec).itertuples(index=False):
        estimate = "" if row.estimate != row.estimate or row.estimate is None else f"{row.estimate:+.4f}"
        lower = "" if row.lower != row.lower or row.lower is None else f"{row.lower:+.4f}"
        table.add_row(
            row.task, str(row.train_size), str(row.frozen_layers), str(row.seeds), row.decision, estimate, lower
        )
    console.print(table)


def adaptive_note(log: dict[str, Any]) -> str:
    """What ``analyze`` says of an adaptive study: its runs were allocated by the sequential test, which the
    fixed-design tables do not account for; where its own decisions are."""
    stopped = _STOPPED.get(log.get("stopped") or "", "it had not stopped")
    return (
        f"this study ran adaptively ([adaptive], {len(log.get('rounds', []))} rounds; {stopped}): its cells hold "
        "different numbers of seeds, chosen by the sequential test, and these fixed-design tables do not account "
        "for that optional stopping; the sequential decisions are in `freezestats status` and the report's "
        "'How the seeds were spent'"
    )

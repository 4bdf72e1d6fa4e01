"""The ``analyze`` and ``report`` commands: the two that read a study's runs and fit the statistical models.

Kept apart from :mod:`freezestats.cli.main`, whose other commands create, run and list a study, because these two
share their own arguments (:func:`_source_args`: a study database *or* an exported table, the model, the
response) and the analysis options, which make up most of their code. Every command, these two included, is
still listed in one place: ``_COMMANDS`` in :mod:`freezestats.cli.main`.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from freezestats.cli.base import _Command
from freezestats.exceptions import ModelFitError

__all__ = ["_Analyze", "_Report"]


def _source_args(parser: argparse.ArgumentParser) -> None:
    """Where the runs come from (a study database or an exported table) and the model to fit: analyze, report."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--storage", help="Optuna storage URL of the study (default sqlite:///freezestats.db)")
    source.add_argument("--results", help="a table written by `freezestats export` (.parquet or .csv)")
    parser.add_argument("--study-name", help="needed when the storage holds several studies")
    parser.add_argument(
        "--predictions",
        help="per-item predictions (`freezestats export --predictions`) for item uncertainty; read from the study's "
        "artifacts with --storage",
    )
    parser.add_argument("--model", default="mixed", help="mixed (default), glmm or ols")
    parser.add_argument(
        "--metric",
        default=None,
        help="response: heldout (default, no selection bias), final_dev, best_dev (the blog's, biased upward)",
    )
    parser.add_argument(
        "--task-metric",
        action="append",
        metavar="TASK=METRIC",
        help="judge TASK on METRIC (e.g. cola=mcc), re-scored from the runs' predictions; such a task is analysed "
        "at its last checkpoint unless --metric is given (repeatable)",
    )
    parser.add_argument(
        "--uncertainty",
        default="task",
        help="what the answer's intervals let vary: task (default: seeds and evaluation items, i.e. new examples "
        "of the task; needs the runs' predictions) or seeds (the model's answer for this evaluation set)",
    )
    parser.add_argument(
        "--failure-rates",
        default=None,  # the library's DEFAULT_FAILURE_RATES (_analysis_options): not imported to build the parser
        help="the answer's failure part, where some runs failed: pooled_joint (default: the two depths' failure rates "
        "drawn jointly from a binomial GLMM of the pair, its cell SD integrated out), pooled (the same GLMM's "
        "Wilson intervals joined by MOVER: above 95%% coverage in simulation) or slope (Firth's depth x log2-size fit)",
    )
    parser.add_argument(
        "--variance",
        default="per_size",
        help="mixed model's residual variance: per_size (default), per_cell or pooled (one for all runs)",
    )


class _Analyze(_Command):
    name = "analyze"
    help = "fit the statistical models of a study and write tidy tables + analysis.json"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        _source_args(parser)
        parser.add_argument("--task", action="append", help="analyse only this task (repeatable)")
        parser.add_argument("--reference", type=int, default=0, help="frozen level to compare with (default 0)")
        parser.add_argument(
            "--margin", type=float, help="non-inferiority/TOST margin (default: 0.01 accuracy/F1, 0.02 MCC/Pearson)"
        )
        parser.add_argument("--adjust", default="holm", help="holm (default), dunnett, bonferroni or none")
        parser.add_argument(
            "--adjust-across",
            default="none",
            help="family of the non-inferiority answer: none (each train size, default) or sizes (Bonferroni)",
        )
        parser.add_argument("--delta", type=float, help="difference for the power analysis (default: margin or 0.02)")
        parser.add_argument("--n-boot", type=int, default=2000, help="bootstrap replicates (default 2000)")
        parser.add_argument("--pooled", action="store_true", help="also fit all tasks in one model with a task term")
        parser.add_argument(
            "--bootstrap-tests",
            type=int,
            default=0,
            metavar="N",
            help="also a parametric-bootstrap LRT of the frozen x size interaction with N draws (slow; progress bar)",
        )
        parser.add_argument("-o", "--output", default="analysis", help="output folder (default ./analysis)")
        parser.add_argument("--json", action="store_true", help="print analysis.json instead of the summary")

    def take_action(self, args: argparse.Namespace) -> int:
        from freezestats.analysis.pipeline import analyze, load_results, load_study_record
        from freezestats.analysis.result import write_analysis
        from freezestats.analysis.summary import summary_lines
        from freezestats.results.item_predictions import load_item_table, load_pool_table

        storage = args.storage
        if storage is None and args.results is None:
            from freezestats.study.storage import DEFAULT_STORAGE

            storage = DEFAULT_STORAGE
        table = load_results(storage, args.results, args.study_name)
        items, why_not = load_item_table(storage, args.predictions, args.study_name, runs=table)
        pool = load_pool_table(storage, args.predictions, args.study_name, runs=table) if items is not None else None
        if args.bootstrap_tests < 0:
            raise ModelFitError(f"`--bootstrap-tests` must be >= 0, but got {args.bootstrap_tests}.")
        with _bootstrap_progress(args.bootstrap_tests) as progress:
            analysis = _run_analyze(analyze, table, args, progress, items, pool)
        if why_not:
            analysis.warnings.append(why_not)
        study = load_study_record(storage, args.study_name) if storage is not None else None
        if study is not None and study.get("adaptive"):
            from freezestats.cli.adaptive import adaptive_note

            analysis.warnings.append(adaptive_note(study["adaptive"]))
        path = write_analysis(analysis, args.output, results=table, study=study)
        if args.json:
            print(path.read_text())
        else:
            print("\n".join(summary_lines(analysis)))
            print(f"Tables and analysis.json in {args.output}/")
        return 0


def _run_analyze(
    analyze: Callable[..., Any],
    table: Any,
    args: argparse.Namespace,
    progress: Any,
    items: Any = None,
    pool: Any = None,
) -> Any:
    return analyze(
        table,
        model=args.model,
        response=args.metric,
        variance=args.variance,
        tasks=args.task,
        reference=args.reference,
        margin=args.margin,
        adjust=args.adjust,
        adjust_across=args.adjust_across,
        delta=args.delta,
        n_boot=args.n_boot,
        pooled=args.pooled,
        bootstrap_tests=args.bootstrap_tests,
        progress=progress,
        items=items,
        uncertainty=args.uncertainty,
        **({"pool": pool[0], "populations": pool[1]} if pool else {}),
        **_analysis_options(args),
    )


def _analysis_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options analyze and report share whose parsing needs the statistics: imported here, when a command
    runs, so that building the parser (every command, ``run`` and ``worker`` included) does not import
    ``freezestats.stats`` and scipy.stats (~2 s a process)."""
    from freezestats.analysis.task_metrics import parse_task_metrics
    from freezestats.stats.items.task_two_part import DEFAULT_FAILURE_RATES

    return {
        "failure_rates": DEFAULT_FAILURE_RATES if args.failure_rates is None else args.failure_rates,
        "task_metrics": parse_task_metrics(args.task_metric),
    }


@contextlib.contextmanager
def _bootstrap_progress(n_boot: int) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar fed by the bootstrap test's ``progress(done, total)``; nothing when there is none."""
    if n_boot <= 0:
        yield None
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task("bootstrap LRT of the interaction", total=n_boot)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


class _Report(_Command):
    name = "report"
    help = "build the study's report: report.qmd with figures and tables, rendered to HTML and PDF"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        _source_args(parser)
        parser.add_argument("--analysis", help="a folder written by `freezestats analyze` (skips the analysis)")
        parser.add_argument("-o", "--output", default="report", help="output folder (default ./report)")
        parser.add_argument("--format", default="html,pdf", help="html, pdf or html,pdf (default)")
        parser.add_argument("--overwrite", action="store_true", help="replace the report in an existing folder")
        parser.add_argument("--margin", type=float, help="when analysing: equivalence margin for TOST, e.g. 0.01")
        parser.add_argument("--n-boot", type=int, default=2000, help="when analysing: bootstrap replicates")
        parser.add_argument("--no-progress", action="store_true", help="no progress bars")

    def take_action(self, args: argparse.Namespace) -> int:
        from rich.console import Console

        from freezestats.report import build_report

        console = Console()
        result = build_report(
            args.output,
            storage=args.storage,
            results=args.results,
            predictions=args.predictions,
            analysis_dir=args.analysis,
            study_name=args.study_name,
            model=args.model,
            metric=args.metric,
            variance=args.variance,
            margin=args.margin,
            n_boot=args.n_boot,
            uncertainty=args.uncertainty,
            **_analysis_options(args),
            formats=args.format,
            overwrite=args.overwrite,
            console=console,
            show_progress=not args.no_progress,
        )
        console.print(f"Rendered with {result.renderer}.", highlight=False)
        console.print("Took " + ", ".join(f"{k} {v:.1f} s" for k, v in result.timings.items()) + ".", highlight=False)
        console.print(
            f"Wrote {result.qmd} ({result.n_figures} figures, {result.n_tables} tables)"
            + "".join(f", {path}" for path in result.outputs.values())
            + ".",
            highlight=False,
        )
        return 0

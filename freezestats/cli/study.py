"""The study commands: ``init``, ``validate``, ``run``, ``worker``, ``status`` and ``export`` (write, run and list a
study).

Argument parsing and printing only: each ``take_action`` calls one library function (imported inside it, so that
``--help`` stays fast) and prints what it returned.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from freezestats import __version__
from freezestats.cli.base import _Command, _resolve_study, _storage_arg
from freezestats.exceptions import SpecError

if TYPE_CHECKING:
    from freezestats.runner import RunReport
    from freezestats.tasks.taskdata import TaskData

__all__ = ["_Export", "_Init", "_Run", "_Status", "_Validate", "_Worker"]


class _Init(_Command):
    name = "init"
    help = "read your labelled data (CSV, TSV, JSONL, Parquet) and write a ready, commented study spec for it"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--train", required=True, help="the training file (.csv, .tsv, .jsonl or .parquet)")
        parser.add_argument("--validation", help="the validation file (default: carved from train, stratified)")
        parser.add_argument("--text", required=True, help="the text column")
        parser.add_argument("--text-pair", help="a second text column, for a sentence-pair task")
        parser.add_argument("--label", required=True, help="the label column: class names or ints, or a number")
        parser.add_argument("--model", default="minilm-l6", help="HF id, local path or minilm-l6 (default)")
        parser.add_argument("-o", "--output", default="spec.toml", help="the spec to write (default spec.toml)")
        parser.add_argument("--name", help="the study's and task's name (default: from the train file's name)")
        parser.add_argument("--kind", choices=("binary", "multiclass", "regression"), help="default: from the labels")
        parser.add_argument("--id-column", help="a column of row ids, kept with every per-item prediction")

    def take_action(self, args: argparse.Namespace) -> int:
        from pathlib import Path

        from freezestats.encoder.backbone import n_layers_of
        from freezestats.spec.init import InitRequest, describe_data, write_init_spec

        request = InitRequest(
            train=Path(args.train),
            text=args.text,
            label=args.label,
            output=Path(args.output),
            validation=Path(args.validation) if args.validation else None,
            text_pair=args.text_pair,
            model=args.model,
            name=args.name,
            kind=args.kind,
            id_column=args.id_column,
        )
        if Path(args.output).exists():  # before the model and the data are read
            raise SpecError(f"{args.output} already exists; choose another -o, or remove it first.")
        result = write_init_spec(request, n_layers_of(args.model))
        print(f"Wrote {args.output}: study '{result.name}', {result.n_runs} runs.")
        for line in describe_data(result.data):
            print(f"  {line}")
        storage = f"sqlite:///{result.name}.db"
        _init_plan_warnings(Path(args.output))
        print("Next:")
        print(f"  freezestats plan {args.output}   # the seeds and pool items each depth needs to decide")
        print(f"  freezestats validate {args.output} --list-cells")
        print(f"  freezestats run --study {args.output} --storage {storage}")
        print(f"  freezestats report --storage {storage} -o {result.name}-report/")
        return 0


def _init_plan_warnings(spec_path: Path) -> None:
    """The plan's warnings for a spec ``init`` wrote (its pool is the scored items), one line each."""
    from freezestats.analysis.spec_plan import plan_spec, plan_warnings
    from freezestats.spec.study import load_spec

    spec = load_spec(spec_path)
    if spec.evaluation is not None:
        for line in plan_warnings(plan_spec(spec, {task: spec.evaluation.pool for task in spec.tasks})):
            print(f"  {line}")


class _Validate(_Command):
    name = "validate"
    help = "check a study spec, its model and its data without training anything; list the cells"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("study", nargs="?", help="spec file or shipped study name (default: quick)")
        parser.add_argument("--data-dir", help="local data folder (else $FREEZESTATS_DATA, then the HF hub)")
        parser.add_argument("--list-cells", action="store_true", help="print every cell")

    def take_action(self, args: argparse.Namespace) -> int:
        from freezestats.runner._prepare import prepare_study
        from freezestats.spec.study import load_spec

        spec = load_spec(_resolve_study(args.study))
        prepared = prepare_study(spec, args.data_dir)
        search, grid = prepared.cells()
        print(f"Study '{spec.name}' is valid ({spec.source}; spec hash {spec.spec_hash[:12]}).")
        if spec.has_arms:
            arms = ", ".join(f"{v.name} {v.levels}" for v in spec.arm_variants())
            print(f"  model {spec.model.name} (L={prepared.n_layers}), arms {arms}")
        else:
            print(f"  model {spec.model.name} (L={prepared.n_layers}), freezing {spec.model.freezing}")
        for name, task in prepared.tasks.items():
            print(_task_line(name, task.data, spec.metric_for(name)))
        for group in spec.groups:
            freeze_for = group.freeze_for if group.freeze_for == "all" else ", ".join(group.freeze_for)
            print(
                f"  group {group.name}: shared encoder for {', '.join(group.tasks)}; "
                f"sampling {group.sampling}, frozen layers frozen for {freeze_for}"
            )
        if "bi" in spec.grid.pair_encoding:
            levels = spec.grid.bi_frozen_layers
            where = "every frozen level" if levels is None else f"frozen {', '.join(map(str, levels))}"
            pairs = [name for name, task in prepared.tasks.items() if task.data.task.is_pair]
            print(f"  pair encoding {', '.join(spec.grid.pair_encoding)} for {', '.join(pairs)} (bi at {where})")
        if spec.adaptive is not None:  # the grid's size is the rounds' to decide
            plan, n = spec.adaptive, len(grid) // len(spec.grid.seeds)
            seeds = ", ".join(map(str, plan.seed_ladder(spec.grid.seeds)))
            print(
                f"  adaptive: {n} cells x {plan.first_seeds}..{plan.max_seeds} seeds = {n * plan.first_seeds}.."
                f"{n * plan.max_seeds} trials, in rounds (seeds in order: {seeds})"
            )
        else:
            print(
                f"  {prepared.n_cells()} trials: {len(search)} learning-rate search, "
                f"{prepared.n_cells() - len(search)} grid"
            )
        if spec.evaluation is not None or len(spec.grid.seeds) >= 3:  # the answer's design: what it can decide
            from freezestats.analysis.spec_plan import plan_spec, plan_warnings

            for line in plan_warnings(plan_spec(spec, prepared.scored_items())):
                print("  " + line)
            print(f"  `freezestats plan {args.study or 'quick'}` prices the seeds and items each depth needs.")
        if args.list_cells:
            for cell in [*search, *grid]:
                print(f"  {cell.key}  " + ("no lr" if cell.learning_rate is None else f"lr={cell.learning_rate:g}"))
        return 0


def _task_line(name: str, data: TaskData, metric: str) -> str:
    """What ``validate`` says of a task; a user task's kind, label map, carve and test split too."""
    origin = data.origin
    if origin is None:
        return (
            f"  task {name}: {len(data.train)} train / {len(data.validation)} validation from {data.source}; "
            f"metric {metric}"
        )
    task = data.task
    labels = ", ".join(f"{label}={code}" for code, label in enumerate(task.label_names or ()))
    kind = f"{task.kind_name}" + (f", labels {labels}" if labels else "")
    validation = f"{len(data.validation)} validation"
    if origin.carved is not None and task.source is not None:
        validation += (
            f" carved from train ({task.source.validation_fraction:.0%} of {origin.n_train_file} rows, stratified, "
            f"seed {task.source.carve_seed})"
        )
    test = "" if origin.n_test is None else f"; test {origin.n_test} rows kept aside (never scored)"
    return (
        f"  task {name} ({kind}): {len(data.train)} train / {validation} from {data.source}{test}; metric {metric} "
        f"of {', '.join(task.metrics)}"
    )


_FUSE_HELP = (
    "off (default), auto or K: claim up to K runs of a cell that differ only in their seed and train them fused "
    "(auto: every waiting seed, up to 8 and up to what fits in half of the device's free memory)"
)
"""``--fuse`` on ``run`` and ``worker``: one text for both."""


class _Run(_Command):
    name = "run"
    help = "run (or resume) a study: every cell of the grid becomes one trial in the study database"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--study", help="spec file or shipped study name (default: quick)")
        _storage_arg(parser)
        parser.add_argument("--data-dir", help="local data folder (else $FREEZESTATS_DATA, then the HF hub)")
        parser.add_argument("--artifacts", help="folder for per-example predictions (default: next to the DB)")
        parser.add_argument("--max-trials", type=int, help="stop after this many trials (resume later)")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")
        parser.add_argument("--enqueue-only", action="store_true", help="create the study and its cells; run nothing")
        parser.add_argument(
            "--workers",
            help="local worker processes, or 'auto' (default, or $FREEZESTATS_WORKERS): one per core on a CPU, up to 4",
        )
        parser.add_argument("--devices", help="comma-separated devices for the workers, e.g. cuda:0,cuda:1")
        parser.add_argument("--extend", action="store_true", help="the spec adds grid values to an existing study")
        parser.add_argument("--fuse", default="off", help=_FUSE_HELP)
        parser.add_argument(
            "--adaptive", action="store_true", help="seeds in rounds until each depth is decided (needs [adaptive])"
        )

    def take_action(self, args: argparse.Namespace) -> int:
        from freezestats.cli.adaptive import check_adaptive_flags, run_adaptively
        from freezestats.runner import run_study
        from freezestats.runner._fused import parse_fuse
        from freezestats.runner._layout import choose_workers, default_workers, parse_workers
        from freezestats.spec.study import load_spec
        from freezestats.training import resolve_device

        if args.max_trials is not None and args.max_trials < 1:
            raise SpecError(f"`--max-trials` must be >= 1, but got {args.max_trials}.")
        fuse = parse_fuse(args.fuse)  # checked before anything is printed or opened
        requested = parse_workers(args.workers) if args.workers is not None else default_workers()
        spec = load_spec(_resolve_study(args.study))
        print(f"freezestats {__version__}: study '{spec.name}' from {spec.source} -> {args.storage}")
        devices = args.devices.split(",") if args.devices else None
        layout = choose_workers(
            requested,
            device_type=resolve_device(spec.training.device).type,
            storage=args.storage,
            devices=devices,
            max_trials=args.max_trials,
        )
        if not args.enqueue_only:
            print(f"Workers: {layout.reason}")
        if check_adaptive_flags(args, spec):  # a spec with [adaptive] runs in rounds
            adaptive = run_adaptively(args, spec, layout, devices)
            return 0 if adaptive is None else _finish(adaptive, args.storage)
        report = run_study(
            spec,
            args.storage,
            data_dir=args.data_dir,
            artifact_dir=args.artifacts,
            max_trials=args.max_trials,
            show_progress=not args.no_progress,
            enqueue_only=args.enqueue_only,
            workers=layout.workers,
            devices=devices,
            extend=args.extend,
            fuse=fuse,
            auto_workers=layout.auto,
        )
        if args.enqueue_only:
            print(
                f"Study '{report.study_name}' is ready: start workers with "
                f"`freezestats worker --storage {args.storage} --study-name {report.study_name}`."
            )
            return 0
        return _finish(report, args.storage)


def _finish(report: RunReport, storage: str) -> int:
    """The closing lines of ``run`` and ``worker``, and their exit status."""
    print(
        f"{report.n_complete}/{report.n_cells} cells complete, {report.n_failed_cells} failed, "
        f"{report.n_run_now} trials run now in {report.wall_seconds:.1f} s."
    )
    if report.n_complete:
        print(
            f"Next: freezestats status --storage {storage}; freezestats export --storage {storage} -o results.parquet"
        )
    if report.interrupted:
        print("Interrupted. Run the same command again to resume; completed cells are kept.", file=sys.stderr)
        return 130
    return 1 if report.n_failed_cells else 0


class _Worker(_Command):
    name = "worker"
    help = "claim and run waiting cells of an existing study (start several, anywhere, on one storage)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        _storage_arg(parser, study_name=True)
        parser.add_argument("--device", help="device for this worker, e.g. cuda:1 (default: the spec's)")
        parser.add_argument("--data-dir", help="local data folder (else $FREEZESTATS_DATA, then the HF hub)")
        parser.add_argument("--artifacts", help="folder for per-example predictions (default: the study's)")
        parser.add_argument("--max-trials", type=int, help="stop after this many trials")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")
        parser.add_argument("--fuse", default="off", help=_FUSE_HELP)

    def take_action(self, args: argparse.Namespace) -> int:
        from freezestats.runner import work_study
        from freezestats.runner._fused import parse_fuse

        report = work_study(
            args.storage,
            args.study_name,
            device=args.device,
            data_dir=args.data_dir,
            artifact_dir=args.artifacts,
            max_trials=args.max_trials,
            show_progress=not args.no_progress,
            fuse=parse_fuse(args.fuse),
        )
        return _finish(report, args.storage)


class _Status(_Command):
    name = "status"
    help = "per-cell progress of a study: done / running / waiting / failed"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        _storage_arg(parser, study_name=True)
        parser.add_argument("--cells", action="store_true", help="list every cell, not only the summary")

    def take_action(self, args: argparse.Namespace) -> int:
        from rich.console import Console
        from rich.table import Table

        from freezestats.results.export import cell_status
        from freezestats.study.storage import open_storage
        from freezestats.study.trials import load_study

        study = load_study(open_storage(args.storage, must_exist=True), args.study_name)
        status = cell_status(study)
        console = Console()
        counts = status["status"].value_counts()
        summary = ", ".join(f"{counts.get(s, 0)} {s}" for s in ("done", "running", "waiting", "failed"))
        console.print(f"Study '{study.study_name}': {len(status)} cells: {summary}")
        by_task = Table("task", "role", "done", "running", "waiting", "failed", title="cells per task")
        for (task, role), group in status.groupby(["task", "role"]):
            c = group["status"].value_counts()
            by_task.add_row(task, role, *(str(c.get(s, 0)) for s in ("done", "running", "waiting", "failed")))
        console.print(by_task)
        shown = status if args.cells else status[status["status"] == "failed"]
        if len(shown):
            table = Table(
                "cell", "status", "attempts", "best_dev", "reason", title="cells" if args.cells else "failed cells"
            )
            for row in shown.itertuples():
                best = "" if row.best_dev is None or row.best_dev != row.best_dev else f"{row.best_dev:.4f}"
                table.add_row(row.cell, row.status, str(row.attempts), best, str(row.fail_reason or ""))
            console.print(table)
        if "adaptive" in study.user_attrs:
            from freezestats.cli.adaptive import print_adaptive_status

            print_adaptive_status(console, study)
        return 0


class _Export(_Command):
    name = "export"
    help = "write the tidy results table (one row per completed trial) to .parquet or .csv"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        _storage_arg(parser, study_name=True)
        parser.add_argument("-o", "--output", required=True, help="results.parquet or results.csv")
        parser.add_argument(
            "--predictions", help="also write every run's per-item predictions (for item uncertainty) to this .parquet"
        )

    def take_action(self, args: argparse.Namespace) -> int:
        from freezestats.results.export import export_results

        table = export_results(args.storage, args.output, args.study_name)
        print(f"Wrote {len(table)} trials x {table.shape[1]} columns to {args.output}.")
        if args.predictions:
            from freezestats.results.item_predictions import export_item_predictions, pool_file

            items = export_item_predictions(args.storage, args.predictions, args.study_name)
            print(f"Wrote {len(items)} item predictions of {items['trial'].nunique()} runs to {args.predictions}.")
            if pool_file(args.predictions).is_file():
                print(f"Wrote the evaluation pool's item predictions to {pool_file(args.predictions)}.")
        return 0

"""The report stage: a study's analysis as a Quarto document, rendered to self-contained HTML and to PDF.

``build_report`` runs the pipeline: gather the inputs (running ``analyze`` when only a study or a results
table is given), write ``report.qmd`` with its figures and tables (:mod:`.document`), and render it
(:mod:`.render`: Quarto when installed, else pandoc + typst). Modules, one job each: ``inputs`` (what the
report is made from), ``figures`` (matplotlib), ``tables`` (markdown tables, the only rounding), ``text``
(prose written from the numbers), ``document`` (fills the template in the top-level ``report/`` folder),
``render``.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from freezestats.analysis.result import write_analysis
from freezestats.exceptions import ReportError
from freezestats.stats.items.task_two_part import DEFAULT_FAILURE_RATES

__all__ = ["ReportResult", "build_report"]

#: What a report writes into its output folder; --overwrite removes only these.
OUTPUTS = (
    "report.qmd",
    "report.html",
    "report.pdf",
    "report.typ",
    "_quarto.yml",
    "report.css",
    "crossref.lua",
    "figures",
    "tables",
    "analysis",
    "report_files",
    ".quarto",
)


@dataclass
class ReportResult:
    """Paths of what was written, the renderer used, and how long each stage took (seconds)."""

    qmd: Path
    outputs: dict[str, Path]
    renderer: str
    n_figures: int
    n_tables: int
    timings: dict[str, float] = field(default_factory=dict)


def _parse_formats(formats: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    from freezestats.report.render import FORMATS

    items = [f.strip().lower() for f in (formats.split(",") if isinstance(formats, str) else formats)]
    items = [f for f in items if f]
    bad = [f for f in items if f not in FORMATS]
    if bad or not items:
        raise ReportError(f"`--format` must be a comma-separated subset of {list(FORMATS)}, but got {formats!r}.")
    return tuple(dict.fromkeys(items))


def _check_output(output: Path, overwrite: bool) -> None:
    """Refuse a file, or a folder that already holds something unless ``overwrite``; touches nothing."""
    if output.exists() and not output.is_dir():
        raise ReportError(f"The output path {output} exists and is not a folder; choose another -o.")
    if output.is_dir() and any(output.iterdir()) and not overwrite:
        raise ReportError(
            f"The output folder {output} already exists and is not empty; pass --overwrite to replace the "
            "report in it, or choose another -o."
        )


def _clear_output(output: Path) -> None:
    """Remove what an earlier report wrote (only :data:`OUTPUTS`; other files of the folder stay)."""
    for name in OUTPUTS:
        target = output / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()


def _stage_progress(console: Console, show: bool) -> Progress:
    """One bar per stage (analysis, figures, each rendering), kept on screen afterwards."""
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        disable=not show,
        transient=False,
    )


def _fresh_output(output: Path, overwrite: bool) -> None:
    """An empty output folder: refused if it holds files and ``overwrite`` is off, emptied if it is on."""
    _check_output(output, overwrite)
    if output.is_dir():
        _clear_output(output)
    output.mkdir(parents=True, exist_ok=True)


def build_report(
    output: str | Path,
    *,
    storage: str | None = None,
    results: str | Path | None = None,
    predictions: str | Path | None = None,
    analysis_dir: str | Path | None = None,
    study_name: str | None = None,
    model: str = "mixed",
    metric: str | None = None,
    variance: str = "per_size",
    margin: float | None = None,
    n_boot: int = 2000,
    uncertainty: str = "task",
    failure_rates: str = DEFAULT_FAILURE_RATES,
    task_metrics: Mapping[str, str] | None = None,
    formats: str | tuple[str, ...] = ("html", "pdf"),
    overwrite: bool = False,
    console: Console | None = None,
    show_progress: bool = True,
) -> ReportResult:
    """Build the report of a study into ``output``: report.qmd with figures and tables, then HTML and/or PDF.

    Give a study database (``storage``), an exported table (``results``) or an analysis folder
    (``analysis_dir``, optionally with one of the others for the single runs). ``predictions`` (or the
    study's artifacts, with ``storage``) adds item uncertainty to the answer's table. Everything is checked, and
    the analysis computed, before the output folder is touched; an existing non-empty folder is refused
    unless ``overwrite``. When rendering fails the ``.qmd`` is kept and :class:`ReportError` carries the
    renderer's message.
    """
    from freezestats.report.document import write_document
    from freezestats.report.inputs import gather_inputs
    from freezestats.report.render import choose_renderer, render

    console = console or Console(stderr=True)
    output = Path(output)
    wanted = _parse_formats(formats)
    _check_output(output, overwrite)  # before any work is done
    timings: dict[str, float] = {}
    progress = _stage_progress(console, show_progress)
    with progress:
        stage = progress.add_task("analysis" if analysis_dir is None else "reading the analysis", total=1)
        start = time.perf_counter()
        inputs = gather_inputs(
            storage=storage,
            results=results,
            predictions=predictions,
            analysis_dir=analysis_dir,
            study_name=study_name,
            model=model,
            metric=metric,
            variance=variance,
            margin=margin,
            n_boot=n_boot,
            uncertainty=uncertainty,
            failure_rates=failure_rates,
            task_metrics=task_metrics,
        )
        renderer = choose_renderer()
        progress.update(stage, completed=1)
        timings["analysis"] = time.perf_counter() - start

        _fresh_output(output, overwrite)  # checked again: the analysis took a while
        if inputs.ran_analysis:
            write_analysis(inputs.analysis, output / "analysis", results=inputs.runs, study=inputs.study)
        n_tasks = len(inputs.analysis.settings.get("tasks", []))
        figures = progress.add_task("figures and tables", total=9 * max(n_tasks, 1))
        start = time.perf_counter()

        def step(description: str) -> None:
            progress.update(figures, advance=1, description=f"figures: {description}")

        qmd = write_document(inputs, output, renderer.description, step)
        progress.update(figures, description="figures and tables", total=progress.tasks[figures].completed)
        timings["figures"] = time.perf_counter() - start

        outputs: dict[str, Path] = {}
        for fmt in wanted:
            task = progress.add_task(f"rendering {fmt} with {renderer.kind}", total=1)
            start = time.perf_counter()
            outputs.update(render(qmd, (fmt,), renderer))
            timings[f"render_{fmt}"] = time.perf_counter() - start
            progress.update(task, completed=1)
    figures_written = len(list((output / "figures").glob("*.svg")))
    tables_written = len(list((output / "tables").glob("*.md")))
    return ReportResult(
        qmd=qmd,
        outputs=outputs,
        renderer=renderer.description,
        n_figures=figures_written,
        n_tables=tables_written,
        timings=timings,
    )

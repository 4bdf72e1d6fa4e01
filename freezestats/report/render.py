"""Render report.qmd to self-contained HTML and to PDF: with Quarto when it is installed, else pandoc + typst.

Quarto (``quarto render report.qmd --to html`` / ``--to typst``) reads ``_quarto.yml`` itself. The fallback
runs the same document through pandoc (PyPI ``pypandoc-binary``) with ``crossref.lua`` for the Quarto-style
references, maps the ``_quarto.yml`` settings onto pandoc's options, and compiles pandoc's Typst output with
the typst Python binding (PyPI ``typst``). A renderer that fails raises :class:`ReportError` with the
renderer's own message; the ``.qmd`` and its figures stay, so the user can fix and re-render.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from freezestats.exceptions import ReportError

__all__ = ["FORMATS", "Renderer", "choose_renderer", "render"]

FORMATS = ("html", "pdf")
_TIMEOUT = 600


@dataclass(frozen=True)
class Renderer:
    """Which tool renders the report, and its version, as shown in the terminal and the colophon."""

    kind: str  # "quarto" or "pandoc"
    description: str
    executable: str


def choose_renderer() -> Renderer:
    """Quarto when ``quarto`` is on PATH, else pandoc + typst from their PyPI packages."""
    quarto = shutil.which("quarto")
    if quarto:
        try:
            version = subprocess.run(
                [quarto, "--version"], capture_output=True, text=True, timeout=60, check=False
            ).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            version = "unknown version"
        return Renderer("quarto", f"Quarto {version or 'unknown version'} (HTML; Typst for the PDF)", quarto)
    try:
        import pypandoc

        pandoc = pypandoc.get_pandoc_path()
        pandoc_version = pypandoc.get_pandoc_version()
    except (ImportError, OSError) as err:
        raise ReportError(
            f"Neither quarto nor pandoc is available ({err}); install Quarto, or `pip install pypandoc-binary typst`."
        ) from err
    try:
        typst_version = importlib.metadata.version("typst")
    except importlib.metadata.PackageNotFoundError:
        typst_version = "not installed"
    return Renderer(
        "pandoc",
        f"pandoc {pandoc_version} (HTML) and pandoc → typst {typst_version} (PDF); Quarto is not on PATH",
        pandoc,
    )


def render(qmd: Path, formats: tuple[str, ...], renderer: Renderer) -> dict[str, Path]:
    """Render ``qmd`` to each of ``formats`` (``html``, ``pdf``) beside it; returns {format: path}."""
    out: dict[str, Path] = {}
    for fmt in formats:
        if fmt not in FORMATS:
            raise ReportError(f"`--format` must be a comma-separated subset of {list(FORMATS)}, but got {fmt!r}.")
        target = qmd.with_suffix(".html" if fmt == "html" else ".pdf")
        if renderer.kind == "quarto":
            _quarto(qmd, fmt, renderer.executable)
        elif fmt == "html":
            _pandoc_html(qmd, renderer.executable)
        else:
            _pandoc_typst_pdf(qmd, renderer.executable)
        if not target.is_file():
            raise ReportError(f"{renderer.kind} finished but wrote no {target.name}; the source is kept in {qmd}.")
        out[fmt] = target
    return out


def _one_line(text: str, limit: int = 600) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    joined = " | ".join(lines[-8:])
    return joined if len(joined) <= limit else "…" + joined[-limit:]


def _run(command: list[str], cwd: Path, what: str, qmd: Path) -> None:
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ReportError(f"{what} could not run ({err}); the source is kept in {qmd}.") from err
    if done.returncode != 0:
        message = _one_line(done.stderr or done.stdout or f"exit status {done.returncode}")
        raise ReportError(f"{what} failed (exit {done.returncode}): {message}; the source is kept in {qmd}.")


def _quarto(qmd: Path, fmt: str, quarto: str) -> None:
    to = "html" if fmt == "html" else "typst"
    _run([quarto, "render", qmd.name, "--to", to], qmd.parent, f"quarto render --to {to}", qmd)


def _settings(qmd: Path, fmt: str) -> dict[str, Any]:
    path = qmd.parent / "_quarto.yml"
    if not path.is_file():
        return {}
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ReportError(f"{path} is not valid YAML: {err}") from err
    return dict(((config.get("format") or {}).get(fmt)) or {})


def _pandoc_html(qmd: Path, pandoc: str) -> None:
    settings = _settings(qmd, "html")
    command = [pandoc, qmd.name, "--from", "markdown", "--to", "html5", "--standalone", "--embed-resources"]
    command += ["--lua-filter", "crossref.lua", "--output", qmd.with_suffix(".html").name]
    if settings.get("toc"):
        command += ["--toc", f"--toc-depth={int(settings.get('toc-depth', 3))}"]
    if settings.get("css"):
        command += ["--css", str(settings["css"])]
    _run(command, qmd.parent, "pandoc (HTML)", qmd)


def _pandoc_typst_pdf(qmd: Path, pandoc: str) -> None:
    settings = _settings(qmd, "typst")
    typ = qmd.with_suffix(".typ")
    command = [pandoc, qmd.name, "--from", "markdown", "--to", "typst", "--standalone"]
    command += ["--lua-filter", "crossref.lua", "--output", typ.name]
    if settings.get("toc"):
        command += ["--toc", f"--toc-depth={int(settings.get('toc-depth', 3))}"]
    # Typst keeps a figure (a captioned table included) in one piece, so a table that does not fit below the
    # text before it moves to the next page and leaves this one near-empty (the decision table below the table
    # of contents did); tables may flow across the page instead. Images stay whole: a breakable image figure
    # puts its caption on the next page.
    command += ["--variable", "header-includes=#show figure.where(kind: table): set block(breakable: true)"]
    page = {k: settings[k] for k in ("papersize", "fontsize", "page-numbering", "margin") if k in settings}
    meta = qmd.parent / ".typst-settings.yml"
    meta.write_text(yaml.safe_dump(page))  # a metadata file: `margin` is a map, which --variable cannot pass
    command += ["--metadata-file", meta.name]
    try:
        _run(command, qmd.parent, "pandoc (Typst)", qmd)
    finally:
        meta.unlink(missing_ok=True)
    try:
        import typst
    except ImportError as err:
        raise ReportError(
            f"The typst package is missing ({err}): pip install typst; the source is kept in {qmd}."
        ) from err
    try:
        typst.compile(str(typ), output=str(qmd.with_suffix(".pdf")), root=str(qmd.parent))
    except Exception as err:  # typst.TypstError and friends: show the compiler's own message
        raise ReportError(f"typst failed: {_one_line(str(err))}; the source is kept in {qmd}.") from err
    finally:
        typ.unlink(missing_ok=True)  # an intermediate file: report.qmd is the source to edit

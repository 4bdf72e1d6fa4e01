"""`freezestats report`: a real small study rendered to HTML and PDF and looked at, the sections that cannot
apply, the Quarto path, and bad input (one-line errors, nothing overwritten, the .qmd kept on failure)."""

from __future__ import annotations

import json
import re
import shutil
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _browser import (
    artifacts_dir,
    colored_pixels,
    find_chromium,
    largest_empty_band,
    open_html,
    page_texts,
    pdf_pages,
)
from _factories import simple_spec, write_spec

from freezestats.analysis.pipeline import analyze
from freezestats.analysis.result import write_analysis
from freezestats.cli.main import main
from freezestats.stats.simulation.results import simulate_results


def _simulated(tmp: Path, **kwargs) -> Path:
    table = simulate_results(rng=1, **kwargs)
    rng = np.random.default_rng(0)
    table["wall_seconds"] = 10 + table["train_size"] / 20 + rng.uniform(0, 2, len(table))
    table["trainable_params"] = 22e6 * (1 - table["frozen_layers"].clip(lower=0) / 13)
    path = tmp / "results.parquet"
    table.to_parquet(path)
    return path


def _listing(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# --- a real study: MiniLM on SST-2, trained by `freezestats run`, reported to both formats -----------------


@pytest.fixture(scope="session")
def real_report(tmp_path_factory: pytest.TempPathFactory, small_glue_dir: Path) -> Path:
    """12 real fine-tuning runs (sizes 50/100 × frozen 0/3/6 × seeds 1/2, 1 epoch, scored on 256 dev rows) and their
    report."""
    folder = tmp_path_factory.mktemp("real-study")
    spec = simple_spec(
        name="report-real",
        grid={"frozen_layers": [0, 3, 6], "train_sizes": [50, 100], "seeds": [1, 2]},
        training={"epochs": 1, "eval_every_epochs": 1, "max_length": 64},
    )
    spec["name"] = "report-real"
    path = write_spec(folder, spec)
    storage = f"sqlite:///{folder / 'study.db'}"
    data = ["--data-dir", str(small_glue_dir)]
    assert main(["run", "--study", str(path), "--storage", storage, *data, "--no-progress"]) == 0
    out = folder / "report_out"
    assert main(["report", "--storage", storage, "-o", str(out), "--n-boot", "200", "--no-progress"]) == 0
    return out


@pytest.mark.slow
def test_real_study_report_files(real_report: Path) -> None:
    for name in ("report.qmd", "report.html", "report.pdf", "_quarto.yml", "crossref.lua", "analysis/analysis.json"):
        assert (real_report / name).is_file(), name
    qmd = (real_report / "report.qmd").read_text()
    assert "%%" not in qmd  # every marker of the template was filled
    figures = sorted(p.name for p in (real_report / "figures").glob("*.svg"))
    for name in ("sst2-runs", "sst2-emm-heatmap", "sst2-interaction", "sst2-forest", "sst2-relative", "sst2-compute"):
        assert f"{name}.svg" in figures and f"#fig-{name}" in qmd, name
    # Relative quality is labelled as what is plotted: a plain ratio to full fine-tuning, not a 0 = baseline scale.
    assert "0 = majority baseline" not in qmd and "ratio of a depth's mean score to full fine-tuning's" in qmd
    # Page 1 is the decision: the cost when both runs train per size and depth, as the analysis's table has it.
    page_one = qmd.split("## The decision")[1].split("## The answer")[0]
    costs = pd.read_parquet(real_report / "analysis" / "decision.parquet")
    assert len(costs) >= 1 and "sst2-cost-figure.svg" in figures and "#fig-sst2-cost-figure" in page_one
    assert "sst2-price-figure.svg" in figures and "#fig-sst2-price-figure" in page_one
    for row in costs.itertuples():
        shown = "–" if pd.isna(row.cost) else f"{row.cost:+.2f} [{row.ci_low:+.2f}, {row.ci_high:+.2f}]"
        assert f"| {shown} |" in page_one, row
    html = (real_report / "report.html").read_text()
    assert 'src="figures/' not in html and "data:image/svg+xml" in html  # self-contained
    assert "Rendered with" not in html and "rendered with" in html.lower() and "pandoc" in html.lower()
    assert "minilm-l6" in html and "frozen_dropout" in html
    methods = qmd.split("## Methods")[1]
    assert "precision `auto` (ran as bf16)" in methods or "precision `auto` (ran as fp32)" in methods
    # Where full fine-tuning is not shown to beat the majority class (a 1-epoch MiniLM at 50-100 examples),
    # the answer states no cost for that size; where it is, the answer is a non-inferiority statement.
    answer = qmd.split("## The answer")[1].split("## Methods")[0]
    checks = pd.read_parquet(real_report / "analysis" / "baseline_check.parquet")
    failed = sorted(int(r.train_size) for r in checks.itertuples() if not r.beats_baseline)
    match = re.search(r"At n = ([\d, ]+) full fine-tuning was not shown to beat the majority baseline", answer)
    listed = sorted(int(n) for n in match.group(1).split(", ")) if match else []
    assert listed == failed, (failed, answer)  # said once, with exactly the sizes where it holds


@pytest.mark.slow
def test_real_study_html_in_a_browser(real_report: Path) -> None:
    if find_chromium() is None:
        pytest.skip("chromium / chromium-driver are not installed (Debian packages; .ci/run installs them)")
    shot = artifacts_dir() / "report-html-first-screen.png"
    errors, figures, title = open_html(real_report / "report.html", shot)
    assert errors == [], errors
    assert "report-real" in title
    svg_figures = len(list((real_report / "figures").glob("*.svg")))
    shown = [f for f in figures if f["tag"] == "img"]
    assert len(shown) == svg_figures
    for figure in shown:
        assert figure["visible"] and figure["width"] > 200 and figure["height"] > 80, figure
        assert figure["complete"] and figure["natural"] > 0, figure
    assert shot.stat().st_size > 10_000


@pytest.mark.slow
def test_real_study_pdf_pages(real_report: Path) -> None:
    if shutil.which("pdftoppm") is None:
        pytest.skip("pdftoppm is not installed (Debian package poppler-utils; .ci/run installs it)")
    pdf = real_report / "report.pdf"
    texts = page_texts(pdf)
    pages = pdf_pages(pdf, artifacts_dir() / "report-pdf-page", dpi=60)
    assert 6 <= len(pages) <= 30
    assert len(texts) - 1 == len(pages)  # pdftotext ends with a form feed
    n_figures = len(list((real_report / "figures").glob("*.svg")))
    captions = [re.findall(r"Figure (\d+):", t) for t in texts]
    assert sorted(int(n) for found in captions for n in found) == list(range(1, n_figures + 1))
    for png, found in zip(pages, captions, strict=False):
        if found:  # a page with a figure shows a plot, not a blank box
            assert colored_pixels(png) > 150, png
    assert "Colophon" in texts[-2] or "Colophon" in "".join(texts[-3:])
    gaps = {png.name: round(largest_empty_band(png), 2) for png in pages[:-1]}  # the last page ends where it ends
    assert max(gaps.values()) <= 0.6, gaps  # no page left near-empty by a figure or table that moved on
    for extra in pages[3:]:  # keep the first pages as artifacts, not all of them
        extra.unlink()


# --- simulated studies: sections that cannot apply, the template's cross-references, the analysis folder ----


@pytest.fixture(scope="module")
def simulated_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _simulated(
        tmp_path_factory.mktemp("sim"), tasks=("sst2",), frozen_levels=(-1, 0, 4, 12), train_sizes=(50, 200), seeds=3
    )


def test_report_from_results_with_numbers_from_the_analysis(
    simulated_results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = main(["report", "--results", str(simulated_results), "-o", str(out), "--n-boot", "200", "--no-progress"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "Rendered with pandoc" in printed or "Rendered with Quarto" in printed
    assert (out / "report.html").is_file() and (out / "report.pdf").read_bytes()[:4] == b"%PDF"
    qmd = (out / "report.qmd").read_text()
    answer = qmd.split("## The answer")[1].split("## Methods")[0]
    # The answer is the non-inferiority tests', each kind of outcome said once with its sizes listed, after the
    # decision table that opens the report (a row per size).
    answers = pd.read_parquet(out / "analysis" / "answer.parquet")
    assert len(answers) == 2
    for row in answers.itertuples():
        assert re.search(rf"n = (\d+, )*{row.train_size}\b", answer), (row.train_size, answer)
    assert qmd.index("## The decision") < qmd.index("## The answer")
    assert all(f"| sst2 | {row.train_size} |" in answer for row in answers.itertuples())
    page_one = qmd.split("## The decision")[1].split("## The answer")[0]
    assert "No decision table: it needs the runs' per-item predictions" in page_one  # a results table has none
    assert "How to read this" in answer and "absence of evidence" in answer and "Margin 0.01" in answer
    # Beside it, the superiority contrasts as what they are: the shallowest detectably worse depth per size.
    contrasts = pd.read_parquet(out / "analysis" / "contrasts.parquet")
    worse = contrasts[(contrasts["fit"] == "all_runs") & (contrasts["p_adj"] < 0.05) & (contrasts["estimate"] < 0)]
    assert len(worse) >= 1
    for size, rows in worse.groupby("train_size"):
        row = rows.sort_values("frozen_layers", key=lambda k: k.where(k >= 0, -0.5)).iloc[0]
        quoted = f"{100 * row.estimate:+.1f} [{100 * row.ci_low:+.1f}, {100 * row.ci_high:+.1f}]"
        assert f"n = {size}: from frozen" in answer and quoted.replace("-", "−") in answer
    refs = set(re.findall(r"\{#((?:fig|tbl)-[a-z0-9-]+)", qmd))
    assert len(refs) >= 10
    html = (out / "report.html").read_text()
    assert "<strong>Figure 1:</strong>" in html and "<strong>Table 1:</strong>" in html
    assert html.count("<figure") == len([r for r in refs if r.startswith("fig-")])
    appendix = (out / "tables" / "sst2-appendix.md").read_text()
    assert appendix.count("**") // 2 >= 2 * 5  # a bold best value in every column of both sizes
    assert "selection" in qmd.lower() and "best_dev" in qmd


def test_one_size_and_no_reference_are_explained_not_crashed(tmp_path: Path) -> None:
    results = _simulated(tmp_path, effects=0.7, tasks=("mrpc",), frozen_levels=(0, 2, 12), train_sizes=(100,), seeds=3)
    out = tmp_path / "out"
    assert main(["report", "--results", str(results), "-o", str(out), "--n-boot", "100", "--format", "html"]) == 0
    qmd = (out / "report.qmd").read_text()
    assert "one train size (n = 100), so there is no interaction" in qmd
    assert (
        "No comparison with the published figures for mrpc: the blog 2020 (RoBERTa-base) published cola and sst2 only"
        in qmd
    )
    assert not (out / "figures" / "mrpc-interaction.svg").exists()
    assert not (out / "report.pdf").exists()  # --format html only


def test_two_tasks_from_an_analysis_folder_with_frozen_dropout_off(tmp_path: Path) -> None:
    runs = simulate_results(tasks=("sst2", "cola"), frozen_levels=(0, 2, 12), train_sizes=(50, 100), seeds=3, rng=2)
    analysis = analyze(runs, n_boot=100, margin=0.02)
    spec = simple_spec(training={"frozen_dropout": "off"}, tasks=["sst2", "cola"])
    study = {"name": "dropout-off", "spec": spec, "spec_hash": "abc", "provenance": {"n_layers": 12}}
    write_analysis(analysis, tmp_path / "analysis", results=runs, study=study)
    out = tmp_path / "out"
    assert main(["report", "--analysis", str(tmp_path / "analysis"), "-o", str(out), "--format", "html"]) == 0
    qmd = (out / "report.qmd").read_text()
    assert "Frozen layers ran without dropout" in qmd and ".callout-warning" in qmd
    assert "### sst2" in qmd and "### cola" in qmd and "equivalence with the reference" in qmd
    assert 'class="callout-warning"' in (out / "report.html").read_text()
    assert not (out / "analysis").exists()  # the given analysis was used, not recomputed


def test_analysis_folder_without_runs_says_what_is_missing(simulated_results: Path, tmp_path: Path) -> None:
    assert main(["analyze", "--results", str(simulated_results), "--n-boot", "100", "-o", str(tmp_path / "a")]) == 0
    (tmp_path / "a" / "results.parquet").unlink()
    out = tmp_path / "out"
    assert main(["report", "--analysis", str(tmp_path / "a"), "-o", str(out), "--format", "html"]) == 0
    qmd = (out / "report.qmd").read_text()
    assert "The analysed runs are not available" in qmd and "No compute measurements" in qmd
    assert (out / "figures" / "sst2-emm-heatmap.svg").is_file()


# --- Quarto ----------------------------------------------------------------------------------------------


def test_quarto_renders_the_report_when_installed(simulated_results: Path, tmp_path: Path) -> None:
    if shutil.which("quarto") is None:
        pytest.skip("quarto is not on PATH: the report was checked with the pandoc + typst fallback only")
    out = tmp_path / "out"
    assert main(["report", "--results", str(simulated_results), "-o", str(out), "--n-boot", "100"]) == 0
    assert (out / "report.html").stat().st_size > 10_000 and (out / "report.pdf").read_bytes()[:4] == b"%PDF"
    assert "Quarto" in (out / "report.html").read_text()


def _fake_quarto(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "quarto"
    script.write_text('#!/bin/sh\nif [ "$1" = "--version" ]; then echo 9.9.9; exit 0; fi\n' + body)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return folder


def test_quarto_on_path_is_used_with_html_and_typst(
    simulated_results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "calls.log"
    body = (
        f'echo "$@" >> {log}\n'
        'case "$4" in html) echo "<html>quarto</html>" > report.html;; typst) printf "%%PDF-1.7" > report.pdf;; esac\n'
    )
    monkeypatch.setenv("PATH", f"{_fake_quarto(tmp_path / 'bin', body)}:{__import__('os').environ['PATH']}")
    out = tmp_path / "out"
    assert main(["report", "--results", str(simulated_results), "-o", str(out), "--n-boot", "100"]) == 0
    assert log.read_text().splitlines() == ["render report.qmd --to html", "render report.qmd --to typst"]
    assert "Rendered with Quarto 9.9.9" in capsys.readouterr().out
    assert "Quarto 9.9.9" in (out / "report.qmd").read_text()  # the colophon names the renderer


# --- bad input -------------------------------------------------------------------------------------------


def test_existing_output_folder_is_left_untouched_without_overwrite(
    simulated_results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "report.html").write_text("an older report")
    before = _listing(out)
    assert main(["report", "--results", str(simulated_results), "-o", str(out), "--format", "html"]) == 2
    err = capsys.readouterr().err.strip()
    assert "already exists" in err and "--overwrite" in err and len(err.splitlines()) == 1
    assert _listing(out) == before
    assert main(["report", "--results", str(simulated_results), "-o", str(out), "--format", "html", "--overwrite"]) == 0
    assert (out / "notes.txt").read_text() == "mine" and "an older report" not in (out / "report.html").read_text()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d.mkdir(), "holds no analysis.json"),
        (lambda d: None, "No analysis folder"),
        (
            lambda d: (d.mkdir(), (d / "analysis.json").write_text('{"settings": {}, "warnings": [], "tables": {}}')),
            "no tables",
        ),
        (lambda d: (d.mkdir(), (d / "analysis.json").write_text("not json")), "not an analysis.json"),
    ],
    ids=["empty", "missing", "no-tables", "garbage"],
)
def test_bad_analysis_folder_is_one_line(
    make, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make(tmp_path / "analysis")
    code = main(["report", "--analysis", str(tmp_path / "analysis"), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_bad_format_and_empty_results_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--results", str(tmp_path / "none.parquet"), "-o", str(tmp_path / "o")]) == 2
    assert "No results table" in capsys.readouterr().err
    results = _simulated(tmp_path, tasks=("sst2",), frozen_levels=(0, 2), train_sizes=(50,), seeds=2)
    assert main(["report", "--results", str(results), "-o", str(tmp_path / "o"), "--format", "docx"]) == 2
    assert "`--format` must be" in capsys.readouterr().err
    pd.read_parquet(results).iloc[0:0].to_parquet(tmp_path / "empty.parquet")
    assert main(["report", "--results", str(tmp_path / "empty.parquet"), "-o", str(tmp_path / "o")]) == 2
    assert "empty" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_failing_quarto_keeps_the_qmd_and_shows_its_error(
    simulated_results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    body = 'echo "ERROR: YAMLException: bad indentation of a mapping entry (report.qmd, 3:7)" >&2\nexit 1\n'
    monkeypatch.setenv("PATH", f"{_fake_quarto(tmp_path / 'bin', body)}:{__import__('os').environ['PATH']}")
    out = tmp_path / "out"
    assert main(["report", "--results", str(simulated_results), "-o", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "quarto render --to html failed" in err
    assert "bad indentation of a mapping entry" in err and "kept in" in err
    assert (out / "report.qmd").is_file() and (out / "figures" / "sst2-runs.svg").is_file()


def test_failing_typst_keeps_the_qmd_and_shows_its_error(
    simulated_results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import typst

    if shutil.which("quarto"):
        pytest.skip("quarto is on PATH, so the typst fallback is not used")

    def broken(*args, **kwargs):
        raise RuntimeError("error: unknown font family: freezestats-missing\n  ┌─ report.typ:12:5")

    monkeypatch.setattr(typst, "compile", broken)
    out = tmp_path / "out"
    assert main(["report", "--results", str(simulated_results), "-o", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "typst failed: error: unknown font family" in err
    assert (out / "report.qmd").is_file() and (out / "report.html").is_file() and not (out / "report.pdf").exists()


def test_analyze_keeps_runs_and_study_for_the_report(simulated_results: Path, tmp_path: Path) -> None:
    assert main(["analyze", "--results", str(simulated_results), "--n-boot", "100", "-o", str(tmp_path / "a")]) == 0
    assert len(pd.read_parquet(tmp_path / "a" / "results.parquet")) == len(pd.read_parquet(simulated_results))
    assert not (tmp_path / "a" / "study.json").exists()  # no database, no stored spec
    assert json.loads((tmp_path / "a" / "analysis.json").read_text())["settings"]["n_runs"] > 0

"""Fill the template (``report/report.qmd``) with the study's figures, tables and prose; write the Quarto source.

The output folder gets ``report.qmd`` (the filled template), ``_quarto.yml``, ``report.css``,
``crossref.lua``, ``figures/*.svg`` and ``tables/*.md`` + ``*.parquet``: everything ``quarto render``
(or pandoc) needs, and nothing that needs a Python kernel. A section that cannot apply to this study (one
train size, no published figures for the task, no runs at hand) is replaced by a sentence saying why.
"""

from __future__ import annotations

import datetime as _dt
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from freezestats.analysis.summary import runs_counted
from freezestats.report import figures as F
from freezestats.report import methods, text
from freezestats.report.inputs import ReportInputs
from freezestats.report.sections.answer_tests import item_uncertainty_table
from freezestats.report.sections.arms import arm_section
from freezestats.report.sections.checkpoints import checkpoint_section
from freezestats.report.sections.comparisons import compute_section, lee_section, reference_section
from freezestats.report.sections.cost_decision import cost_decision_section
from freezestats.report.sections.decision import decision_section
from freezestats.report.sections.model_details import appendix, model_section, p_text
from freezestats.report.sections.pair_encoding import pair_encoding_section
from freezestats.report.sections.seeds_spent import seeds_spent_section
from freezestats.report.sections.shared_encoder import shared_encoder_section
from freezestats.report.tables import fmt_num, present, sorted_cells
from freezestats.report.writer import Writer, heading, task_table, why_missing
from freezestats.tasks.bundled import bundled_path

if TYPE_CHECKING:
    pass

__all__ = ["TEMPLATE_FILES", "write_document"]

#: What the mixed model's intervals speak of, said in every caption that shows them: they let the seeds vary,
#: not the evaluation items (the answer's tests, which do, are in their own table).
_SEEDS_ONLY = "; the mixed model's intervals, seeds only: they speak of this evaluation set"

#: Files copied from the template folder next to report.qmd.
TEMPLATE_FILES = ("_quarto.yml", "report.css", "crossref.lua")
_MARKER = re.compile(r"%%([a-z_]+)%%")


def _blog_section(inputs: ReportInputs, w: Writer) -> str:
    parts = []
    for task in inputs.analysis.settings["tasks"]:
        response = inputs.response_of(task)
        metric = inputs.metric_of(task)
        runs = inputs.task_runs(task)
        summary = task_table(inputs, "cell_summary", task, fit=None)
        head = heading(inputs, task)
        if runs is None or runs.empty or summary is None:
            parts.append(head + "The single runs are not available, so this figure is left out; the cell "
                         "statistics are in the appendix.")  # fmt: skip
            continue
        caption = (
            f"{task}: {metric} ({response}) against the number of frozen layers, one panel per train size; "
            f"dots are runs ({len(runs)} in all), the line joins cell means, dashed: majority-class baseline."
        )
        parts.append(head + w.figure(F.blog_figure(runs, summary, response, metric), f"{task}-runs", caption))
    return "\n\n".join(parts)


def _emmeans_section(inputs: ReportInputs, w: Writer) -> str:
    parts = []
    for task in inputs.analysis.settings["tasks"]:
        metric = inputs.metric_of(task)
        emm = task_table(inputs, "emmeans", task)
        head = heading(inputs, task)
        if emm is None:
            parts.append(head + f"No model-based means: {why_missing(inputs, task, 'emmeans')}.")
            continue
        body = [
            w.figure(
                F.emm_heatmap(emm, metric),
                f"{task}-emm-heatmap",
                f"{task}: estimated marginal mean {metric} of each cell (frozen layers × train size), all "
                f"runs{_SEEDS_ONLY}.",
            )
        ]
        sizes = sorted(int(s) for s in emm["train_size"].unique())
        if len(sizes) > 1:
            body.append(
                w.figure(
                    F.interaction_plot(emm, metric),
                    f"{task}-interaction",
                    f"{task}: estimated marginal means with 95% confidence intervals{_SEEDS_ONLY}; one line per train "
                    "size (non-parallel lines: freezing acts differently with more data).",
                )
            )
        else:
            body.append(
                f"The study has one train size (n = {sizes[0]}), so there is no interaction of freezing with "
                "the amount of data to plot."
            )
        inter = task_table(inputs, "interaction_test", task, fit=None)
        if inter is not None:
            r = inter.iloc[0]
            if pd.notna(r.get("f_stat", float("nan"))):
                body.append(
                    f"F test (Satterthwaite df) of the frozen × size interaction: F({int(r['num_df'])}, "
                    f"{r['den_df']:.1f}) = {r['f_stat']:.2f}, p {p_text(r['p_val'])}."
                )
            else:
                body.append(
                    f"Likelihood-ratio test of the frozen × size interaction: LR = {r['lr_stat']:.2f}, "
                    f"df = {int(r['df'])}, p {p_text(r['p_val'])}."
                )
        parts.append(head + "\n\n".join(body))
    return "\n\n".join(parts)


def _contrasts_section(inputs: ReportInputs, w: Writer) -> str:
    settings = inputs.analysis.settings
    parts = []
    for task in settings["tasks"]:
        head = heading(inputs, task)
        contrasts = task_table(inputs, "contrasts", task)
        if contrasts is None:
            parts.append(head + f"No contrasts: {why_missing(inputs, task, 'contrasts')}.")
            continue
        adjust = str(contrasts["adjust"].iloc[0])
        reference = "full fine-tuning" if settings.get("reference", 0) == 0 else "the reference level"
        adjusted = "ci_low_adj" in contrasts.columns  # analyses written before the column existed lack it
        interval = {
            "dunnett": "simultaneous 95% intervals (Dunnett)",
            "holm": "Bonferroni-adjusted 95% intervals within the train size (Holm's step-down test has no "
            "interval form; emmeans substitutes the same)",
            "bonferroni": "Bonferroni-adjusted 95% intervals within the train size",
        }.get(adjust if adjusted else "", "95% intervals per comparison")
        interval += f"; filled markers: {adjust}-adjusted p < 0.05 within the train size"
        body = [
            w.figure(
                F.forest_plot(contrasts, settings.get("margin")),
                f"{task}-forest",
                f"{task}: difference from {reference} in points (100 × metric), all runs{_SEEDS_ONLY}; {interval}"
                + ("; dotted: the equivalence margin." if settings.get("margin") else "."),
            ),
            w.table(
                present(
                    sorted_cells(contrasts),
                    {
                        "train_size": "train size",
                        "frozen_layers": "frozen",
                        "estimate": "difference",
                        "ci_low": "CI low",
                        "ci_high": "CI high",
                        "p_val": "p",
                        "p_adj": f"p ({adjust})",
                    },
                ),
                f"{task}-contrasts",
                f"{task}: contrasts with the reference level (model, all runs{_SEEDS_ONLY}); p adjusted within each "
                "train size.",
            ),
        ]
        equivalence = task_table(inputs, "equivalence", task)
        if equivalence is not None:
            body.append(
                w.table(
                    present(
                        sorted_cells(equivalence),
                        {
                            "train_size": "train size",
                            "frozen_layers": "frozen",
                            "estimate": "difference",
                            "ci90_low": "90% CI low",
                            "ci90_high": "90% CI high",
                            "p_val": "p (TOST)",
                            "equivalent": "equivalent",
                        },
                    ),
                    f"{task}-equivalence",
                    f"{task}: equivalence with the reference within ±{settings.get('margin')} (two one-sided tests).",
                )
            )
        else:
            body.append(
                "No equivalence margin was given to the analysis (`--margin`), so no equivalence (TOST) test was run."
            )
        body.append(item_uncertainty_table(inputs, w, task))
        parts.append(head + "\n\n".join(body))
    return "\n\n".join(parts)


def _variance_section(inputs: ReportInputs, w: Writer) -> str:
    """Per task: the seed spread, the failure rates and the two-part failure tables, and the spread test."""
    parts = []
    for task in inputs.analysis.settings["tasks"]:
        body = [
            _seed_spread_part(inputs, w, task),
            _failure_rates_part(inputs, w, task),
            _failure_summary_part(inputs, w, task),
            _two_part_part(inputs, w, task),
            _spread_test_part(inputs, w, task),
        ]
        parts.append(heading(inputs, task) + "\n\n".join(part for part in body if part))
    return "\n\n".join(parts)


def _seed_spread_part(inputs: ReportInputs, w: Writer, task: str) -> str:
    spread = task_table(inputs, "seed_spread", task, fit=None)
    if spread is None or not spread["std"].notna().any():
        return "No seed spread: every cell has fewer than two runs."
    return w.figure(
        F.spread_figure(spread, inputs.metric_of(task)),
        f"{task}-seed-sd",
        f"{task}: standard deviation over seeds of each cell, in points, with chi-square 95% intervals.",
    )


def _failure_rates_part(inputs: ReportInputs, w: Writer, task: str) -> str | None:
    rates = task_table(inputs, "failure_rates", task, fit=None)
    if rates is None:
        return None
    return w.figure(
        F.failure_figure(rates),
        f"{task}-failures",
        f"{task}: share of failed runs per cell with Wilson 95% intervals ({int(rates['n_failed'].sum())} "
        f"of {int(rates['n'].sum())} runs failed).",
    )


def _failure_summary_part(inputs: ReportInputs, w: Writer, task: str) -> str | None:
    summary = task_table(inputs, "failure_summary", task, fit=None)
    if summary is None or not len(summary):
        return None
    checkpoint = str(summary["checkpoint"].iloc[0])
    names = {
        "train_size": "train size",
        "frozen_layers": "frozen",
        "n": "runs",
        "n_failed": "failed",
        "p_fail": "P(fail)",
        "ci_low": "CI low",
        "ci_high": "CI high",
        "mean_healthy": "mean, healthy runs",
        "mean_all": "mean, all runs",
    }
    formats = {
        "n": fmt_num(0),
        "n_failed": fmt_num(0),
        "p_fail": fmt_num(2),
        "ci_low": fmt_num(2),
        "ci_high": fmt_num(2),
    }
    return w.table(
        present(summary, names, formats),
        f"{task}-failure-summary",
        f"{task}: failure in two parts. A run fails when the `{checkpoint}` checkpoint (the one the "
        "analysed metric scores) is not shown to beat the majority class (one-sided exact binomial "
        "test, 5%); P(fail) with a Wilson 95% interval, then the mean score of the healthy runs and of "
        "all runs.",
    )


def _two_part_part(inputs: ReportInputs, w: Writer, task: str) -> str | None:
    two_part = task_table(inputs, "two_part_contrasts", task, fit=None)
    if two_part is None or not len(two_part):
        return None
    names = {
        "train_size": "train size",
        "frozen_layers": "frozen",
        "estimate": "difference",
        "ci_low": "CI low",
        "ci_high": "CI high",
        "healthy_difference": "difference, healthy",
        "p_fail": "P(fail)",
        "p_fail_reference": "P(fail), reference",
    }
    return w.table(
        present(sorted_cells(two_part), names, {"p_fail": fmt_num(3), "p_fail_reference": fmt_num(3)}),
        f"{task}-two-part",
        f"{task}: the difference from the reference in expected score, failures included, in two parts: "
        "P(fail) from a binomial GLMM with random frozen-level, train-size and cell intercepts (it "
        "borrows the failure rate across cells, which the few runs of one cell cannot give), times the healthy "
        "runs' mixed model. 95% intervals join the healthy part's t interval with the failure part's, "
        "built from Wilson intervals of each P(fail), so they are not symmetric when a P(fail) is near "
        "0 or 1.",
    )


def _spread_test_part(inputs: ReportInputs, w: Writer, task: str) -> str:
    test = task_table(inputs, "spread_test", task, fit=None)
    if test is None:
        return f"No Brown–Forsythe test: {why_missing(inputs, task, 'spread_test')}."
    names = {
        "train_size": "train size",
        "statistic": "F",
        "df_between": "df1",
        "df_within": "df2",
        "p_val": "p",
        "p_holm": "p (Holm)",
        "n_groups": "levels",
    }
    return w.table(
        present(test, names, {"df_between": fmt_num(0), "df_within": fmt_num(0), "n_groups": fmt_num(0)}),
        f"{task}-brown-forsythe",
        f"{task}: Brown–Forsythe test that the seed spread differs across frozen levels, per train size.",
    )


def _seeds_spent(inputs: ReportInputs, w: Writer) -> str:
    """The section on how the seeds were spent, with its heading: adaptive studies only (others ran every seed)."""
    if not inputs.spec.get("adaptive"):
        return ""
    return "## How the seeds were spent\n\n" + seeds_spent_section(inputs, w, inputs.items)


def _notes(inputs: ReportInputs) -> str:
    if not inputs.notes:
        return ""
    return "::: {.callout-note}\n" + "\n\n".join(inputs.notes) + "\n:::"


def _responses(settings: dict[str, Any]) -> str:
    """The analysed response, and a task's own where it differs (a task judged on another metric: its last
    checkpoint), e.g. ``heldout (cola: final_dev)``."""
    own = {t: r for t, r in (settings.get("response_of") or {}).items() if r != settings["response"]}
    return settings["response"] + (f" ({', '.join(f'{t}: {r}' for t, r in own.items())})" if own else "")


def _older_answer_note(inputs: ReportInputs) -> str:
    """Where the study has the decision table, say what this older section is, so that its verdicts are not read as
    a second answer to the same question."""
    if "decision" not in inputs.analysis.tables:
        return ""
    return (
        "*This section is the older task-level procedure (the mixed model's contrasts, two-part for collapsed runs, "
        "one graphical procedure over the task). The decision above is the answer: where the two differ, the "
        "decision's intervals are the ones to read (they exclude pairs with a collapsed run and report collapse "
        "beside, and each train size is its own family).*\n\n"
    )


def write_document(inputs: ReportInputs, out: Path, renderer: str, step: Callable[[str], None] | None = None) -> Path:
    """Write ``report.qmd`` and its figures, tables and template files into ``out``; returns the .qmd path."""
    out.mkdir(parents=True, exist_ok=True)
    template_dir = bundled_path("report")
    for name in TEMPLATE_FILES:
        shutil.copyfile(template_dir / name, out / name)
    w = Writer(out, step or (lambda _: None))
    settings = inputs.analysis.settings
    now = _dt.datetime.now().astimezone()
    model = (inputs.spec.get("model") or {}).get("name")
    if (
        model is None
        and inputs.runs is not None
        and "model" in inputs.runs.columns
        and inputs.runs["model"].notna().any()
    ):
        model = str(inputs.runs["model"].dropna().iloc[0])
    values = {
        "title": f"How many layers to freeze? Study {inputs.study_name}",
        "subtitle": f"{model or 'unknown model'} on {', '.join(settings['tasks'])}: {_responses(settings)}, "
        f"{runs_counted(settings)}, {settings['model']} model",
        "date": now.strftime("%Y-%m-%d"),
        "notes": _notes(inputs),
        "cost_decision": cost_decision_section(inputs, w),
        "decision": _older_answer_note(inputs) + decision_section(inputs, w),
        "answer": text.answer(inputs),
        "methods": methods.methods(inputs),
        "blog_figures": _blog_section(inputs, w),
        "checkpoints": checkpoint_section(inputs, w),
        "emmeans": _emmeans_section(inputs, w),
        "contrasts": _contrasts_section(inputs, w),
        "arms": arm_section(inputs, w),
        "shared_encoder": shared_encoder_section(inputs, w),
        "pair_encoding": pair_encoding_section(inputs, w),
        "variance": _variance_section(inputs, w),
        "seeds_spent": _seeds_spent(inputs, w),
        "lee": lee_section(inputs, w),
        "compute": compute_section(inputs, w),
        "reference": reference_section(inputs, w),
        "model_details": model_section(inputs, w),
        "appendix": appendix(inputs, w),
        "colophon": methods.colophon(inputs, renderer, now.strftime("%Y-%m-%d %H:%M %Z")),
    }
    template = (template_dir / "report.qmd").read_text()

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(f"report.qmd template has an unknown marker %%{name}%%")
        value = values[name]
        return value.replace('"', '\\"') if name in ("title", "subtitle", "date") else value

    qmd = out / "report.qmd"
    qmd.write_text(_MARKER.sub(fill, template))
    return qmd

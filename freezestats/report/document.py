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
from typing import TYPE_CHECKING

import pandas as pd

from freezestats._resources import bundled_path
from freezestats.report import figures as F
from freezestats.report import text
from freezestats.report.inputs import ReportInputs
from freezestats.report.pair_encoding import pair_encoding_section
from freezestats.report.shared_encoder import shared_encoder_section
from freezestats.report.strategies import strategy_section
from freezestats.report.tables import blog_table, fmt_num, fmt_p, markdown, present, sorted_cells

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["TEMPLATE_FILES", "write_document"]

#: Files copied from the template folder next to report.qmd.
TEMPLATE_FILES = ("_quarto.yml", "report.css", "crossref.lua")
_MARKER = re.compile(r"%%([a-z_]+)%%")
REFERENCE_NAME = "blog 2020 (RoBERTa-base)"


class _Writer:
    """Saves figures and tables under the output folder and returns the markdown that includes them."""

    def __init__(self, out: Path, step: Callable[[str], None]) -> None:
        self.out = out
        self.step = step
        self.figures: list[Path] = []
        self.tables: list[Path] = []

    @staticmethod
    def label(name: str) -> str:
        return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")

    def figure(self, fig: Figure, name: str, caption: str) -> str:
        label = self.label(name)
        width = min(100, round(100 * fig.get_size_inches()[0] / F.WIDTH))
        path = F.save(fig, self.out / "figures" / f"{label}.svg")
        self.figures.append(path)
        self.step(f"figure {label}")
        return f"![{caption}](figures/{path.name}){{#fig-{label} width={width}%}}"

    def table(self, shown: pd.DataFrame, name: str, caption: str) -> str:
        label = self.label(name)
        folder = self.out / "tables"
        folder.mkdir(parents=True, exist_ok=True)
        body = markdown(shown, caption, f"tbl-{label}")
        (folder / f"{label}.md").write_text(body + "\n")
        shown.to_parquet(folder / f"{label}.parquet", index=False)
        self.tables.append(folder / f"{label}.md")
        return body


def _task_table(inputs: ReportInputs, name: str, task: str, fit: str | None = "all_runs") -> pd.DataFrame | None:
    table = inputs.analysis.tables.get(name)
    if table is None or "task" not in table.columns:
        return None
    part = table[table["task"] == task]
    if fit is not None and "fit" in part.columns:
        part = part[part["fit"] == fit]
    return part.reset_index(drop=True) if len(part) else None


def _why_missing(inputs: ReportInputs, task: str, name: str) -> str:
    """The analysis' own warning for a table that was not computed, or a generic reason."""
    for warning in inputs.analysis.warnings:
        relevant = warning.startswith(f"{task}: {name}") or (
            name in ("emmeans", "contrasts") and "not fitted" in warning
        )
        if relevant and warning.startswith(f"{task}:"):
            return warning.split(": ", 1)[1]
    return f"the analysis has no `{name}` table for {task}"


def _heading(inputs: ReportInputs, task: str) -> str:
    return f"### {task}\n\n" if len(inputs.analysis.settings.get("tasks", [])) > 1 else ""


def _blog_section(inputs: ReportInputs, w: _Writer) -> str:
    response = inputs.analysis.settings["response"]
    parts = []
    for task in inputs.analysis.settings["tasks"]:
        metric = text.metric_name(inputs, task)
        runs = inputs.task_runs(task)
        summary = _task_table(inputs, "cell_summary", task, fit=None)
        head = _heading(inputs, task)
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


def _emmeans_section(inputs: ReportInputs, w: _Writer) -> str:
    parts = []
    for task in inputs.analysis.settings["tasks"]:
        metric = text.metric_name(inputs, task)
        emm = _task_table(inputs, "emmeans", task)
        head = _heading(inputs, task)
        if emm is None:
            parts.append(head + f"No model-based means: {_why_missing(inputs, task, 'emmeans')}.")
            continue
        body = [
            w.figure(
                F.emm_heatmap(emm, metric),
                f"{task}-emm-heatmap",
                f"{task}: estimated marginal mean {metric} of each cell (frozen layers × train size), all runs.",
            )
        ]
        sizes = sorted(int(s) for s in emm["train_size"].unique())
        if len(sizes) > 1:
            body.append(
                w.figure(
                    F.interaction_plot(emm, metric),
                    f"{task}-interaction",
                    f"{task}: estimated marginal means with 95% confidence intervals; one line per train size "
                    "(non-parallel lines: freezing acts differently with more data).",
                )
            )
        else:
            body.append(
                f"The study has one train size (n = {sizes[0]}), so there is no interaction of freezing with "
                "the amount of data to plot."
            )
        inter = _task_table(inputs, "interaction_test", task, fit=None)
        if inter is not None:
            r = inter.iloc[0]
            if pd.notna(r.get("f_stat", float("nan"))):
                body.append(
                    f"F test (Satterthwaite df) of the frozen × size interaction: F({int(r['num_df'])}, "
                    f"{r['den_df']:.1f}) = {r['f_stat']:.2f}, p {_p_text(r['p_val'])}."
                )
            else:
                body.append(
                    f"Likelihood-ratio test of the frozen × size interaction: LR = {r['lr_stat']:.2f}, "
                    f"df = {int(r['df'])}, p {_p_text(r['p_val'])}."
                )
        parts.append(head + "\n\n".join(body))
    return "\n\n".join(parts)


def _contrasts_section(inputs: ReportInputs, w: _Writer) -> str:
    settings = inputs.analysis.settings
    parts = []
    for task in settings["tasks"]:
        head = _heading(inputs, task)
        contrasts = _task_table(inputs, "contrasts", task)
        if contrasts is None:
            parts.append(head + f"No contrasts: {_why_missing(inputs, task, 'contrasts')}.")
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
                f"{task}: difference from {reference} in points (100 × metric), all runs; {interval}"
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
                f"{task}: contrasts with the reference level (model, all runs); p adjusted within each train size.",
            ),
        ]
        equivalence = _task_table(inputs, "equivalence", task)
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
        body.append(_item_uncertainty_table(inputs, w, task))
        parts.append(head + "\n\n".join(body))
    return "\n\n".join(parts)


def _item_uncertainty_table(inputs: ReportInputs, w: _Writer, task: str) -> str:
    """The non-inferiority bounds with and without the validation items' sampling variance, side by side."""
    table = _task_table(inputs, "noninferiority_items", task, fit=None)
    if table is None:
        return (
            "No per-item predictions were analysed, so every interval here is about these validation items (seeds "
            "only); item uncertainty needs `--predictions` or the study database."
        )
    return w.table(
        present(
            sorted_cells(table),
            {
                "train_size": "train size",
                "frozen_layers": "frozen",
                "estimate": "difference",
                "lower_seed": "lower (seeds)",
                "noninferior_seed": "non-inferior (seeds)",
                "se_item": "SE items",
                "item_share": "item share of variance",
                "lower": "lower (seeds + items)",
                "noninferior": "non-inferior (seeds + items)",
            },
        ),
        f"{task}-noninferiority-items",
        f"{task}: one-sided lower bounds of the non-inferiority sequence, seed-only (about these validation items: "
        "the answer uses them) and with the items' sampling variance added (about the task's items), from the "
        "per-item predictions by a two-way seed × item decomposition.",
    )


def _variance_section(inputs: ReportInputs, w: _Writer) -> str:
    parts = []
    for task in inputs.analysis.settings["tasks"]:
        head = _heading(inputs, task)
        metric = text.metric_name(inputs, task)
        body = []
        spread = _task_table(inputs, "seed_spread", task, fit=None)
        if spread is not None and spread["std"].notna().any():
            body.append(
                w.figure(
                    F.spread_figure(spread, metric),
                    f"{task}-seed-sd",
                    f"{task}: standard deviation over seeds of each cell, in points, with chi-square 95% intervals.",
                )
            )
        else:
            body.append("No seed spread: every cell has fewer than two runs.")
        rates = _task_table(inputs, "failure_rates", task, fit=None)
        if rates is not None:
            body.append(
                w.figure(
                    F.failure_figure(rates),
                    f"{task}-failures",
                    f"{task}: share of failed runs per cell with Wilson 95% intervals ({int(rates['n_failed'].sum())} "
                    f"of {int(rates['n'].sum())} runs failed).",
                )
            )
        summary = _task_table(inputs, "failure_summary", task, fit=None)
        if summary is not None and len(summary):
            checkpoint = str(summary["checkpoint"].iloc[0])
            body.append(
                w.table(
                    present(
                        summary,
                        {
                            "train_size": "train size",
                            "frozen_layers": "frozen",
                            "n": "runs",
                            "n_failed": "failed",
                            "p_fail": "P(fail)",
                            "ci_low": "CI low",
                            "ci_high": "CI high",
                            "mean_healthy": "mean, healthy runs",
                            "mean_all": "mean, all runs",
                        },
                        {
                            "n": fmt_num(0),
                            "n_failed": fmt_num(0),
                            "p_fail": fmt_num(2),
                            "ci_low": fmt_num(2),
                            "ci_high": fmt_num(2),
                        },
                    ),
                    f"{task}-failure-summary",
                    f"{task}: failure in two parts. A run fails when the `{checkpoint}` checkpoint (the one the "
                    "analysed metric scores) is not shown to beat the majority class (one-sided exact binomial "
                    "test, 5%); P(fail) with a Wilson 95% interval, then the mean score of the healthy runs and of "
                    "all runs.",
                )
            )
        two_part = _task_table(inputs, "two_part_contrasts", task, fit=None)
        if two_part is not None and len(two_part):
            body.append(
                w.table(
                    present(
                        sorted_cells(two_part),
                        {
                            "train_size": "train size",
                            "frozen_layers": "frozen",
                            "estimate": "difference",
                            "ci_low": "CI low",
                            "ci_high": "CI high",
                            "healthy_difference": "difference, healthy",
                            "p_fail": "P(fail)",
                            "p_fail_reference": "P(fail), reference",
                        },
                        {"p_fail": fmt_num(3), "p_fail_reference": fmt_num(3)},
                    ),
                    f"{task}-two-part",
                    f"{task}: the difference from the reference in expected score, failures included, in two parts: "
                    "P(fail) from a Firth logistic model with frozen-level and train-size effects and a per-level "
                    "slope in log2(size) (it borrows the failure rate across cells, which 5 seeds per cell cannot "
                    "give), times the healthy "
                    "runs' mixed model; 95% intervals by the delta method.",
                )
            )
        test = _task_table(inputs, "spread_test", task, fit=None)
        if test is not None:
            body.append(
                w.table(
                    present(
                        test,
                        {
                            "train_size": "train size",
                            "statistic": "F",
                            "df_between": "df1",
                            "df_within": "df2",
                            "p_val": "p",
                            "p_holm": "p (Holm)",
                            "n_groups": "levels",
                        },
                        {"df_between": fmt_num(0), "df_within": fmt_num(0), "n_groups": fmt_num(0)},
                    ),
                    f"{task}-brown-forsythe",
                    f"{task}: Brown–Forsythe test that the seed spread differs across frozen levels, per train size.",
                )
            )
        else:
            body.append(f"No Brown–Forsythe test: {_why_missing(inputs, task, 'spread_test')}.")
        parts.append(head + "\n\n".join(body))
    return "\n\n".join(parts)


def _lee_section(inputs: ReportInputs, w: _Writer) -> str:
    parts = []
    for task in inputs.analysis.settings["tasks"]:
        head = _heading(inputs, task)
        relative = _task_table(inputs, "relative_scores", task, fit=None)
        operating = _task_table(inputs, "operating_point", task, fit=None)
        if relative is None or operating is None:
            parts.append(head + f"Not computed: {_why_missing(inputs, task, 'relative_scores')}.")
            continue
        threshold = float(operating["threshold"].iloc[0])
        shown = operating.copy()
        body = []
        tests = _task_table(inputs, "lee_tests", task, fit=None)
        if tests is not None and len(tests):
            body.append(
                w.table(
                    present(
                        tests,
                        {
                            "train_size": "train size",
                            "frozen_layers": "frozen",
                            "ratio_estimate": "ratio",
                            "ratio_ci_low": "Fieller low",
                            "ratio_ci_high": "Fieller high",
                            "lower": "lower bound of μₖ − 0.9μ₀",
                            "p_val": "p",
                            "tested": "tested",
                            "reaches": "reaches 90%",
                        },
                        {"ratio_estimate": fmt_num(3), "ratio_ci_low": fmt_num(3), "ratio_ci_high": fmt_num(3)},
                    ),
                    f"{task}-lee-tests",
                    f"{task}: Lee et al.'s criterion as a test: μₖ − 0.9·μ₀ ≥ 0, one-sided, in fixed sequence from "
                    "shallow to deep (a depth is 'tested' only when every shallower one reached 90%); the ratio "
                    "μₖ/μ₀ with its Fieller 90% interval. This is the answer; the bootstrap below is a display.",
                )
            )
        body += [
            w.figure(
                F.lee_figure(relative, operating, threshold),
                f"{task}-relative",
                f"{task}: quality relative to full fine-tuning (0 = majority baseline, 1 = full) against trainable "
                f"encoder layers, bootstrap 95% intervals over seeds; stars: fewest layers reaching {threshold:.0%}.",
            ),
            w.table(
                present(
                    shown,
                    {
                        "train_size": "train size",
                        "trainable_layers": "trainable layers",
                        "frozen_layers": "frozen",
                        "ci_low": "CI low",
                        "ci_high": "CI high",
                        "p_reached": "bootstrap share reaching it",
                    },
                    {"ci_low": fmt_num(0), "ci_high": fmt_num(0), "p_reached": fmt_num(2)},
                ),
                f"{task}-operating-point",
                f"{task}: the {threshold:.0%} operating point: fewest trainable layers whose mean reaches "
                f"{threshold:.0%} of full fine-tuning's quality, with its bootstrap 95% interval (a percentile "
                "interval over 5 seeds of a discrete choice: it under-covers; read the tests above instead).",
            ),
        ]
        parts.append(head + "\n\n".join(body))
    return "\n\n".join(parts)


def _compute_section(inputs: ReportInputs, w: _Writer) -> str:
    response = inputs.analysis.settings["response"]
    parts = []
    for task in inputs.analysis.settings["tasks"]:
        head = _heading(inputs, task)
        runs = inputs.task_runs(task)
        measured = (
            runs is not None
            and {"wall_seconds", "trainable_params"} <= set(runs.columns)
            and runs["wall_seconds"].notna().any()
            and runs["trainable_params"].notna().any()
        )
        if not measured:
            parts.append(
                head + "No compute measurements: the runs are not at hand or do not record wall time and "
                "trainable parameters (e.g. a simulated table)."
            )
            continue
        metric = text.metric_name(inputs, task)
        by_level = runs.groupby("frozen_layers").agg(
            runs=("wall_seconds", "size"),
            wall=("wall_seconds", "median"),
            total=("wall_seconds", "sum"),
            params=("trainable_params", "median"),
            score=(response, "mean"),
        )
        by_level = by_level.reindex(F.frozen_order(by_level.index)).reset_index()
        shown = present(
            by_level,
            {
                "frozen_layers": "frozen",
                "runs": "runs",
                "wall": "median wall time (s)",
                "total": "total (s)",
                "params": "trainable parameters",
                "score": f"mean {response}",
            },
            {"runs": fmt_num(0), "wall": fmt_num(1), "total": fmt_num(0), "params": lambda v: f"{float(v):,.0f}"},
        )
        parts.append(
            head
            + w.figure(
                F.compute_figure(runs, response, metric),
                f"{task}-compute",
                f"{task}: wall time per run and trainable parameters per frozen level, and {metric} against wall time.",
            )
            + "\n\n"
            + w.table(shown, f"{task}-compute", f"{task}: cost per frozen level (all train sizes together).")
        )
    return "\n\n".join(parts)


def _reference_section(inputs: ReportInputs, w: _Writer) -> str:
    parts = []
    comparison = inputs.analysis.tables.get("reference_comparison")
    for task in inputs.analysis.settings["tasks"]:
        head = _heading(inputs, task)
        part = _task_table(inputs, "reference_comparison", task, fit=None)
        if part is None or not part["in_reference"].any():
            if part is not None and part["note"].notna().any():
                reason = str(part["note"].dropna().iloc[0])
            elif comparison is None:
                reason = _why_missing(inputs, task, "reference_comparison")
            else:
                reason = "the published figures do not cover this task's cells"
            parts.append(head + f"No comparison with the published figures for {task}: {reason}.")
            continue
        metric = text.metric_name(inputs, task)
        both = sorted_cells(part[part["in_reference"]])
        notes = sorted({str(n) for n in both["note"].dropna() if str(n)})
        body = [
            w.figure(
                F.reference_figure(both, metric, REFERENCE_NAME),
                f"{task}-reference",
                f"{task}: cell mean ± SD of `best_dev` against frozen layers, this study (left) and the "
                f"{REFERENCE_NAME} (right), same axes. Both are the best validation score during training, the "
                "blog's number, biased upward by checkpoint selection on the scoring data.",
            ),
            w.table(
                present(
                    both,
                    {
                        "train_size": "train size",
                        "frozen_layers": "frozen",
                        "mean": "mean",
                        "ref_mean": "blog mean",
                        "median": "50%",
                        "ref_median": "blog 50%",
                        "std": "std",
                        "ref_std": "blog std",
                        "min": "min",
                        "ref_min": "blog min",
                        "max": "max",
                        "ref_max": "blog max",
                    },
                ),
                f"{task}-reference",
                f"{task}: our statistics per cell beside the {REFERENCE_NAME}'s.",
            ),
        ]
        if notes:
            body.append("Notes from the comparison: " + "; ".join(notes) + ".")
        parts.append(head + "\n\n".join(body))
    return "\n\n".join(parts)


def _model_section(inputs: ReportInputs, w: _Writer) -> str:
    settings = inputs.analysis.settings
    parts = [text.model_assumptions(settings)]
    for task in settings["tasks"]:
        head = f"### {task}\n\n"
        body = []
        fixed = _task_table(inputs, "fixed_effects", task)
        if fixed is not None:
            stat = [c for c in ("z", "t") if c in fixed.columns]
            body.append(
                w.table(
                    present(
                        fixed,
                        {
                            "term": "term",
                            "estimate": "estimate",
                            "se": "SE",
                            "ci_low": "CI low",
                            "ci_high": "CI high",
                            **{c: c for c in stat},
                            "p_val": "p",
                        },
                        {"term": _term},
                    ),
                    f"{task}-fixed-effects",
                    f"{task}: fixed effects of the {settings['model']} model (all runs).",
                )
            )
        components = _task_table(inputs, "variance_components", task)
        if components is not None:
            body.append(
                w.table(
                    present(
                        components,
                        {"component": "component", "variance": "variance", "sd": "SD"},
                        {"component": str, "variance": fmt_num(6), "sd": fmt_num(4)},
                    ),
                    f"{task}-variance-components",
                    f"{task}: variance components (all runs).",
                )
            )
        diagnostics = _task_table(inputs, "diagnostics", task, fit=None)
        if diagnostics is not None:
            for row in diagnostics.to_dict("records"):
                flags = [name for name in ("boundary", "singular") if bool(row.get(name))]
                body.append(
                    f"**Fit `{row.get('fit')}`:** {row.get('method', '')} via {row.get('optimizer', '')}, "
                    f"{int(row.get('n_obs') or 0)} runs, {'converged' if row.get('converged') else '**not converged**'}"
                    + (f", **{' and '.join(flags)} fit**" if flags else "")
                    + (f", seed ICC {row['icc_seed']:.2f}" if pd.notna(row.get("icc_seed")) else "")
                    + "."
                )
        ols = inputs.ols_contrasts
        model_contrasts = _task_table(inputs, "contrasts", task)
        if ols is not None and (ols["task"] == task).any() and model_contrasts is not None:
            merged = sorted_cells(
                model_contrasts.merge(
                    ols[ols["task"] == task], on=["train_size", "frozen_layers"], suffixes=("", "_ols")
                )
            )
            body.append(
                w.table(
                    present(
                        merged,
                        {
                            "train_size": "train size",
                            "frozen_layers": "frozen",
                            "estimate": f"{settings['model']}",
                            "ci_low": "CI low",
                            "ci_high": "CI high",
                            "estimate_ols": "OLS",
                            "ci_low_ols": "OLS CI low",
                            "ci_high_ols": "OLS CI high",
                        },
                    ),
                    f"{task}-ols-check",
                    f"{task}: cross-check of the contrasts: the {settings['model']} model beside OLS with "
                    "seed-clustered standard errors.",
                )
            )
        elif settings.get("model") != "ols":
            body.append("No OLS cross-check: it needs the single runs (give --storage or --results).")
        parts.append(head + "\n\n".join(body))
    warnings = inputs.analysis.warnings
    if warnings:
        parts.append("### Warnings from the analysis\n\n" + "\n".join(f"- {_md_escape(x)}" for x in warnings))
    else:
        parts.append("The analysis raised no warnings.")
    return "\n\n".join(parts)


def _p_text(value: object) -> str:
    """``= 0.012`` or ``< 0.001``, to follow a "p" in a sentence."""
    text = fmt_p(value)
    return text if text.startswith("<") else f"= {text}"


def _term(name: object) -> str:
    """A patsy term as a reader writes it: ``frozen_layers[T.3]:train_size[T.100]`` -> ``frozen 3 × size 100``."""
    text = str(name)
    text = re.sub(r"C\((\w+)[^)]*\)", r"\1", text)
    text = re.sub(r"frozen_layers\[T\.(-?\d+)\]", lambda m: f"frozen {F.frozen_label(int(m.group(1)))}", text)
    text = re.sub(r"train_size\[T\.(\d+)\]", r"size \1", text)
    return text.replace(":", " × ")


def _md_escape(value: str) -> str:
    return re.sub(r"([\\`*_\[\]<>@#])", r"\\\1", value)


def _appendix(inputs: ReportInputs, w: _Writer) -> str:
    response = inputs.analysis.settings["response"]
    parts = []
    for task in inputs.analysis.settings["tasks"]:
        summary = _task_table(inputs, "cell_summary", task, fit=None)
        if summary is None:
            parts.append(f"No cell summary for {task}.")
            continue
        parts.append(
            w.table(
                blog_table(summary),
                f"{task}-appendix",
                f"{task}: {text.metric_name(inputs, task)} ({response}) per cell in the blog's format; bold: the best "
                "value of each column within a train size (highest, lowest for std).",
            )
        )
    return "\n\n".join(parts)


def _notes(inputs: ReportInputs) -> str:
    if not inputs.notes:
        return ""
    return "::: {.callout-note}\n" + "\n\n".join(inputs.notes) + "\n:::"


def write_document(inputs: ReportInputs, out: Path, renderer: str, step: Callable[[str], None] | None = None) -> Path:
    """Write ``report.qmd`` and its figures, tables and template files into ``out``; returns the .qmd path."""
    out.mkdir(parents=True, exist_ok=True)
    template_dir = bundled_path("report")
    for name in TEMPLATE_FILES:
        shutil.copyfile(template_dir / name, out / name)
    w = _Writer(out, step or (lambda _: None))
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
        "subtitle": f"{model or 'unknown model'} on {', '.join(settings['tasks'])}: {settings['response']}, "
        f"{settings['n_runs']} runs, {settings['model']} model",
        "date": now.strftime("%Y-%m-%d"),
        "notes": _notes(inputs),
        "answer": text.answer(inputs),
        "methods": text.methods(inputs),
        "blog_figures": _blog_section(inputs, w),
        "emmeans": _emmeans_section(inputs, w),
        "contrasts": _contrasts_section(inputs, w),
        "strategies": strategy_section(inputs, w),
        "shared_encoder": shared_encoder_section(inputs, w),
        "pair_encoding": pair_encoding_section(inputs, w),
        "variance": _variance_section(inputs, w),
        "lee": _lee_section(inputs, w),
        "compute": _compute_section(inputs, w),
        "reference": _reference_section(inputs, w),
        "model_details": _model_section(inputs, w),
        "appendix": _appendix(inputs, w),
        "colophon": text.colophon(inputs, renderer, now.strftime("%Y-%m-%d %H:%M %Z")),
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

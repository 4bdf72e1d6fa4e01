"""The report's "Model details" section and appendix: the fitted terms, variance components, diagnostics and
warnings, and the per-cell tables, for readers who check the statistics rather than the answer.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pandas as pd

from freezestats.analysis.summary import fmt_p
from freezestats.report import figures as F
from freezestats.report import methods
from freezestats.report.inputs import ReportInputs
from freezestats.report.tables import blog_table, fmt_num, present, sorted_cells

if TYPE_CHECKING:
    pass
from freezestats.report.writer import Writer, task_table

__all__ = ["appendix", "md_escape", "model_section", "p_text", "term_label"]


def model_section(inputs: ReportInputs, w: Writer) -> str:
    """The model's assumptions, then per task its fixed effects, variances, fit diagnostics and the OLS check."""
    settings = inputs.analysis.settings
    parts = [methods.model_assumptions(settings)]
    for task in settings["tasks"]:
        body = [
            _fixed_effects_part(inputs, w, task),
            _variance_components_part(inputs, w, task),
            *_diagnostics_lines(inputs, task),
            _ols_check_part(inputs, w, task),
        ]
        parts.append(f"### {task}\n\n" + "\n\n".join(part for part in body if part))
    warnings = inputs.analysis.warnings
    if warnings:
        parts.append("### Warnings from the analysis\n\n" + "\n".join(f"- {md_escape(x)}" for x in warnings))
    else:
        parts.append("The analysis raised no warnings.")
    return "\n\n".join(parts)


def _fixed_effects_part(inputs: ReportInputs, w: Writer, task: str) -> str | None:
    fixed = task_table(inputs, "fixed_effects", task)
    if fixed is None:
        return None
    stat = [c for c in ("z", "t") if c in fixed.columns]
    names = {
        "term": "term",
        "estimate": "estimate",
        "se": "SE",
        "ci_low": "CI low",
        "ci_high": "CI high",
        **{c: c for c in stat},
        "p_val": "p",
    }
    return w.table(
        present(fixed, names, {"term": term_label}),
        f"{task}-fixed-effects",
        f"{task}: fixed effects of the {inputs.analysis.settings['model']} model (all runs).",
    )


def _variance_components_part(inputs: ReportInputs, w: Writer, task: str) -> str | None:
    components = task_table(inputs, "variance_components", task)
    if components is None:
        return None
    return w.table(
        present(
            components,
            {"component": "component", "variance": "variance", "sd": "SD"},
            {"component": str, "variance": fmt_num(6), "sd": fmt_num(4)},
        ),
        f"{task}-variance-components",
        f"{task}: variance components (all runs).",
    )


def _diagnostics_lines(inputs: ReportInputs, task: str) -> list[str]:
    """One line per fit: method, optimiser, runs, convergence, boundary or singular, the seed ICC."""
    diagnostics = task_table(inputs, "diagnostics", task, fit=None)
    if diagnostics is None:
        return []
    lines = []
    for row in diagnostics.to_dict("records"):
        flags = [name for name in ("boundary", "singular") if bool(row.get(name))]
        lines.append(
            f"**Fit `{row.get('fit')}`:** {row.get('method', '')} via {row.get('optimizer', '')}, "
            f"{int(row.get('n_obs') or 0)} runs, {'converged' if row.get('converged') else '**not converged**'}"
            + (f", **{' and '.join(flags)} fit**" if flags else "")
            + (f", seed ICC {row['icc_seed']:.2f}" if pd.notna(row.get("icc_seed")) else "")
            + "."
        )
    return lines


def _ols_check_part(inputs: ReportInputs, w: Writer, task: str) -> str | None:
    """The model's contrasts beside OLS with seed-clustered SEs, when the single runs are at hand."""
    settings = inputs.analysis.settings
    ols = inputs.ols_contrasts
    model_contrasts = task_table(inputs, "contrasts", task)
    if ols is None or not (ols["task"] == task).any() or model_contrasts is None:
        if settings.get("model") != "ols":
            return "No OLS cross-check: it needs the single runs (give --storage or --results)."
        return None
    merged = sorted_cells(
        model_contrasts.merge(ols[ols["task"] == task], on=["train_size", "frozen_layers"], suffixes=("", "_ols"))
    )
    names = {
        "train_size": "train size",
        "frozen_layers": "frozen",
        "estimate": f"{settings['model']}",
        "ci_low": "CI low",
        "ci_high": "CI high",
        "estimate_ols": "OLS",
        "ci_low_ols": "OLS CI low",
        "ci_high_ols": "OLS CI high",
    }
    return w.table(
        present(merged, names),
        f"{task}-ols-check",
        f"{task}: cross-check of the contrasts: the {settings['model']} model beside OLS with "
        "seed-clustered standard errors.",
    )


def p_text(value: object) -> str:
    """``= 0.012`` or ``< 0.001``, to follow a "p" in a sentence."""
    text = fmt_p(value)
    return text if text.startswith("<") else f"= {text}"


def term_label(name: object) -> str:
    """A patsy term as a reader writes it: ``frozen_layers[T.3]:train_size[T.100]`` -> ``frozen 3 × size 100``."""
    text = str(name)
    text = re.sub(r"C\((\w+)[^)]*\)", r"\1", text)
    text = re.sub(r"frozen_layers\[T\.(-?\d+)\]", lambda m: f"frozen {F.frozen_label(int(m.group(1)))}", text)
    text = re.sub(r"train_size\[T\.(\d+)\]", r"size \1", text)
    return text.replace(":", " × ")


def md_escape(value: str) -> str:
    return re.sub(r"([\\`*_\[\]<>@#])", r"\\\1", value)


def appendix(inputs: ReportInputs, w: Writer) -> str:
    parts = []
    for task in inputs.analysis.settings["tasks"]:
        response = inputs.response_of(task)
        summary = task_table(inputs, "cell_summary", task, fit=None)
        if summary is None:
            parts.append(f"No cell summary for {task}.")
            continue
        parts.append(
            w.table(
                blog_table(summary),
                f"{task}-appendix",
                f"{task}: {inputs.metric_of(task)} ({response}) per cell in the blog's format; bold: the best "
                "value of each column within a train size (highest, lowest for std).",
            )
        )
    return "\n\n".join(parts)

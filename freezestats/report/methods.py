"""The report's Methods section and colophon, written from the stored spec, the analysis settings and the runs.

Apart from :mod:`freezestats.report.text` (the answer) because Methods describes what was run and how it was
analysed, paragraph by paragraph, and the colophon what made the report; neither reads the result tables.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
from typing import Any

import pandas as pd

from freezestats import __version__
from freezestats.analysis.result import SECOND_MODE
from freezestats.analysis.summary import runs_counted
from freezestats.report.figures import frozen_label
from freezestats.report.inputs import ReportInputs
from freezestats.report.sections.pair_encoding import pair_encoding_methods
from freezestats.report.sections.shared_encoder import group_methods
from freezestats.report.tables import count_range
from freezestats.report.text import FAILED_DEFINITION, frozen_dropout, n_layers
from freezestats.stats.items.task_level import POPULATIONS

__all__ = ["colophon", "methods", "model_assumptions"]


_VARIANCE_TEXT = {
    "per_size": (
        "one residual variance per train size, a seed intercept shared by every cell of the task and a "
        "seed-by-size intercept (in R: `nlme::lme(y ~ frozen * size, random = ~1 | seed/size, weights = "
        "varIdent(~1 | size))`), fitted by REML. Why: the seed-to-seed spread of fine-tuning runs shrinks by an "
        "order of magnitude as the train subset grows (the blog's median SST-2 cell SD is 0.071 at 50 examples "
        "and 0.0044 at 1000), so one pooled variance makes small-n intervals too narrow and large-n intervals "
        "several times too wide. Each variance is floored at one evaluation item, (1/n_eval)^2, so cells whose "
        "runs all give the same score (collapsed runs) do not break the fit; random terms estimated at zero are "
        "dropped, finest first. Checked: agrees with nlme and emmeans to 1e-6 (tests/data/nlme_reference.R), and "
        "its 95% intervals were checked for coverage on simulated blog-shaped studies (bench/coverage.py)"
    ),
    "per_cell": (
        "one residual variance per (frozen, size) cell, with seed and seed-by-size intercepts, fitted by REML; "
        "each cell's variance rests on few seeds, so its intervals are wide"
    ),
    "pooled": (
        "one residual variance for all runs and a seed intercept (`lme4::lmer(y ~ frozen * size + (1 | seed))`), "
        "fitted by REML. It assumes every cell spreads alike, which fine-tuning runs do not; use it to compare "
        "with earlier analyses only"
    ),
}


#: The failure part of a task-level two-part contrast in words, per ``--failure-rates``.
FAILURE_TEXT = {
    "pooled": "each failure rate's Wilson interval at its effective number of runs in a binomial GLMM of the two "
    "depths' runs at every size, joined by MOVER (`--failure-rates pooled`)",
    "pooled_joint": "the two failure rates drawn jointly from a binomial GLMM of the two depths' runs at every size, "
    "its level × size SD integrated out",
    "slope": "Firth's depth × log2-size logistic fit of the two depths' runs, profile intervals joined by MOVER "
    "(`--failure-rates slope`)",
}


def model_assumptions(settings: dict[str, Any]) -> str:
    """What the fitted model assumes, why, and how it was checked: the opening of the Model section."""
    model = settings.get("model")
    if model != "mixed":
        return f"The `{model}` model was fitted (see docs/analysis.md for its assumptions)."
    variance = settings.get("variance") or "per_size"
    two_part = sorted(task for task, source in (settings.get("answer_from") or {}).items() if source == "two_part")
    answer = (
        f" For {', '.join(two_part)} {SECOND_MODE} (a second mode, beyond any normal spread of the size's runs), "
        "which no normal model of a cell covers, so the non-inferiority answer there tests the two-part contrasts: "
        "the expected score (1 − P(fail)) × healthy mean + P(fail) × failed mean, with the healthy "
        "runs' mixed model (a variance per cell) and P(fail) from a binomial GLMM that pools levels, sizes and "
        "cells. In simulated blog-shaped studies their 95% intervals covered 0.93–1.00 per contrast "
        "(`bench/coverage.py`; docs/analysis.md, *Coverage*)."
        if two_part
        else ""
    )
    return (
        f"**The model.** The linear mixed model of each task has a mean per (frozen, size) cell and "
        f"{_VARIANCE_TEXT.get(variance, variance)}. Contrasts and marginal means use t intervals with "
        "Satterthwaite degrees of freedom." + answer
    )


def _grid_values(inputs: ReportInputs, column: str) -> list[Any]:
    grid = (inputs.spec.get("grid") or {}).get(column)
    if grid:
        return list(grid)
    summary = inputs.analysis.tables.get("cell_summary")
    if summary is not None and column in summary.columns:
        return sorted(int(v) for v in summary[column].unique())
    return []


def _ran_as(inputs: ReportInputs, column: str) -> str:
    """What the runs recorded for a setting the spec may leave to the machine (``auto``)."""
    if inputs.runs is None or column not in inputs.runs.columns:
        return ""
    return " and ".join(sorted(str(v) for v in inputs.runs[column].dropna().unique()))


def methods(inputs: ReportInputs) -> str:
    """Methods from the stored spec: model, tasks, grid, protocol, the analysed metric, runs, failures.

    One paragraph per topic, each from its own function, and only those the study has (a learning-rate search, a
    non-inferiority answer, task groups, bi-encoded pairs)."""
    spec = inputs.spec
    paragraphs = [
        _model_paragraph(inputs),
        "**Tasks.** " + ", ".join(_task_phrase(inputs, t) for t in inputs.analysis.settings.get("tasks", [])) + ".",
        _grid_paragraph(inputs),
        *_training_paragraphs(inputs),
        _dropout_paragraph(inputs),
        _metric_paragraph(inputs.analysis.settings),
        _decision_paragraph(inputs),
        _answer_paragraph(inputs.analysis.settings),
        group_methods(spec),
        pair_encoding_methods(spec),
        _runs_paragraph(inputs),
    ]
    return "\n\n".join(part for part in paragraphs if part)


def _decision_paragraph(inputs: ReportInputs) -> str | None:
    """The decision's Methods (:data:`freezestats.analysis.decision.METHODS`), where the study has the table."""
    from freezestats.analysis.decision import METHODS

    return "**The decision.** " + METHODS if "decision" in inputs.analysis.tables else None


def _task_phrase(inputs: ReportInputs, task: str) -> str:
    """A task and its metric; a user's own task (``[[tasks]]``) also its kind, class names, sizes and carve."""
    defined = {t.get("name"): t for t in inputs.spec.get("task_definitions") or []}
    if task not in defined:
        return f"{task} (metric: {inputs.metric_of(task)})"
    data = (((inputs.study or {}).get("provenance") or {}).get("tasks") or {}).get(task) or {}
    parts = [f"metric: {inputs.metric_of(task)}", f"the user's own {defined[task].get('kind', 'task')} task"]
    if data.get("labels"):
        parts.append("classes " + ", ".join(map(str, data["labels"])))
    if "n_train" in data:
        split = " (carved from train, stratified)" if data.get("carved_validation") else ""
        parts.append(f"{data['n_train']} train / {data['n_validation']} validation rows{split}")
    if data.get("duplicates"):
        parts.append(f"{data['duplicates']} validation texts also in train, which inflates its scores")
    return f"{task} ({'; '.join(parts)})"


def _model_paragraph(inputs: ReportInputs) -> str:
    spec = inputs.spec
    model = (spec.get("model") or {}).get("name")
    if model is None and inputs.runs is not None and "model" in inputs.runs.columns:
        model = str(inputs.runs["model"].dropna().iloc[0]) if inputs.runs["model"].notna().any() else None
    layers = n_layers(inputs)
    freezing = (spec.get("model") or {}).get("strategy", "freeze")  # the stored spec keeps the key's old name
    return (
        f"**Model.** `{model or 'unknown'}`"
        + (f" ({layers} encoder layers)" if layers else "")
        + f", freezing rule `{freezing}`: frozen level −1 freezes the embeddings only (“emb.” on the axes), 0 nothing "
        "(full fine-tuning), k ≥ 1 the embeddings and the first k encoder layers."
    )


def _grid_paragraph(inputs: ReportInputs) -> str:
    seeds = _grid_values(inputs, "seeds")
    frozen = _grid_values(inputs, "frozen_layers")
    sizes = _grid_values(inputs, "train_sizes") or _grid_values(inputs, "train_size")
    draws = (inputs.spec.get("grid") or {}).get("subset_draws", 1)
    return (
        f"**Grid.** frozen layers {', '.join(frozen_label(int(k)) for k in frozen)}; train sizes "
        f"{', '.join(str(s) for s in sizes)}; "
        + (f"seeds {', '.join(str(s) for s in seeds)}; " if seeds else "")
        + f"{draws} nested training-subset draw{'s' if draws != 1 else ''} (stratified by label, 50 ⊂ 100 ⊂ …)."
    )


def _training_paragraphs(inputs: ReportInputs) -> list[str]:
    """The training protocol and, where there was one, the learning-rate search; none without a stored spec."""
    spec = inputs.spec
    training = spec.get("training") or {}
    if not training:
        return []
    ran = _ran_as(inputs, "precision")
    paragraphs = [
        f"**Training protocol.** {training.get('epochs')} epochs, batch size {training.get('batch_size')}, "
        f"AdamW with learning rate {training.get('learning_rate')} and weight decay "
        f"{training.get('weight_decay')}, "
        f"gradient clipping at {training.get('max_grad_norm')}, {training.get('warmup_epochs')} warm-up epoch(s) "
        f"then linear decay; evaluation on the whole validation set every {training.get('eval_every_epochs')} "
        f"epochs; inputs truncated to {training.get('max_length')} tokens; precision "
        f"`{training.get('precision')}`" + (f" (ran as {ran})" if ran else "") + ", "
        f"device `{training.get('device')}`."
    ]
    lr = spec.get("lr_search") or {}
    if lr.get("mode", "none") != "none":
        paragraphs.append(
            f"**Learning-rate search.** mode `{lr.get('mode')}` over {lr.get('rates')}, selected on "
            f"`{lr.get('select_metric')}`; the grid uses the selected rate."
        )
    return paragraphs


def _dropout_paragraph(inputs: ReportInputs) -> str:
    """Whether frozen layers kept dropout: a warning when they did not, since that is not the blog's protocol."""
    dropout = frozen_dropout(inputs.spec)
    if dropout == "off":
        return (
            '::: {.callout-warning}\n**Frozen layers ran without dropout** (`training.frozen_dropout = "off"`): their '
            "outputs were cached, which changes the experiment. This is not the blog's protocol, in which frozen "
            "layers keep dropout on; do not compare these numbers with the published ones as if they were.\n:::"
        )
    if "frozen_dropout" in (inputs.spec.get("training") or {}):
        origin = ""
    elif inputs.study is None:
        origin = " (not recorded: the spec is not at hand; assumed the default)"
    else:
        origin = " (not in the stored spec; the default)"
    return (
        f'**Dropout in frozen layers.** `training.frozen_dropout = "{dropout}"`'
        + origin
        + ": frozen layers keep dropout on, as in the blog's protocol."
    )


def _metric_paragraph(settings: dict[str, Any]) -> str:
    response = settings.get("response", "best_dev")
    caveat = (
        " **Selection bias:** `best_dev` picks the best checkpoint on the same validation set that scores it, so it "
        "is biased upwards, most for the noisiest (small, heavily frozen) cells; re-run with `--metric heldout` or "
        "`final_dev` for unbiased numbers."
        if response == "best_dev"
        else ""
    )
    own = [
        f"{task} on {metric} at its last checkpoint (`final_dev`): its runs chose their best checkpoints on "
        f"{settings.get('selected_on', {}).get(task, 'another metric')}, so it was scored again from their stored "
        "predictions"
        for task, metric in settings.get("metric_of", {}).items()
        if settings.get("response_of", {}).get(task) == "final_dev"
    ]
    return (
        f"**Analysed metric.** `{response}`: {settings.get('response_note', '')}.{caveat}"
        + (f" Judged on its own metric: {'; '.join(own)}." if own else "")
        + f" Model: `{settings.get('model')}`; reference level {frozen_label(int(settings.get('reference', 0)))}; "
        f"superiority contrasts adjusted by `{settings.get('adjust')}` within each train size"
        + (f"; equivalence margin ±{settings['margin']}" if settings.get("margin") else "")
        + "."
    )


def _answer_paragraph(settings: dict[str, Any]) -> str | None:
    """How the answer was tested (margins, population, procedure and family, from the settings the analysis
    recorded); None when the analysis gave no margins."""
    margins = settings.get("margins") or {}
    if not margins:
        return None
    shown = ", ".join(f"{task} {value:g}" for task, value in margins.items())
    head = (
        f"**The answer.** Non-inferiority against the reference with margin {shown} (default: 0.01 for accuracy "
        "and F1, 0.02 for MCC and correlations). "
    )
    if settings.get("uncertainty") == "task":
        procedures = set((settings.get("answer_procedure") or {}).values())
        populations = settings.get("answer_population") or {}
        about = "; ".join(f"{task}: {POPULATIONS[p]}" for task, p in populations.items())
        return head + (
            "Each depth is compared with the reference on its own runs, paired by seed (and by evaluation item "
            "where per-item predictions are stored: the contrast's variance is the per-seed differences' plus the "
            "items' part, Satterthwaite df), so no variance is borrowed from other depths. Where a run of the depth "
            "or the reference failed, the contrast is two-part (the healthy runs' contrast plus each cell's P(fail) "
            "times its failed-to-healthy gap), the failure part's interval from "
            # an analysis saved before ``failure_rates`` was a setting read it by Wilson-MOVER ("pooled")
            f"{FAILURE_TEXT.get(settings.get('failure_rates') or 'pooled', '?')}; each non-inferiority test reads "
            "that interval's lower side at the test's own level, not the 95% side scaled as if it were normal. "
            "The intervals speak of "
            f"{about}. The family is the task, every train size and depth at once, familywise error 5%: "
            f"{'; '.join(sorted(p for p in procedures if p))}. A size at which the reference is not shown to beat "
            "the majority baseline (one test per size, Bonferroni over sizes) gets no cost statement. Lee et al.'s "
            "90% criterion is tested as μₖ − 0.9·μ₀ ≥ 0 in fixed sequence on the model's contrasts."
        )
    family = (
        "all train sizes together (Bonferroni, α/number of sizes)"
        if settings.get("adjust_across") == "sizes"
        else "each train size separately"
    )
    return head + (
        "One-sided 95% lower bounds from the model above (seeds only: they speak of "
        f"{POPULATIONS['evaluation_set']}), tested in a fixed sequence from shallow to deep freezing and stopped "
        f"at the first depth that fails (Hsu & Berger 1999; no further adjustment); the family is {family}. A size "
        "at which the reference is not shown to beat the majority baseline gets no cost statement. Lee et al.'s "
        "90% criterion is tested the same way, as μₖ − 0.9·μ₀ ≥ 0."
    )


def _runs_paragraph(inputs: ReportInputs) -> str | None:
    summary = inputs.analysis.tables.get("cell_summary")
    if summary is None or not len(summary):
        return None
    return (
        f"**Runs.** {runs_counted(inputs.analysis.settings)}; the freeze model's {len(summary)} cells have "
        f"{count_range(summary['n'], 'runs')} each; {FAILED_DEFINITION}."
    )


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def colophon(inputs: ReportInputs, renderer: str, created: str) -> str:
    """Versions, hardware and renderer: what made this report and what ran the study."""
    libraries = ["pandas", "numpy", "scipy", "statsmodels", "matplotlib", "optuna", "pypandoc-binary", "typst"]
    lines = [
        f"Built by freezestats {__version__} on {created} with Python {platform.python_version()}; rendered with "
        f"**{renderer}**.",
        "",
        "Report libraries: " + ", ".join(f"{lib} {_version(lib)}" for lib in libraries) + ".",
        "",
        f"Report machine: {platform.platform()}, {os.cpu_count()} CPU cores.",
    ]
    provenance = (inputs.study or {}).get("provenance") or {}
    if provenance:
        versions = provenance.get("versions") or {}
        lines += [
            "",
            f"Study: created {provenance.get('created', 'unknown')}, spec hash "
            f"`{str((inputs.study or {}).get('spec_hash') or provenance.get('spec_hash') or '')[:12]}`, git "
            f"`{str(provenance.get('git_hash') or 'unknown')[:12]}`, on {provenance.get('platform', 'unknown')}; "
            + ", ".join(f"{k} {v}" for k, v in versions.items())
            + ".",
        ]
    if inputs.runs is not None and "device" in inputs.runs.columns:
        devices = sorted(str(d) for d in inputs.runs["device"].dropna().unique())
        precisions = sorted(str(p) for p in inputs.runs.get("precision", pd.Series(dtype=str)).dropna().unique())
        if devices:
            lines += [
                "",
                f"Runs trained on: {', '.join(devices)}" + (f" ({', '.join(precisions)})" if precisions else "") + ".",
            ]
    return "\n".join(lines)

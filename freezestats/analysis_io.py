"""What ``analyze`` produces and how it is kept: the :class:`Analysis`, its folder on disk, its short summary.

Apart from :mod:`freezestats.analysis` (which computes) so that the report and the CLI can read and print an
analysis without the models: ``write_analysis`` stores every table as parquet + CSV with ``analysis.json``,
``read_analysis`` reads the folder back, ``summary_lines`` is what ``freezestats analyze`` prints.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from freezestats.exceptions import ModelFitError

__all__ = [
    "RESULTS_FILE",
    "SECOND_MODE",
    "STUDY_FILE",
    "Analysis",
    "read_analysis",
    "runs_counted",
    "summary_lines",
    "write_analysis",
]

#: Why an answer comes from the two-part contrasts (``settings["answer_from"] == "two_part"``), in the words the
#: summary, the report and the warnings use (``stats.two_part.failures_within_cells`` is the test).
SECOND_MODE = "some cells mix healthy runs with failed runs far below them"

RESULTS_FILE = "results.parquet"
STUDY_FILE = "study.json"


@dataclass
class Analysis:
    """Named tables (all tasks stacked, with a ``task`` column), warnings, and the settings used."""

    settings: dict[str, Any]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def add(self, name: str, task: str, table: pd.DataFrame, **labels: str) -> None:
        table = table.copy()
        for column, value in {"task": task, **labels}.items():
            if column not in table.columns:
                table.insert(0, column, value)
        self.tables[name] = pd.concat([self.tables[name], table], ignore_index=True) if name in self.tables else table


def write_analysis(
    analysis: Analysis,
    out_dir: str | Path,
    *,
    results: pd.DataFrame | None = None,
    study: dict[str, Any] | None = None,
) -> Path:
    """Every table as ``<name>.parquet`` and ``<name>.csv``, plus ``analysis.json``; returns the JSON path.

    ``results`` (the analysed runs, as ``results.parquet``) and ``study`` (:func:`load_study_record`, as
    ``study.json``) are kept beside the tables when given, so that ``freezestats report --analysis DIR`` can
    draw one dot per run and describe the protocol without the study database.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, table in analysis.tables.items():
        table.to_parquet(out / f"{name}.parquet", index=False)
        table.to_csv(out / f"{name}.csv", index=False)
    if results is not None:
        results.to_parquet(out / RESULTS_FILE, index=False)
    if study is not None:
        (out / STUDY_FILE).write_text(json.dumps(study, indent=1, default=str))
    document = {
        "settings": analysis.settings,
        "warnings": analysis.warnings,
        "tables": {name: json.loads(t.to_json(orient="records")) for name, t in analysis.tables.items()},
    }
    path = out / "analysis.json"
    path.write_text(json.dumps(document, indent=1, default=str))
    return path


def read_analysis(in_dir: str | Path) -> Analysis:
    """The :class:`Analysis` that :func:`write_analysis` stored in ``in_dir`` (tables from the parquet files).

    Raises ModelFitError naming the folder when it is missing, has no ``analysis.json``, or holds no table,
    because a report of an empty analysis would be a page of "not computed".
    """
    folder = Path(in_dir)
    if not folder.is_dir():
        raise ModelFitError(f"No analysis folder at {str(folder)!r}; write one with `freezestats analyze -o DIR`.")
    path = folder / "analysis.json"
    if not path.is_file():
        raise ModelFitError(
            f"{folder} holds no analysis.json, so it is not an analysis folder; write one with "
            f"`freezestats analyze -o {folder}`, or give --storage / --results."
        )
    try:
        document = json.loads(path.read_text())
        settings, warnings, names = document["settings"], list(document["warnings"]), list(document["tables"])
    except (ValueError, KeyError, TypeError) as err:
        raise ModelFitError(f"{path} is not an analysis.json written by freezestats analyze: {err}") from err
    tables = {}
    for name in names:
        table_path = folder / f"{name}.parquet"
        if not table_path.is_file():
            raise ModelFitError(f"{path} lists table {name!r}, but {table_path.name} is missing from {folder}.")
        tables[name] = pd.read_parquet(table_path)
    if not tables:
        raise ModelFitError(f"The analysis in {folder} has no tables; run freezestats analyze again.")
    return Analysis(settings=settings, tables=tables, warnings=warnings)


def _test_text(row: Any) -> str:
    """An F test as F(num, den) = f, p; a likelihood-ratio test (no F) as LR = x, df, p."""
    if pd.notna(getattr(row, "f_stat", float("nan"))):
        return f"F({int(row.num_df)}, {row.den_df:.1f}) = {row.f_stat:.2f}, p={row.p_val:.3g} (Satterthwaite df)"
    return f"LR={row.lr_stat:.2f}, df={int(row.df)}, p={row.p_val:.3g}"


def runs_counted(settings: dict[str, Any]) -> str:
    """The runs counted, e.g. "350 runs", or "54 cross-encoded runs alone (and 54 in groups, 30 bi-encoded)".

    ``n_runs`` counts the rows of the freeze model only; a multi-task study's group rows and its bi-encoded rows
    are analysed in their own tables, and a count that left them out unsaid would understate the study.
    """
    grouped, bi = settings.get("n_rows_grouped") or 0, settings.get("n_rows_bi") or 0
    kind = ("cross-encoded " if bi else "") + "runs" + (" alone" if grouped else "")
    aside = [f"{grouped} in groups"] * bool(grouped) + [f"{bi} bi-encoded"] * bool(bi)
    return f"{settings['n_runs']} {kind}" + (f" (and {', '.join(aside)})" if aside else "")


def summary_lines(analysis: Analysis) -> list[str]:
    """A short human summary: the contrasts against full fine-tuning and what the study says."""
    s = analysis.settings
    lines = [
        f"freezestats analyze: {s['model']} model of {s['response']} ({runs_counted(s)}); "
        f"{s['response']}: {s['response_note']}."
    ]
    contrasts = analysis.tables.get("contrasts")
    answers = analysis.tables.get("answer")
    for task in s["tasks"]:
        lines.append(f"[{task}]")
        if answers is not None and (answers["task"] == task).any():
            family = "all train sizes (Bonferroni)" if s.get("adjust_across") == "sizes" else "each train size"
            source = f"; two-part contrasts: {SECOND_MODE}" if s.get("answer_from", {}).get(task) == "two_part" else ""
            lines.append(
                f"  answer (non-inferiority, margin {s['margins'].get(task)}, fixed sequence shallow to deep; "
                f"family: {family}{source}):"
            )
            lines.extend(f"    {statement}" for statement in answers.loc[answers["task"] == task, "statement"])
            lines.append(f"  superiority contrasts ({s['adjust']}-adjusted within a size; not shown ≠ no cost):")
        if contrasts is not None:
            c = contrasts[(contrasts["task"] == task) & (contrasts["fit"] == "all_runs")]
            for size, group in c.groupby("train_size"):
                parts = [
                    f"{int(r.frozen_layers)}: {r.estimate:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}] p_adj={r.p_adj:.3g}"
                    for r in group.itertuples()
                ]
                lines.append(f"  n={size}: frozen vs {s['reference']} → " + "; ".join(parts))
        inter = analysis.tables.get("interaction_test")
        if inter is not None and (inter["task"] == task).any():
            r = inter[inter["task"] == task].iloc[0]
            lines.append(f"  frozen × size interaction: {_test_text(r)}")
        op = analysis.tables.get("operating_point")
        if op is not None and (op["task"] == task).any():
            parts = [
                f"n={int(r.train_size)}: {r.trainable_layers} trainable [{r.ci_low}, {r.ci_high}]"
                for r in op[op["task"] == task].itertuples()
            ]
            lines.append("  90% of full quality: " + "; ".join(parts))
        lines.extend(_other_answers(analysis, task))
        per_size = s.get("seeds_per_size", {}).get(task)
        if per_size:
            parts = [
                f"n={size}: Δ {v['detect_delta'] or '>20'}, non-inferior {v.get('noninferior') or '>20'}"
                for size, v in per_size.items()
            ]
            lines.append(
                f"  seeds per cell for 80% power (Δ={s['delta']}, Holm within size; margin "
                f"{s['margins'].get(task)}; SDs taken as known): " + "; ".join(parts)
            )
    pooled = analysis.tables.get("task_interaction_test")
    if pooled is not None:
        r = pooled.iloc[0]
        lines.append(f"[all tasks] does freezing act differently per task? {_test_text(r)}")
    lines.extend(f"warning: {w}" for w in analysis.warnings)
    return lines


def _other_answers(analysis: Analysis, task: str) -> list[str]:
    """The across-arm answer, the shared-encoder freezing gains and the cross/bi gaps of a task, when the study
    has them."""
    lines = []
    strategy = analysis.tables.get("strategy_answer")
    if strategy is not None and (strategy["task"] == task).any():
        lines.append("  which strategy (non-inferiority against full fine-tuning, Holm over a size's strategies):")
        lines.extend(f"    {statement}" for statement in strategy.loc[strategy["task"] == task, "statement"])
    shared = analysis.tables.get("shared_encoder")
    if shared is not None and (shared["task"] == task).any():
        gains = shared[(shared["task"] == task) & (shared["comparison"] == "freezing_gain_difference")]
        lines.extend(
            f"  shared encoder, n={r.train_size}, with {r.trained_with}: freezing {r.frozen_layers} gains "
            f"{r.estimate:+.3f} [{r.ci_low_adj:+.3f}, {r.ci_high_adj:+.3f}] more than alone (p_adj={r.p_adj:.3g})"
            for r in gains.itertuples()
        )
    pairs = analysis.tables.get("pair_encoding")
    if pairs is not None and (pairs["task"] == task).any():
        from freezestats.report.pair_encoding import pair_encoding_lines

        lines.extend(f"  cross vs bi: {line}" for line in pair_encoding_lines(pairs[pairs["task"] == task], task))
    return lines

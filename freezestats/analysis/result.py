"""What ``analyze`` produces and how it is kept: the :class:`Analysis` and its folder on disk.

Apart from :mod:`freezestats.analysis.pipeline` (which computes) so that the report and the CLI can read an
analysis without the models: ``write_analysis`` stores every table as parquet + CSV with ``analysis.json``,
``read_analysis`` reads the folder back, also one written before a table was renamed (:data:`RENAMED_TABLES`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from freezestats.exceptions import ModelFitError, warn_renamed

__all__ = [
    "RENAMED_TABLES",
    "RESULTS_FILE",
    "SECOND_MODE",
    "STUDY_FILE",
    "Analysis",
    "read_analysis",
    "write_analysis",
]

#: Why an answer comes from the two-part contrasts (``settings["answer_from"] == "two_part"``), in the words the
#: summary, the report and the warnings use (``stats.two_part.failures_within_cells`` is the test).
SECOND_MODE = "some cells mix healthy runs with failed runs far below them"

RESULTS_FILE = "results.parquet"
STUDY_FILE = "study.json"

RENAMED_TABLES = {
    "strategy_contrasts": "arm_contrasts",
    "strategy_noninferiority": "arm_noninferiority",
    "strategy_answer": "arm_answer",
}
"""A table's name before it was renamed -> its name now: an older analysis folder's tables are read under the new."""


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
        tables[RENAMED_TABLES.get(name, name)] = pd.read_parquet(table_path)
    if set(names) & set(RENAMED_TABLES):  # all three were renamed together: one note
        warn_renamed("analysis tables", "strategy_*", "arm_*", str(folder))
    if not tables:
        raise ModelFitError(f"The analysis in {folder} has no tables; run freezestats analyze again.")
    return Analysis(settings=settings, tables=tables, warnings=warnings)

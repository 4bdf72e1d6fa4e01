"""Tiny data sets and specs for a user's own task (``[[tasks]]``): what the user-task tests vary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from _factories import simple_spec, to_toml

LEVELS = ("low", "mid", "high")


def rows(n: int, labels: tuple[Any, ...] = LEVELS, prefix: str = "train") -> pd.DataFrame:
    """``n`` rows with distinct texts, an id column and labels cycling through ``labels``."""
    return pd.DataFrame(
        {
            "id": [f"{prefix}-{i}" for i in range(n)],
            "text": [f"{prefix} item {i} reads {labels[i % len(labels)]}" for i in range(n)],
            "label": [labels[i % len(labels)] for i in range(n)],
        }
    )


def write(frame: pd.DataFrame, path: Path) -> Path:
    """``frame`` in the format its suffix names (csv, tsv, jsonl, parquet)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    elif suffix == ".tsv":
        frame.to_csv(path, sep="\t", index=False)
    elif suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_parquet(path, index=False)
    return path


def task_table(**override: Any) -> dict[str, Any]:
    """A multi-class ``[[tasks]]`` table on ``train.csv`` (validation carved), ``override`` replacing keys."""
    table: dict[str, Any] = {
        "name": "tickets",
        "kind": "multiclass",
        "text_columns": ["text"],
        "label_column": "label",
        "train": "train.csv",
    }
    table.update(override)
    return {k: v for k, v in table.items() if v is not None}


def user_spec(folder: Path, model: Path | str, task: dict[str, Any] | None = None, **sections: Any) -> Path:
    """A spec file in ``folder`` training ``task`` (default :func:`task_table`) with the tiny model, fast settings."""
    raw = simple_spec(
        model=str(model),
        tasks=[task or task_table()],
        grid={"frozen_layers": [0, 2], "train_sizes": [24], "seeds": [1]},
        training={"epochs": 1, "eval_every_epochs": 1, "max_length": 32, "batch_size": 8},
    )
    for key, value in sections.items():
        raw[key] = {**raw.get(key, {}), **value} if isinstance(value, dict) else value
    path = folder / "spec.toml"
    path.write_text(to_toml(raw))
    return path

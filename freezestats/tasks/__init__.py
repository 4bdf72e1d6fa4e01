"""The task registry: every task is one YAML file in this folder.

Adding a task means adding a file here (dataset location, text and label columns, kind, metrics,
``version``); nothing else in freezestats needs editing. Bump ``version`` whenever a change alters what
the task measures, so results from different versions are never silently pooled.

A user's own task is the same :class:`TaskConfig` with a :class:`~freezestats.tasks.sources.DataSource`: a study
spec defines it (``[[tasks]]``, :mod:`freezestats.spec.tasks`), so it never enters this registry; the spec looks it
up first (:meth:`freezestats.spec.StudySpec.task`).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml

from freezestats.exceptions import SpecError
from freezestats.tasks.sources import DataSource

__all__ = ["GlueTsvLayout", "TaskConfig", "available_tasks", "get_task"]

_TASK_DIR = Path(__file__).resolve().parent
_KNOWN_METRICS = ("accuracy", "mcc", "f1", "macro_f1", "pearson", "spearman")


@dataclass(frozen=True)
class GlueTsvLayout:
    """Where a task lives in GLUE's original TSV distribution (``SST-2/train.tsv``, ...)."""

    dir: str
    train: str
    validation: str
    header: bool
    text: tuple[str | int, ...]
    label: str | int
    label_map: dict[str, int] | None = None


@dataclass(frozen=True)
class TaskConfig:
    """Everything freezestats needs to know about a task; the YAML file is its serialised form."""

    name: str
    version: int
    kind: Literal["classification", "regression"]
    num_labels: int
    text_columns: tuple[str, ...]
    label_column: str
    metrics: tuple[str, ...]
    hub: dict[str, str] | None = None
    glue_tsv: GlueTsvLayout | None = None
    bundled: str | None = None
    label_range: tuple[float, float] | None = None
    """A regression task's score range (STS-B: 0-5): where the bi-encoder's cosine head starts its scale."""
    source_file: str = field(default="", compare=False)
    source: DataSource | None = None
    """A user task's data (``[[tasks]]`` in a spec); ``None`` for a packaged task, found by name."""
    label_names: tuple[str, ...] | None = None
    """A user classification task's class names in label-code order: the spec's ``labels``, else built from train
    when the data is loaded (``num_labels`` is then filled in too; 0 until then for a multi-class task)."""
    id_column: str | None = None
    """A user task's column of row ids, kept with every per-item prediction (default: the row number, from 1)."""

    @property
    def is_regression(self) -> bool:
        return self.kind == "regression"

    @property
    def is_user_task(self) -> bool:
        """Defined by a study spec with its own data, rather than shipped with freezestats."""
        return self.source is not None

    @property
    def kind_name(self) -> str:
        """``binary``, ``multiclass`` or ``regression``: the kind as a spec names it (packaged tasks too)."""
        if self.is_regression:
            return "regression"
        return "binary" if self.num_labels == 2 else "multiclass"

    @property
    def is_pair(self) -> bool:
        return len(self.text_columns) == 2


def _parse(path: Path) -> TaskConfig:
    raw: dict[str, Any] = yaml.safe_load(path.read_text())
    where = path.name
    required = ("name", "version", "kind", "num_labels", "text_columns", "label_column", "metrics")
    missing = [key for key in required if key not in raw]
    if missing:
        raise SpecError(f"Task file {where} is missing required keys {missing}.")
    if raw["kind"] not in ("classification", "regression"):
        raise SpecError(f"`kind` must be 'classification' or 'regression', but got {raw['kind']!r} ({where}).")
    unknown = [m for m in raw["metrics"] if m not in _KNOWN_METRICS]
    if unknown:
        raise SpecError(f"Task file {where} names unknown metrics {unknown}; known: {list(_KNOWN_METRICS)}.")
    if not 1 <= len(raw["text_columns"]) <= 2:
        raise SpecError(f"`text_columns` must name 1 or 2 columns, but got {raw['text_columns']} ({where}).")
    tsv = raw.get("glue_tsv")
    layout = None
    if tsv is not None:
        layout = GlueTsvLayout(
            dir=tsv["dir"],
            train=tsv["train"],
            validation=tsv["validation"],
            header=bool(tsv["header"]),
            text=tuple(tsv["text"]),
            label=tsv["label"],
            label_map=tsv.get("label_map"),
        )
    return TaskConfig(
        name=raw["name"],
        version=int(raw["version"]),
        kind=raw["kind"],
        num_labels=int(raw["num_labels"]),
        text_columns=tuple(raw["text_columns"]),
        label_column=raw["label_column"],
        metrics=tuple(raw["metrics"]),
        hub=raw.get("hub"),
        glue_tsv=layout,
        bundled=raw.get("bundled"),
        label_range=_label_range(raw.get("label_range"), where),
        source_file=str(path),
    )


def _label_range(value: Any, where: str) -> tuple[float, float] | None:
    """``label_range: [low, high]`` with low < high, or absent."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2 or not value[0] < value[1]:
        raise SpecError(f"`label_range` must be [low, high] with low < high, but got {value!r} ({where}).")
    return float(value[0]), float(value[1])


@cache
def _registry() -> dict[str, TaskConfig]:
    tasks: dict[str, TaskConfig] = {}
    for path in sorted(_TASK_DIR.glob("*.yaml")):
        task = _parse(path)
        if task.name in tasks:
            raise SpecError(f"Task '{task.name}' is defined twice ({tasks[task.name].source_file}, {path}).")
        tasks[task.name] = task
    return tasks


def available_tasks() -> list[str]:
    """Names of every registered task, sorted."""
    return sorted(_registry())


def get_task(name: str) -> TaskConfig:
    """The task called ``name``; a miss suggests close names and lists the available ones."""
    registry = _registry()
    if name in registry:
        return registry[name]
    close = difflib.get_close_matches(name, registry, n=3)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise SpecError(f"Unknown task '{name}'.{hint} Available: {', '.join(sorted(registry))}.")

"""``freezestats init``: read the user's data and write a ready, commented study spec for it.

The first thing a user has is a file of labelled texts, not a spec. ``init`` reads it through the same loader
and checks as a run (:mod:`freezestats.tasks.user_data`: every problem is one line, before anything is written),
reads the task's kind from its labels, and writes a spec whose every choice says why: train sizes up to what the
data allows (each no larger than the train pool, and large enough that the rarest class is in it a few times),
frozen levels spread over the model's depth, five seeds, the kind's metric and ``precision = "auto"``. The
spec is parsed back before it is written, so what ``init`` writes always validates.
"""

from __future__ import annotations

import math
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from freezestats.exceptions import DataError, SpecError
from freezestats.spec.parser import _Parser
from freezestats.spec.study import parse_spec
from freezestats.spec.tasks import DEFAULT_METRICS, parse_definition
from freezestats.tasks import available_tasks
from freezestats.tasks.data import load_task_data
from freezestats.tasks.pool import reserve_pool
from freezestats.tasks.sources import DataSource, read_file_split
from freezestats.tasks.taskdata import TaskData

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["InitRequest", "InitResult", "write_init_spec"]

SIZE_LADDER = (50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000)
"""The train sizes ``init`` picks from: roughly doubling, as in the blog's grid (50-1000)."""
MIN_RAREST = 4
"""A train size is offered only if the rarest class is expected at least this often in its subset."""
MAX_CLASSES_AS_INTEGERS = 20
"""Integer labels with at most this many distinct values are read as classes (star ratings), more as a score."""
SEEDS = (1, 2, 3, 4, 5)
POOL_SHARE, POOL_MAX, POOL_MIN_TRAIN = 0.2, 5000, 500
"""``init`` reserves this share of train (at most ``POOL_MAX`` items) as the evaluation pool, when train has at
least ``POOL_MIN_TRAIN`` rows: the pool is what each run is scored on, so that the answer speaks of new data from
the task, not of the validation set that chose the checkpoint."""


@dataclass(frozen=True)
class InitRequest:
    """What ``freezestats init`` was asked: the data files, their columns, the model and where to write."""

    train: Path
    text: str
    label: str
    output: Path
    validation: Path | None = None
    text_pair: str | None = None
    model: str = "minilm-l6"
    name: str | None = None
    kind: str | None = None
    id_column: str | None = None


@dataclass(frozen=True)
class InitResult:
    """The spec ``init`` wrote, and what it found in the data."""

    path: Path
    name: str
    data: TaskData
    text: str
    n_runs: int


def write_init_spec(request: InitRequest, n_layers: int) -> InitResult:
    """Check the data, then write the spec to ``request.output`` (never over an existing file)."""
    output = request.output.resolve()
    if output.exists():
        raise SpecError(f"{request.output} already exists; choose another -o, or remove it first.")
    if not output.parent.is_dir():
        raise SpecError(f"The folder of {request.output} does not exist.")
    name = _name(request)
    kind = request.kind or infer_kind(request)
    table = _task_table(request, name, kind, output.parent)
    p = _Parser(f"freezestats init ({request.output})")
    data = load_task_data(parse_definition(p, table, "the task", output.parent))
    text = render_spec(request, name, kind, table, data, n_layers)
    spec = parse_spec(tomllib.loads(text), source=str(output))  # what init writes must validate
    partial = output.with_name(output.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(output)
    grid = spec.grid
    n_runs = len(grid.frozen_layers) * len(grid.train_sizes) * len(grid.seeds)
    return InitResult(output, name, data, text, n_runs)


def _name(request: InitRequest) -> str:
    """The study's and task's name: ``--name``, else the train file's name (its folder's, for ``train.csv``)."""
    if request.name is not None:
        if request.name in available_tasks():
            raise SpecError(f"--name {request.name!r} is a packaged task's name; choose another.")
        return request.name
    stem = request.train.stem
    if stem.lower() in ("train", "training", "data", "dataset"):
        stem = request.train.resolve().parent.name or stem
    name = re.sub(r"[^a-z0-9_-]+", "-", stem.lower()).strip("-") or "my-task"
    return f"my-{name}" if name in available_tasks() else name


def infer_kind(request: InitRequest) -> str:
    """``binary`` or ``multiclass`` for text labels and few integers, ``regression`` for other numbers."""
    frame = read_file_split(DataSource("files", files={"train": str(request.train)}), "train").frame
    if request.label not in frame.columns:
        raise DataError(
            f"The train file {str(request.train)!r} has no column {request.label!r}; it has {list(frame.columns)[:20]}."
        )
    labels = frame[request.label]
    values = labels[~(labels.isna() | labels.astype(str).str.strip().eq(""))]
    numbers = pd.to_numeric(values, errors="coerce")
    if numbers.notna().all() and len(values):
        whole = bool(np.all(numbers == np.round(numbers)))
        if not whole or numbers.nunique() > MAX_CLASSES_AS_INTEGERS:
            return "regression"
    return "binary" if values.astype(str).str.strip().nunique() == 2 else "multiclass"


def _task_table(request: InitRequest, name: str, kind: str, folder: Path) -> dict[str, Any]:
    table: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "text_columns": [request.text, *([request.text_pair] if request.text_pair else [])],
        "label_column": request.label,
        "train": _relative(request.train, folder),
    }
    if request.validation is not None:
        table["validation"] = _relative(request.validation, folder)
    if request.id_column is not None:
        table["id_column"] = request.id_column
    return table


def _relative(path: Path, folder: Path) -> str:
    """``path`` as the spec writes it: relative to the spec's folder (forward slashes), so the project can move."""
    return Path(os.path.relpath(path.resolve(), folder)).as_posix()


def train_sizes(data: TaskData) -> list[int]:
    """The ladder's sizes that fit the pool and hold the rarest class ``MIN_RAREST`` times: at most 5, spread
    from the smallest to the largest (each size is a cell per frozen level and seed, so a few span the range)."""
    pool = len(data.train)
    labels = data.train_labels
    rarest = 1.0 if data.task.is_regression else np.unique(labels, return_counts=True)[1].min() / pool
    smallest = math.ceil(MIN_RAREST / rarest)
    sizes = [s for s in SIZE_LADDER if smallest <= s <= pool]
    if not sizes:
        return [pool]
    return sorted({sizes[int(i)] for i in np.round(np.linspace(0, len(sizes) - 1, min(5, len(sizes))))})


def pool_size(data: TaskData) -> int:
    """The evaluation pool ``init`` reserves: ``POOL_SHARE`` of train, at most ``POOL_MAX``; none below
    ``POOL_MIN_TRAIN`` rows (there every row is needed to train, and the validation set scores)."""
    return 0 if len(data.train) < POOL_MIN_TRAIN else min(POOL_MAX, round(POOL_SHARE * len(data.train)))


def frozen_levels(n_layers: int) -> list[int]:
    """Embeddings only, full fine-tuning, a third and two thirds of the layers, and all of them (the head only)."""
    return sorted({-1, 0, round(n_layers / 3), round(2 * n_layers / 3), n_layers})


def primary_metric(data: TaskData, kind: str) -> tuple[str, str]:
    """The kind's first metric, or its second when the classes are unbalanced enough that accuracy hides a class."""
    first, second = DEFAULT_METRICS[kind]
    if kind == "regression":
        return first, "a regression task's default"
    shares = np.unique(data.train_labels, return_counts=True)[1] / len(data.train)
    if kind == "binary" and shares.max() >= 0.7:
        return second, f"the majority class holds {shares.max():.0%} of train, where accuracy rewards guessing it"
    if kind == "multiclass" and shares.min() < 0.5 / len(shares):
        return second, f"the rarest class holds {shares.min():.0%} of train; macro-F1 weighs every class alike"
    return first, f"the classes are balanced enough for accuracy ({second} is stored too)"


def render_spec(
    request: InitRequest, name: str, kind: str, table: dict[str, Any], data: TaskData, n_layers: int
) -> str:
    """The spec's text: the task table, model, grid, training and metric, each choice with its reason."""
    pool = pool_size(data)
    trainable = data if pool == 0 else reserve_pool(data, pool)[0]
    sizes, levels = train_sizes(trainable), frozen_levels(n_layers)
    metric, why = primary_metric(data, kind)
    evaluation = ([] if pool == 0 else [
        "[evaluation]",
        f"pool = {pool:<28} # items reserved from train before any subset; every run is scored on them once",
        "",
    ])  # fmt: skip
    lines = [
        f"# A freezestats study of your task '{name}', written by `freezestats init` from {table['train']}.",
        *(f"# {line}" for line in describe_data(data)),
        f"# Next: freezestats validate {request.output} --list-cells",
        "version = 1",
        f"name = {_toml(name)}",
        f"description = {_toml(f'How many layers of {request.model} to freeze for {name}, by train size.')}",
        "",
        *_task_lines(table, data),
        "",
        "[model]",
        f"name = {_toml(request.model):<28} # {n_layers} encoder layers",
        "",
        "[grid]",
        f"frozen_layers = {_toml(levels):<19} # -1: embeddings only; 0: full fine-tuning; k: embeddings + k layers",
        f"train_sizes = {_toml(sizes):<21} # nested, stratified subsets of the {len(trainable.train)} trainable rows",
        f"seeds = {_toml(list(SEEDS)):<27} # runs per cell: their spread is what the statistics measure",
        'subsets = "per_seed"                # each seed trains on its own nested draw of examples',
        "",
        *evaluation,
        "[training]                          # the 2020 blog's protocol (AdamW, linear warm-up and decay)",
        "epochs = 10                         # lower it for a first quick look",
        "learning_rate = 5e-5",
        'precision = "auto"                  # bf16 where the hardware has it, else fp32; "fp32" keeps full precision',
        "",
        "[metrics]",
        f"primary = {{ {_toml(name)} = {_toml(metric)} }}  # what `analyze` tests: {why}",
    ]
    return "\n".join(lines) + "\n"


def _task_lines(table: dict[str, Any], data: TaskData) -> list[str]:
    task = data.task
    names = task.label_names or ()
    labels = ", ".join(f"{label}={code}" for code, label in enumerate(names))
    metrics = ", ".join(_toml(m) for m in task.metrics)
    lines = [
        "[[tasks]]",
        f"name = {_toml(table['name'])}",
        f"kind = {_toml(table['kind']):<26} # binary | multiclass | regression (read from the labels)",
        f"text_columns = {_toml(table['text_columns']):<18} # one column, or two for a sentence pair",
        f"label_column = {_toml(table['label_column']):<18} # "
        + (f"classes, in code order: {labels}" if labels else "a number"),
        f"train = {_toml(table['train'])}",
    ]
    if "validation" in table:
        lines.append(f"validation = {_toml(table['validation'])}")
    else:
        lines += [
            '# validation = "dev.csv"          # none given: carved from train, stratified, with a fixed seed',
            f"validation_fraction = {DataSource.validation_fraction}",
            f"carve_seed = {DataSource.carve_seed}",
        ]
    if "id_column" in table:
        lines.append(f"id_column = {_toml(table['id_column'])}")
    else:
        lines.append('# id_column = "id"                 # row ids for per-item predictions (default: row numbers)')
    lines.append(f"# metrics = [{metrics}]   # the default for {task.kind_name}; [metrics] primary picks one")
    if names:
        lines.append(f"# labels = {_toml(list(names))}   # to fix the class order (default: sorted)")
    return lines


def describe_data(data: TaskData) -> list[str]:
    """A few lines on what was read: rows, classes and their counts, the carve, duplicates."""
    origin = data.origin
    assert origin is not None
    lines = [f"{origin.n_train_file} train rows, {data.task.kind_name}"]
    if data.task.label_names:
        in_file = [data.train_labels, *([data.validation_labels] if origin.carved is not None else [])]
        counts = np.bincount(np.concatenate(in_file), minlength=data.task.num_labels)
        shown = ", ".join(f"{name} {int(n)}" for name, n in zip(data.task.label_names, counts, strict=True))
        lines[0] += f" with {data.task.num_labels} classes ({shown})"
    if origin.carved is not None:
        lines.append(
            f"no validation file: {len(origin.carved)} rows ({DataSource.validation_fraction:.0%}) carved out of train "
            f"as validation, leaving {len(data.train)} to train on"
        )
    else:
        lines.append(f"{len(data.validation)} validation rows")
    if origin.duplicates:
        lines.append(f"{origin.duplicates} validation texts are also in train: they inflate scores")
    return lines


def _toml(value: Any) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)

"""The spec's ``tasks``: packaged task names, and the user's own tasks (``[[tasks]]`` tables or task files).

``tasks = ["sst2", "cola"]`` names packaged tasks, as before. A user's task is a table with the packaged YAML's
fields plus where its data is, written in the spec (``[[tasks]]``, or an inline table in the list) or in a task
file the list names by path (``.yaml``/``.yml``/``.toml``, read from the spec's folder)::

    [[tasks]]
    name = "tickets"
    kind = "multiclass"              # binary | multiclass | regression
    text_columns = ["subject", "body"]   # one column, or a sentence pair
    label_column = "queue"           # ints or strings
    train = "data/train.csv"         # .csv .tsv .jsonl .parquet; or disk = "saved/" or hub = "id" (+ config)
    validation = "data/dev.csv"      # optional: else carved from train (validation_fraction, carve_seed)

A table with only ``name`` (or ``file``) is a packaged task (a task file). What the study stores and hashes of a
user task is its definition (:func:`stored_task`), with the data paths as written; the folder they are read from
(``root``) is stored beside them but left out of the spec hash, and the data's content is guarded apart, by the
hash of every file (:mod:`freezestats.tasks.user_data`, checked on resume).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from freezestats.exceptions import SpecError
from freezestats.spec.parser import _Parser
from freezestats.tasks import TaskConfig, available_tasks, get_task
from freezestats.tasks.sources import FORMATS, SPLITS, DataSource

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["DEFAULT_METRICS", "KINDS", "parse_definition", "parse_tasks", "stored_task", "without_roots"]

KINDS = ("binary", "multiclass", "regression")
DEFAULT_METRICS = {
    "binary": ("accuracy", "mcc"),
    "multiclass": ("accuracy", "macro_f1"),
    "regression": ("pearson", "spearman"),
}
"""A user task's metrics when it names none; the first is its primary metric unless ``[metrics] primary`` says."""
_ALLOWED_METRICS = {
    "binary": ("accuracy", "mcc", "f1", "macro_f1"),
    "multiclass": ("accuracy", "mcc", "macro_f1"),
    "regression": ("pearson", "spearman"),
}
_DEFINITION_KEYS = {
    "name", "version", "kind", "text_columns", "label_column", "metrics", "labels", "label_range", "id_column",
    *SPLITS, "format", "disk", "hub", "config", "splits", "validation_fraction", "carve_seed",
}  # fmt: skip
_TASK_FILE_SUFFIXES = (".yaml", ".yml", ".toml")


def parse_tasks(p: _Parser, value: Any, base: Path) -> tuple[tuple[str, ...], tuple[TaskConfig, ...]]:
    """The study's task names in spec order, and the user tasks among them (each defined once).

    ``base``: the folder that relative task files and data paths are read from (the spec file's).
    """
    if not isinstance(value, list) or not value:
        raise p.fail(f"`tasks` must be a non-empty list of task names or [[tasks]] tables, but got tasks={value!r}")
    names: list[str] = []
    defined: list[TaskConfig] = []
    for i, entry in enumerate(value):
        where = f"tasks[{i}]"
        if isinstance(entry, str) and not _is_task_file(entry):
            names.append(_packaged(p, entry, where))
            continue
        if isinstance(entry, Mapping) and set(entry) == {"name"}:
            names.append(_packaged(p, p.string(entry["name"], f"{where}.name"), where))
            continue
        table, root, where = _table(p, entry, where, base)
        task = parse_definition(p, table, where, root)
        names.append(task.name)
        defined.append(task)
    p.unique(names, "tasks")
    return tuple(names), tuple(defined)


def _is_task_file(entry: str) -> bool:
    return entry.endswith(_TASK_FILE_SUFFIXES) or "/" in entry or "\\" in entry


def _packaged(p: _Parser, name: str, where: str) -> str:
    try:
        get_task(name)
    except SpecError as err:
        raise SpecError(f"{err} ({where}, {p.source})") from None
    return name


def _table(p: _Parser, entry: Any, where: str, base: Path) -> tuple[Mapping[str, Any], Path, str]:
    """The definition table of ``entry`` (inline, or read from a task file), the folder its paths are read from."""
    if isinstance(entry, Mapping) and "file" in entry:
        if set(entry) != {"file"}:
            raise p.fail(f"`{where}` reads its task from `file`, so it must hold no other key, but has {sorted(entry)}")
        entry = p.string(entry["file"], f"{where}.file")
    if isinstance(entry, Mapping):
        root = entry.get("root") if p.stored else None  # a stored definition keeps the folder it was read from
        return entry, Path(root) if isinstance(root, str) else base, where
    if not isinstance(entry, str):
        raise p.fail(f"`{where}` must be a task name, a task file or a table, but got {entry!r}")
    path = (base / entry).resolve()
    if not path.is_file():
        raise p.fail(f"`{where}` names the task file {entry!r}, which does not exist ({path})")
    try:
        text = path.read_text(encoding="utf-8")
        table = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, yaml.YAMLError) as err:
        raise p.fail(f"`{where}`: cannot read the task file {entry!r}: {str(err).splitlines()[0]}") from err
    if not isinstance(table, Mapping):
        raise p.fail(f"`{where}`: the task file {entry!r} must hold one task's keys, but holds {type(table).__name__}")
    return table, path.parent, f"{where} ({entry})"


def parse_definition(p: _Parser, table: Mapping[str, Any], where: str, root: Path) -> TaskConfig:
    """One user task: its columns, kind, metrics and labels, and its :class:`DataSource`."""
    p.keys(table, f"{where}.", _DEFINITION_KEYS | ({"root"} if p.stored else set()))
    name = p.string(p.required(table, "name", f"{where}."), f"{where}.name")
    if not name.strip() or any(ch in name for ch in "/\\|=") or name != name.strip():
        raise p.fail(f"`{where}.name` must be a plain name (no slashes, '|' or '='), but got name={name!r}")
    if name in available_tasks():
        raise p.fail(
            f"`{where}.name` {name!r} is a packaged task's name; give your task another name (packaged: "
            f"{', '.join(available_tasks())})"
        )
    kind = p.choice(p.required(table, "kind", f"{where}."), f"{where}.kind", KINDS)
    columns = p.nonempty_list(table, "text_columns", f"{where}.")
    text_columns = tuple(p.string(c, f"{where}.text_columns[{j}]") for j, c in enumerate(columns))
    if len(text_columns) > 2:
        raise p.fail(f"`{where}.text_columns` must name 1 column or a pair, but got {list(text_columns)}")
    p.unique(text_columns, f"{where}.text_columns")
    labels = _labels(p, table, where, kind)
    id_column = table.get("id_column")
    return TaskConfig(
        name=name,
        version=p.integer(table.get("version", 1), f"{where}.version", low=1),
        kind="regression" if kind == "regression" else "classification",
        num_labels={"binary": 2, "regression": 1}.get(kind, len(labels or ())),
        text_columns=text_columns,
        label_column=p.string(p.required(table, "label_column", f"{where}."), f"{where}.label_column"),
        metrics=_metrics(p, table, where, kind),
        label_range=_label_range(p, table, where, kind),
        source_file=where,
        source=_source(p, table, where, root),
        label_names=labels,
        id_column=None if id_column is None else p.string(id_column, f"{where}.id_column"),
    )


def _metrics(p: _Parser, table: Mapping[str, Any], where: str, kind: str) -> tuple[str, ...]:
    if "metrics" not in table:
        return DEFAULT_METRICS[kind]
    values = p.nonempty_list(table, "metrics", f"{where}.")
    metrics = tuple(p.choice(m, f"{where}.metrics[{j}]", _ALLOWED_METRICS[kind]) for j, m in enumerate(values))
    p.unique(metrics, f"{where}.metrics")
    return metrics


def _labels(p: _Parser, table: Mapping[str, Any], where: str, kind: str) -> tuple[str, ...] | None:
    """``labels``: the class names in code order (optional; default: train's classes, sorted)."""
    if "labels" not in table:
        return None
    if kind == "regression":
        raise p.fail(f"`{where}.labels` names classes, but the task is a regression task")
    values = p.nonempty_list(table, "labels", f"{where}.")
    labels = tuple(str(v) for v in values)
    p.unique(labels, f"{where}.labels")
    wanted = "exactly 2" if kind == "binary" else "3 or more"
    if (kind == "binary") != (len(labels) == 2) or len(labels) < 2:
        raise p.fail(f"`{where}.labels` of a {kind} task must name {wanted} classes, but got {list(labels)}")
    return labels


def _label_range(p: _Parser, table: Mapping[str, Any], where: str, kind: str) -> tuple[float, float] | None:
    value = table.get("label_range")
    if value is None:
        return None
    ok = isinstance(value, list) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value)
    if kind != "regression" or not ok or not value[0] < value[1]:
        raise p.fail(f"`{where}.label_range` must be [low, high] with low < high, for a regression task; got {value!r}")
    return float(value[0]), float(value[1])


def _source(p: _Parser, table: Mapping[str, Any], where: str, root: Path) -> DataSource:
    """Exactly one of local files (``train`` ...), ``disk`` or ``hub``, and the carve's settings."""
    given = [key for key in ("train", "disk", "hub") if key in table]
    if len(given) != 1:
        raise p.fail(
            f"`{where}` must say where its data is with exactly one of `train` (files), `disk` (a save_to_disk "
            f"folder) or `hub` (a dataset id), but got {given or 'none'}"
        )
    fraction = p.number(
        table.get("validation_fraction", DataSource.validation_fraction), f"{where}.validation_fraction"
    )
    if not 0 < fraction < 1:
        raise p.fail(f"`{where}.validation_fraction` must lie in (0, 1), but got validation_fraction={fraction}")
    carve = {
        "validation_fraction": fraction,
        "carve_seed": p.integer(table.get("carve_seed", 0), f"{where}.carve_seed"),
    }
    if given == ["train"]:
        for key in ("config", "splits"):
            if key in table:
                raise p.fail(f"`{where}.{key}` applies to `disk` or `hub` data, not to files")
        files = {split: p.string(table[split], f"{where}.{split}") for split in SPLITS if split in table}
        fmt = table.get("format")
        if fmt is not None:
            fmt = p.choice(fmt, f"{where}.format", sorted(set(FORMATS.values())))
        return DataSource("files", files=files, format=fmt, root=str(root), **carve)
    for key in ("validation", "test", "format"):
        if key in table:
            raise p.fail(f"`{where}.{key}` applies to files; with `{given[0]}` name the dataset's splits in `splits`")
    splits = table.get("splits", {})
    if not isinstance(splits, Mapping) or any(k not in SPLITS or not isinstance(v, str) for k, v in splits.items()):
        raise p.fail(f"`{where}.splits` must map {list(SPLITS)} to the dataset's split names, but got {splits!r}")
    config = table.get("config")
    if config is not None and given != ["hub"]:
        raise p.fail(f"`{where}.config` applies to `hub` datasets only")
    return DataSource(
        given[0],  # type: ignore[arg-type]
        path=p.string(table[given[0]], f"{where}.{given[0]}"),
        config=None if config is None else p.string(config, f"{where}.config"),
        splits=dict(splits),
        root=str(root),
        **carve,
    )


def stored_task(task: TaskConfig) -> dict[str, Any]:
    """A user task as the study stores (and, less ``root``, hashes) it: what was written, defaults filled in."""
    assert task.source is not None
    data: dict[str, Any] = {
        "name": task.name,
        "version": task.version,
        "kind": task.kind_name,
        "text_columns": list(task.text_columns),
        "label_column": task.label_column,
        "metrics": list(task.metrics),
    }
    if task.label_names is not None:
        data["labels"] = list(task.label_names)
    if task.label_range is not None:
        data["label_range"] = list(task.label_range)
    if task.id_column is not None:
        data["id_column"] = task.id_column
    data.update(task.source.stored_form())
    data["root"] = task.source.root
    return data


def without_roots(definitions: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Stored definitions less ``root``: the part of a user task that is its meaning (the spec hash's)."""
    return [{k: v for k, v in definition.items() if k != "root"} for definition in definitions]

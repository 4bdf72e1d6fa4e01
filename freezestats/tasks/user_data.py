"""Load a user's task from its own data, and check it before any training: one clear line per problem.

A task defined in a study spec (``[[tasks]]``) reads its splits from local files, a ``save_to_disk`` folder or a
dataset id (:mod:`freezestats.tasks.sources`, :mod:`freezestats.tasks.hf_sources`), then every split goes through
the same checks, in this order, each a :class:`~freezestats.exceptions.DataError` of one line:

* every column the task names is there (texts, label, ids);
* no text is empty or missing (the count, and the first row numbers);
* every row has a label; a regression target is a number;
* train has at least two classes (and, for ``binary``, exactly two; ``multiclass``, three or more);
* every validation (and test) label occurs in train: a class the model never saw cannot be scored fairly.

Labels may be ints or strings. The label map (class name -> code ``0..K-1``) is built from train: the classes
sorted (numbers as numbers), unless the task lists its ``labels`` in the order it wants. Without a validation
split one is carved from train (:mod:`freezestats.tasks.carve`). Exact duplicate texts between train and
validation are not refused but warned about (:class:`~freezestats.exceptions.DataWarning`): the model has seen
those items, so they inflate its scores.

Row numbers count the data rows of a split from 1 (the first row after a header is row 1); they are the rows'
ids unless the task names an ``id_column``, and per-item predictions keep them.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from freezestats.exceptions import DataError, DataWarning
from freezestats.tasks import TaskConfig
from freezestats.tasks.carve import carve_validation
from freezestats.tasks.sources import RawSplit, read_file_split
from freezestats.tasks.taskdata import DataOrigin, TaskData

__all__ = ["load_user_data"]

_SHOWN = 5  # row numbers (or values) a message lists before "…"


@dataclass(frozen=True)
class _Split:
    """A split after its own checks: text columns as strings, the labels as read, the row ids."""

    texts: pd.DataFrame
    labels: pd.Series
    ids: np.ndarray
    where: str


def load_user_data(task: TaskConfig, carve: np.ndarray | None = None) -> TaskData:
    """Read and check the user task ``task``; ``carve``: the validation rows a study stored (else carved now)."""
    assert task.source is not None  # the caller (load_task_data) dispatches on it
    raw = _read(task)
    splits = {name: _split(task, name, part) for name, part in raw.items()}
    train = splits["train"]
    if task.is_regression:
        codes = {name: _numbers(task, s) for name, s in splits.items()}
        full = task
    else:
        names = _label_names(task, train)
        codes = {name: _codes(task, s, names) for name, s in splits.items()}
        full = replace(task, num_labels=len(names), label_names=names)
    carved = None
    if "validation" not in splits:
        carved = _carve(full, codes["train"], carve)
        keep = np.setdiff1d(np.arange(len(train.ids)), carved)
        splits["validation"] = _take(train, carved, f"{train.where}, carved")
        codes["validation"] = codes["train"][carved]
        splits["train"], codes["train"] = _take(train, keep, train.where), codes["train"][keep]
    frames = {name: _frame(splits[name], codes[name]) for name in ("train", "validation")}
    pool = None
    if "pool" in splits:
        _check_pool(task, splits["pool"], train)
        pool = _frame(splits["pool"], codes["pool"])
    duplicates = _duplicates(task, splits["train"].texts, splits["validation"].texts)
    origin = DataOrigin(
        train_ids=splits["train"].ids,
        validation_ids=splits["validation"].ids,
        files={name: part.identity for name, part in raw.items()},
        carved=carved,
        n_train_file=len(train.ids),
        n_test=len(splits["test"].ids) if "test" in splits else None,
        duplicates=duplicates,
    )
    return TaskData(full, frames["train"], frames["validation"], f"user:{task.source.describe()}", origin, pool)


def _read(task: TaskConfig) -> dict[str, RawSplit]:
    source = task.source
    assert source is not None
    if source.kind == "files":
        return {
            split: read_file_split(source, split)
            for split in ("train", "validation", "test", "pool")
            if split in source.files
        }
    from freezestats.tasks.hf_sources import read_dataset_splits

    return read_dataset_splits(source)


def _split(task: TaskConfig, split: str, part: RawSplit) -> _Split:
    """Columns present, split not empty, no empty text, no missing label, the row ids."""
    where = f"task '{task.name}', {split} ({part.where})"
    frame = part.frame
    needed = [*task.text_columns, task.label_column, *([task.id_column] if task.id_column else [])]
    missing = [c for c in dict.fromkeys(needed) if c not in frame.columns]
    if missing:
        raise DataError(f"The {where} has no column(s) {missing}; it has {list(map(str, frame.columns))[:20]}.")
    if len(frame) == 0:
        raise DataError(f"The {where} has no rows.")
    frame = frame.reset_index(drop=True)
    rows = np.arange(1, len(frame) + 1)
    texts = pd.DataFrame(index=frame.index)
    for column in task.text_columns:
        blank = _blank(frame[column])
        if blank.any():
            raise DataError(
                f"The {where} has {int(blank.sum())} empty or missing text(s) in column {column!r}: "
                f"{_rows(rows[blank.to_numpy()])}; fill or drop those rows."
            )
        texts[column] = frame[column].astype(str)
    unlabelled = _blank(frame[task.label_column])
    if unlabelled.any():
        raise DataError(
            f"The {where} has {int(unlabelled.sum())} row(s) without a label in column {task.label_column!r}: "
            f"{_rows(rows[unlabelled.to_numpy()])}."
        )
    return _Split(texts, frame[task.label_column], _ids(task, frame, rows, where), where)


def _blank(values: pd.Series) -> pd.Series:
    """Missing (None, NaN) or empty after stripping white space."""
    return values.isna() | values.astype(str).str.strip().eq("")


def _rows(rows: np.ndarray) -> str:
    shown = ", ".join(str(int(r)) for r in rows[:_SHOWN])
    return f"row{'s' if len(rows) > 1 else ''} {shown}" + (", …" if len(rows) > _SHOWN else "")


def _ids(task: TaskConfig, frame: pd.DataFrame, rows: np.ndarray, where: str) -> np.ndarray:
    """The row ids: the ``id_column`` (present in every row, unique), else the row numbers."""
    if task.id_column is None:
        return rows.astype(np.int64)
    values = frame[task.id_column]
    blank = _blank(values).to_numpy()
    if blank.any():
        raise DataError(
            f"The {where} has {int(blank.sum())} row(s) without an id in {task.id_column!r}: {_rows(rows[blank])}."
        )
    repeated = values.duplicated(keep=False).to_numpy()
    if repeated.any():
        raise DataError(f"The {where} repeats ids in {task.id_column!r}: {_rows(rows[repeated])}; ids must be unique.")
    whole = _as_integers(values)
    return whole.to_numpy(dtype=np.int64) if whole is not None else values.astype(str).to_numpy(dtype=object)


def _as_integers(values: pd.Series) -> pd.Series | None:
    """``values`` as integers when every one is a whole number (``3``, ``3.0``, ``"3"``), else ``None``."""
    if pd.api.types.is_bool_dtype(values):
        return values.astype(np.int64)
    numbers = pd.to_numeric(values, errors="coerce")
    if numbers.isna().any() or not np.all(np.isfinite(numbers)) or not np.all(numbers == np.round(numbers)):
        return None
    return numbers.astype(np.int64)


def _class_values(task: TaskConfig, split: _Split) -> pd.Series:
    """Class labels as ints (every label a whole number) or strings; fractional numbers are refused."""
    whole = _as_integers(split.labels)
    if whole is not None:
        return whole
    if pd.api.types.is_numeric_dtype(split.labels):
        raise DataError(
            f"The {split.where} has fractional labels in {task.label_column!r} (e.g. {split.labels.iloc[0]!r}), but "
            f"task '{task.name}' is {task.kind_name}: use kind = 'regression' for a numeric target."
        )
    return split.labels.astype(str).str.strip()


def _label_names(task: TaskConfig, train: _Split) -> tuple[str, ...]:
    """Class names in code order: the task's ``labels``, else train's classes sorted; checked against the kind."""
    values = _class_values(task, train)
    found = sorted(values.unique().tolist())
    if len(found) < 2:
        raise DataError(
            f"The label column {task.label_column!r} of the {train.where} has one class ({found[0]!r}): nothing can "
            "be learned from it."
        )
    names = tuple(task.label_names) if task.label_names else tuple(str(v) for v in found)
    if task.label_names:
        unknown = sorted({str(v) for v in found} - set(names))
        if unknown:
            raise DataError(
                f"The {train.where} has labels {unknown[:_SHOWN]} that the task's `labels` {list(names)} lacks."
            )
    if task.kind_name == "binary" and len(names) != 2:
        raise DataError(
            f"Task '{task.name}' is binary, but the {train.where} has {len(names)} classes {list(names)[:8]}: "
            "use kind = 'multiclass'."
        )
    if task.kind_name == "multiclass" and len(names) < 3:
        raise DataError(
            f"Task '{task.name}' is multiclass, but the {train.where} has 2 classes {list(names)}: use kind = 'binary'."
        )
    return names


def _codes(task: TaskConfig, split: _Split, names: Sequence[str]) -> np.ndarray:
    """Each row's class code; a label absent from train (the map) is refused with its count and rows."""
    values = _class_values(task, split).astype(str)
    mapping = {label: code for code, label in enumerate(names)}
    codes = values.map(mapping)
    absent = codes.isna().to_numpy()
    if absent.any():
        rows = np.arange(1, len(values) + 1)[absent]
        unseen = sorted(values[absent].unique().tolist())
        raise DataError(
            f"The {split.where} has labels {unseen[:_SHOWN]} that train does not ({int(absent.sum())} rows: "
            f"{_rows(rows)}): the model never learns them; drop those rows or add examples to train."
        )
    return codes.to_numpy(dtype=np.int64)


def _numbers(task: TaskConfig, split: _Split) -> np.ndarray:
    """A regression target as float32; a value that is not a finite number is refused with its rows."""
    numbers = pd.to_numeric(split.labels, errors="coerce").astype(float)
    bad = (numbers.isna() | ~np.isfinite(numbers)).to_numpy()
    if bad.any():
        rows = np.arange(1, len(numbers) + 1)[bad]
        examples = [str(v) for v in split.labels[bad].head(3)]
        raise DataError(
            f"The regression target {task.label_column!r} of the {split.where} is not a number in {int(bad.sum())} "
            f"row(s): {_rows(rows)} (e.g. {examples}); use kind = 'binary' or 'multiclass' for class labels."
        )
    return numbers.to_numpy(dtype=np.float32)


def _carve(task: TaskConfig, train_codes: np.ndarray, stored: np.ndarray | None) -> np.ndarray:
    """The carved validation rows: the study's stored ones (checked to fit train), else a fresh carve."""
    source = task.source
    assert source is not None
    if stored is not None:
        stored = np.asarray(stored, dtype=np.int64)
        if (
            len(stored) == 0
            or stored.min() < 0
            or stored.max() >= len(train_codes)
            or len(np.unique(stored)) != len(stored)
        ):
            raise DataError(
                f"The validation rows stored with the study do not fit task '{task.name}''s train split of "
                f"{len(train_codes)} rows: the data changed since the study was created."
            )
        return np.sort(stored)
    return carve_validation(
        train_codes, task.is_regression, source.validation_fraction, source.carve_seed, task.label_names
    )


def _check_pool(task: TaskConfig, pool: _Split, train: _Split) -> None:
    """A pool file must be items no run can train on: none of its texts may be a text of the train file."""
    columns = list(task.text_columns)
    seen = set(train.texts[columns].itertuples(index=False, name=None))
    shared = np.array([row in seen for row in pool.texts[columns].itertuples(index=False, name=None)])
    if shared.any():
        rows = np.arange(1, len(shared) + 1)[shared]
        raise DataError(
            f"The {pool.where} shares {int(shared.sum())} text(s) with the train file (pool {_rows(rows)}): a "
            "pool must hold items no run can train on; drop them from one of the files."
        )


def _take(split: _Split, rows: np.ndarray, where: str) -> _Split:
    texts = split.texts.iloc[rows].reset_index(drop=True)
    return _Split(texts, split.labels.iloc[rows].reset_index(drop=True), split.ids[rows], where)


def _frame(split: _Split, codes: np.ndarray) -> pd.DataFrame:
    frame = split.texts.reset_index(drop=True).copy()
    frame["label"] = codes
    return frame


def _duplicates(task: TaskConfig, train: pd.DataFrame, validation: pd.DataFrame) -> int:
    """Validation rows whose text(s) also occur in train; warned about, since they inflate scores."""
    columns = list(task.text_columns)
    seen = set(train[columns].itertuples(index=False, name=None))
    count = sum(row in seen for row in validation[columns].itertuples(index=False, name=None))
    if count:
        warnings.warn(
            f"task '{task.name}': {count} validation item(s) of {len(validation)} have the exact text of a train row; "
            "the model has seen them, so they inflate its scores (drop them from one split to measure it cleanly)",
            DataWarning,
            stacklevel=4,
        )
    return count

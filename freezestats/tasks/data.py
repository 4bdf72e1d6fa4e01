"""Load a task's train and validation splits from wherever the user keeps them.

Sources are tried in a fixed order so that a run is reproducible and offline-friendly:

1. a local directory (``--data-dir`` or ``FREEZESTATS_DATA``) laid out as ``<task>/{train,validation}.parquet``
   (the HF ``glue`` schema) or as GLUE's original TSVs (``SST-2/train.tsv``, ``CoLA/dev.tsv``, ...);
2. data shipped with freezestats (the demo task);
3. the Hugging Face hub (``datasets.load_dataset("nyu-mll/glue", task)``).

A user's own task (``[[tasks]]`` in a study spec) names its data itself: :mod:`freezestats.tasks.user_data`.

Every split is checked (columns, label type and range, at least two classes, not empty) before any
training starts, because a bad data set discovered after hours of GPU time is the worst outcome.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pandas as pd

from freezestats.exceptions import DataError
from freezestats.tasks import TaskConfig
from freezestats.tasks.bundled import bundled_path
from freezestats.tasks.taskdata import TaskData

__all__ = ["DATA_ENV_VAR", "TaskData", "load_task_data", "resolve_data_dir"]

DATA_ENV_VAR = "FREEZESTATS_DATA"
_SPLITS = ("train", "validation")


def resolve_data_dir(data_dir: str | os.PathLike[str] | None) -> Path | None:
    """The local data directory: the explicit option wins over the environment variable."""
    chosen = data_dir if data_dir is not None else os.environ.get(DATA_ENV_VAR) or None
    if chosen is None:
        return None
    path = Path(chosen).expanduser().resolve()
    if not path.is_dir():
        origin = "--data-dir" if data_dir is not None else DATA_ENV_VAR
        raise DataError(f"The data directory must exist, but {origin}={str(chosen)!r} is not a directory.")
    return path


def load_task_data(
    task: TaskConfig, data_dir: str | os.PathLike[str] | None = None, carve: np.ndarray | None = None
) -> TaskData:
    """Both splits of ``task`` from the first source that has them (see the module docstring).

    A user task (one with a ``source``, defined in a study spec) is read from its own files instead
    (:func:`~freezestats.tasks.user_data.load_user_data`); ``carve`` is then the validation rows a study stored,
    used in place of a fresh carve, and ``data_dir`` is not used.
    """
    if task.source is not None:
        from freezestats.tasks.user_data import load_user_data

        return load_user_data(task, carve=carve)
    root = resolve_data_dir(data_dir)
    if root is not None:
        found = _from_local(task, root)
        if found is not None:
            return found
    if task.bundled is not None:
        folder = bundled_path(f"data/demo/{task.bundled}")
        found = _from_parquet_dir(task, folder, f"bundled:{task.bundled}")
        if found is not None:
            return found
    if task.hub is not None:
        return _from_hub(task, root)
    raise DataError(f"No data for task '{task.name}': it is not in the data directory {root}.")


def _from_local(task: TaskConfig, root: Path) -> TaskData | None:
    parquet = _from_parquet_dir(task, root / task.name, f"local:{root / task.name}")
    if parquet is not None:
        return parquet
    if task.glue_tsv is not None and (root / task.glue_tsv.dir).is_dir():
        return _from_glue_tsv(task, root / task.glue_tsv.dir)
    return None


def _from_parquet_dir(task: TaskConfig, folder: Path, source: str) -> TaskData | None:
    files = {split: folder / f"{split}.parquet" for split in _SPLITS}
    if not all(path.is_file() for path in files.values()):
        present = [p.name for p in files.values() if p.is_file()]
        if present:
            raise DataError(
                f"Task '{task.name}' in {folder} needs train.parquet and validation.parquet, but only {present} exist."
            )
        return None
    frames = {}
    for split, path in files.items():
        try:
            frames[split] = pd.read_parquet(path)
        except Exception as err:  # pyarrow raises several unrelated types for corrupt files
            raise DataError(f"Cannot read {path} as parquet: {err}") from err
    return _checked(task, frames["train"], frames["validation"], source)


def _from_glue_tsv(task: TaskConfig, folder: Path) -> TaskData:
    layout = task.glue_tsv
    assert layout is not None  # guaranteed by the caller; narrows the type
    frames = {}
    for split, filename in (("train", layout.train), ("validation", layout.validation)):
        path = folder / filename
        if not path.is_file():
            raise DataError(f"Task '{task.name}' expects GLUE's {filename} in {folder}, but it is missing.")
        raw = pd.read_csv(
            path,
            sep="\t",
            quoting=csv.QUOTE_NONE,
            header=0 if layout.header else None,
            dtype=str,
            keep_default_na=False,
            on_bad_lines="error",
        )
        columns = [*layout.text, layout.label]
        missing = [c for c in columns if c not in raw.columns]
        if missing:
            raise DataError(f"{path} has no column(s) {missing}; it has {list(raw.columns)}.")
        frame = pd.DataFrame({name: raw[col] for name, col in zip(task.text_columns, layout.text, strict=True)})
        labels = raw[layout.label]
        if layout.label_map is not None:
            unknown = sorted(set(labels) - set(layout.label_map))
            if unknown:
                raise DataError(f"{path} has labels {unknown[:5]} outside {sorted(layout.label_map)}.")
            labels = labels.map(layout.label_map)
        frame["label"] = pd.to_numeric(labels, errors="coerce")
        frames[split] = frame
    return _checked(task, frames["train"], frames["validation"], f"glue-tsv:{folder}")


def _from_hub(task: TaskConfig, root: Path | None) -> TaskData:
    assert task.hub is not None
    try:
        import datasets

        loaded = datasets.load_dataset(task.hub["path"], task.hub.get("name"))
        frames = {split: loaded[split].to_pandas() for split in _SPLITS}
    except Exception as err:  # offline, hub down, renamed data set: all mean "not reachable"
        local_hint = (
            f"the data directory {root} has neither {task.name}/{{train,validation}}.parquet"
            + (f" nor {task.glue_tsv.dir}/" if task.glue_tsv else "")
            if root is not None
            else f"no local data directory was given (--data-dir or {DATA_ENV_VAR})"
        )
        raise DataError(
            f"No data for task '{task.name}': {local_hint}, and the Hugging Face hub "
            f"({task.hub['path']}/{task.hub.get('name')}) is not reachable ({type(err).__name__}). "
            f"Either point --data-dir / {DATA_ENV_VAR} at a folder with <task>/train.parquet and "
            f"<task>/validation.parquet (or GLUE's original TSVs), or connect to the hub."
        ) from err
    return _checked(task, frames["train"], frames["validation"], f"hub:{task.hub['path']}/{task.hub.get('name')}")


def _checked(task: TaskConfig, train: pd.DataFrame, validation: pd.DataFrame, source: str) -> TaskData:
    cleaned = {}
    for split, frame in (("train", train), ("validation", validation)):
        where = f"task '{task.name}', {split} split ({source})"
        columns = [*task.text_columns, task.label_column]
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise DataError(f"The {where} lacks column(s) {missing}; it has {list(frame.columns)}.")
        if len(frame) == 0:
            raise DataError(f"The {where} is empty.")
        labels = pd.to_numeric(frame[task.label_column], errors="coerce")
        if labels.isna().any():
            raise DataError(f"The {where} has {int(labels.isna().sum())} missing or non-numeric labels.")
        out = frame[list(task.text_columns)].astype(str).reset_index(drop=True)
        if task.is_regression:
            out["label"] = labels.to_numpy(dtype=np.float32)
        else:
            values = labels.to_numpy()
            if not np.all(np.equal(np.mod(values, 1), 0)):
                raise DataError(f"The {where} has non-integer labels, but '{task.name}' is a classification task.")
            ints = values.astype(np.int64)
            bad = sorted(set(ints[(ints < 0) | (ints >= task.num_labels)].tolist()))
            if bad:
                raise DataError(f"Labels must lie in 0..{task.num_labels - 1}, but the {where} has {bad[:5]}.")
            if split == "train" and len(np.unique(ints)) < 2:
                raise DataError(f"The {where} has a single class ({ints[0]}); nothing can be learned from it.")
            out["label"] = ints
        cleaned[split] = out
    return TaskData(task=task, train=cleaned["train"], validation=cleaned["validation"], source=source)

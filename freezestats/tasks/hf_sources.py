"""A user task's splits from the ``datasets`` library: a ``save_to_disk`` folder, or a dataset id (the hub).

Both end as the same :class:`~freezestats.tasks.sources.RawSplit` frames as local files, so every check is the
same. Their identity: a ``save_to_disk`` folder is hashed file by file (its Arrow files are the data); a hub
dataset by the content of each split, since its cache files are the library's, not the user's.

``hub`` is read with ``datasets.load_dataset(path, config)``: an id on the Hugging Face hub, or the folder of a
local copy (a folder of data files needs no loading script, so it loads offline: how the tests check this path).
"""

from __future__ import annotations

import hashlib
from typing import Any

import pandas as pd

from freezestats.exceptions import DataError
from freezestats.tasks.sources import DataSource, RawSplit, sha256_file

__all__ = ["read_dataset_splits"]


def read_dataset_splits(source: DataSource) -> dict[str, RawSplit]:
    """The train split and, when the dataset has them, validation and test (a split named explicitly must exist)."""
    loaded = _load_disk(source) if source.kind == "disk" else _load_hub(source)
    available = _split_names(loaded)
    folder = _folder_digest(source) if source.kind == "disk" else None
    out: dict[str, RawSplit] = {}
    for split in ("train", "validation", "test"):
        name = source.split_name(split)
        assert name is not None  # disk and hub sources name every split (by default its own name)
        if name not in available:
            explicit = split in source.splits
            if split == "train" or explicit:
                raise DataError(
                    f"The {source.describe()} has no split {name!r} for {split}; it has {sorted(available)}"
                    + (". Name it with `splits`" if split == "train" and not explicit else "")
                    + "."
                )
            continue
        dataset = loaded[name] if _is_dict(loaded) else loaded
        frame = dataset.to_pandas()
        where = f"{source.describe()} [{name}]"
        out[split] = RawSplit(frame, where, _identity(source, name, frame, folder))
    return out


def _load_disk(source: DataSource) -> Any:
    folder = source.resolve(source.path)
    if not folder.is_dir():
        raise DataError(f"The dataset folder {source.path!r} does not exist ({folder}).")
    import datasets

    try:
        return datasets.load_from_disk(str(folder))
    except Exception as err:  # FileNotFoundError, ValueError, pyarrow errors: all mean "not a saved dataset"
        raise DataError(
            f"Cannot read {source.path!r} as a folder written by datasets.save_to_disk: {_first_line(err)}."
        ) from err


def _load_hub(source: DataSource) -> Any:
    local = source.resolve(source.path)
    path = str(local) if local.exists() else source.path
    import datasets

    try:
        return datasets.load_dataset(path, source.config)
    except Exception as err:  # offline, unknown id or config, no access: all mean "cannot be loaded here"
        raise DataError(
            f"Cannot load the dataset {source.path!r}"
            + (f" (config {source.config!r})" if source.config else "")
            + f" with datasets.load_dataset: {_first_line(err)}. Offline, point `hub` at a local copy's folder, "
            "or save it with save_to_disk and use `disk`."
        ) from err


def _is_dict(loaded: Any) -> bool:
    return hasattr(loaded, "keys") and not hasattr(loaded, "to_pandas")


def _split_names(loaded: Any) -> list[str]:
    """A DatasetDict's split names; a lone Dataset (``save_to_disk`` of one split) is the train split."""
    return sorted(loaded.keys()) if _is_dict(loaded) else ["train"]


def _folder_digest(source: DataSource) -> tuple[str, int]:
    """The sha256 of a ``save_to_disk`` folder as a whole (every file's relative path and hash), and its file count."""
    folder = source.resolve(source.path)
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.relative_to(folder).as_posix()}:{sha256_file(path)}\n".encode())
    return digest.hexdigest(), len(files)


def _identity(source: DataSource, split: str, frame: pd.DataFrame, folder: tuple[str, int] | None) -> dict[str, str]:
    if folder is not None:
        return {"path": f"{source.path} [{split}]", "sha256": folder[0], "files": str(folder[1])}
    content = pd.util.hash_pandas_object(frame.astype(str), index=False).to_numpy().tobytes()
    return {"path": f"{source.describe()} [{split}]", "content_sha256": hashlib.sha256(content).hexdigest()}


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0].rstrip(".") if text else type(err).__name__

"""Where a user's task keeps its data, and reading local files: CSV, TSV, JSONL and Parquet.

A task defined in a study spec (``[[tasks]]``) names its data in one of three ways, each a
:class:`DataSource`: local files per split (``train``, ``validation``, ``test``), a folder written by
``datasets.save_to_disk`` (``disk``), or a dataset id for ``datasets.load_dataset`` (``hub``; the latter two are
read by :mod:`freezestats.tasks.hf_sources`). Reading is kept apart from checking (:mod:`freezestats.tasks.user_data`)
so that every format ends as the same plain frame of strings and values, checked one way.

A file is read once, as bytes: its sha256 is the data's identity stored with the study (a resume on changed
files is refused), and a parse error names the line, so a broken row costs a glance, not a search.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from freezestats.exceptions import DataError

__all__ = ["FORMATS", "SPLITS", "DataSource", "RawSplit", "read_file_split", "sha256_file"]

SPLITS = ("train", "validation", "test", "pool")
"""The splits a user task may have: train (required), validation (else carved from train), test (kept aside)."""
FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet"}
"""File suffix -> format; a ``format`` key in the task overrides it."""


@dataclass(frozen=True)
class DataSource:
    """Where a user task's splits are: ``files`` (split -> path), a ``disk`` folder, or a ``hub`` dataset.

    Relative paths are read from ``root`` (the folder of the spec or task file that names them), which is kept
    out of the task's meaning: the spec hash holds the paths as written, so a project that moves keeps its study.
    """

    kind: Literal["files", "disk", "hub"]
    files: Mapping[str, str] = field(default_factory=dict)
    path: str = ""
    """``disk``: the folder ``save_to_disk`` wrote; ``hub``: the dataset id (or the folder of a local copy)."""
    config: str | None = None
    """``hub``: the configuration name (``datasets.load_dataset(path, config)``)."""
    splits: Mapping[str, str] = field(default_factory=dict)
    """``disk`` / ``hub``: split -> the dataset's own split name (default: the same name)."""
    format: str | None = None
    """``files``: csv, tsv, jsonl or parquet for every file (default: from each file's suffix)."""
    validation_fraction: float = 0.2
    """Without a validation split: the share of train carved out as validation (stratified, fixed seed)."""
    carve_seed: int = 0
    root: str = field(default="", compare=False)

    def resolve(self, path: str) -> Path:
        """``path`` as written in the spec, read from :attr:`root` when relative."""
        candidate = Path(path).expanduser()
        return candidate if candidate.is_absolute() or not self.root else Path(self.root) / candidate

    def split_name(self, split: str) -> str | None:
        """The dataset's name for ``split`` (``disk`` / ``hub``), or the file (``files``); ``None``: not given."""
        if self.kind == "files":
            return self.files.get(split)
        return self.splits.get(split, split)

    @property
    def names_validation(self) -> bool:
        """Whether the spec names a validation split explicitly (else it is used when present, or carved)."""
        return "validation" in (self.files if self.kind == "files" else self.splits)

    def stored_form(self) -> dict[str, Any]:
        """The source as plain data, defaults left out: what the spec hash and the study keep (``root`` apart)."""
        data: dict[str, Any] = {}
        if self.kind == "files":
            data.update(self.files)
            if self.format is not None:
                data["format"] = self.format
        else:
            data[self.kind] = self.path
            if self.config is not None:
                data["config"] = self.config
            if self.splits:
                data["splits"] = dict(self.splits)
        if self.validation_fraction != DataSource.validation_fraction:
            data["validation_fraction"] = self.validation_fraction
        if self.carve_seed != DataSource.carve_seed:
            data["carve_seed"] = self.carve_seed
        return data

    def describe(self) -> str:
        """One phrase for ``validate`` and provenance: ``files train.csv, validation.csv`` or ``hub id/config``."""
        if self.kind == "files":
            return "files " + ", ".join(self.files.values())
        return f"{self.kind} {self.path}" + (f"/{self.config}" if self.config else "")


@dataclass(frozen=True)
class RawSplit:
    """One split as read, before any check: its frame, where it came from, and its identity (path and hash)."""

    frame: pd.DataFrame
    where: str
    identity: dict[str, str]


def sha256_file(path: Path) -> str:
    """The sha256 of a file's bytes, read in blocks (a data folder may hold large Arrow files)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_file_split(source: DataSource, split: str) -> RawSplit:
    """The file of ``split``: read by its format, hashed; a missing or unreadable file is a one-line DataError."""
    written = source.files[split]
    path = source.resolve(written)
    if not path.is_file():
        raise DataError(f"The {split} file {written!r} does not exist ({path}).")
    fmt = source.format or FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise DataError(
            f"The {split} file {written!r} has no known format: name it .csv, .tsv, .jsonl or .parquet, or set "
            f"`format` in the task."
        )
    data = path.read_bytes()
    frame = _parse(data, fmt, written)
    return RawSplit(frame, written, {"path": written, "sha256": hashlib.sha256(data).hexdigest()})


def _parse(data: bytes, fmt: str, where: str) -> pd.DataFrame:
    if fmt == "parquet":
        try:
            return pd.read_parquet(io.BytesIO(data))
        except Exception as err:  # pyarrow raises several unrelated types for a file that is not parquet
            raise DataError(f"Cannot read {where} as Parquet: {_first_line(err)}.") from err
    text = _decode(data, where)
    if fmt == "jsonl":
        return _read_jsonl(text, where)
    try:
        return pd.read_csv(
            io.StringIO(text),
            sep="\t" if fmt == "tsv" else ",",
            quoting=csv.QUOTE_NONE if fmt == "tsv" else csv.QUOTE_MINIMAL,
            dtype=str,
            keep_default_na=False,
            on_bad_lines="error",
        )
    except pd.errors.EmptyDataError as err:
        raise DataError(f"Cannot read {where}: the file is empty (no header line).") from err
    except (pd.errors.ParserError, ValueError) as err:  # the C parser names the line ("... in line 7, saw 3")
        raise DataError(f"Cannot read {where} as {fmt.upper()}: {_first_line(err)}.") from err


def _decode(data: bytes, where: str) -> str:
    """UTF-8 text (a BOM is dropped); bytes that are not UTF-8 are refused with their line."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise DataError(
            f"Cannot read {where}: line {line} is not UTF-8 text (byte {err.start}); save it as UTF-8."
        ) from err


def _read_jsonl(text: str, where: str) -> pd.DataFrame:
    """One JSON object per line (blank lines skipped); a bad line is named."""
    records: list[Mapping[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"Cannot read {where} as JSONL: line {number} is not valid JSON ({err.msg}).") from err
        if not isinstance(record, Mapping):
            raise DataError(f"Cannot read {where} as JSONL: line {number} is a {type(record).__name__}, not an object.")
        records.append(record)
    if not records:
        raise DataError(f"Cannot read {where}: the file holds no JSON lines.")
    return pd.DataFrame.from_records(records)


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0].rstrip(".") if str(err).strip() else type(err).__name__

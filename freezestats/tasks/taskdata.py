"""A task's loaded splits (:class:`TaskData`) and, for a user's task, where its rows came from (:class:`DataOrigin`).

Its own module so that both loaders, the packaged tasks' (:mod:`freezestats.tasks.data`) and the user tasks'
(:mod:`freezestats.tasks.user_data`), return the same type without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from freezestats.tasks import TaskConfig

__all__ = ["DataOrigin", "TaskData"]


@dataclass(frozen=True)
class DataOrigin:
    """What a user task's loading found out: row ids, file identities, the carve, the test split, duplicates.

    ``train_ids`` and ``validation_ids`` are the user's row ids (the task's ``id_column``, else the row number in
    its split, from 1) of the train pool's and the validation set's rows, in their order; per-item predictions
    keep them. ``carved`` holds the positions (from 0) of the train rows that became the validation set when
    none was given, ``None`` otherwise.
    """

    train_ids: np.ndarray
    validation_ids: np.ndarray
    files: dict[str, dict[str, str]]
    carved: np.ndarray | None = None
    n_train_file: int = 0
    n_test: int | None = None
    duplicates: int = 0

    def identity(self, task: TaskConfig) -> dict[str, Any]:
        """What the study stores to know this data again: each split's path and hash, and the label map."""
        return {"files": self.files, "labels": list(task.label_names) if task.label_names else None}


@dataclass(frozen=True)
class TaskData:
    """A task's two splits as DataFrames with the task's text columns and ``label``, plus provenance.

    ``label`` holds class codes ``0..K-1`` for classification (a user task's names are ``task.label_names``) and
    floats for regression. ``origin`` is set for a user task (:class:`DataOrigin`), ``None`` for a packaged one.
    """

    task: TaskConfig
    train: pd.DataFrame
    validation: pd.DataFrame
    source: str
    origin: DataOrigin | None = None
    pool: pd.DataFrame | None = None
    """A user task's own evaluation pool (its ``pool`` file, checked against train), else None."""

    @property
    def train_labels(self) -> np.ndarray:
        return self.train["label"].to_numpy()

    @property
    def validation_labels(self) -> np.ndarray:
        return self.validation["label"].to_numpy()

    @property
    def validation_ids(self) -> np.ndarray:
        """Each validation item's row id: the user's (a user task) or its position in the split."""
        return self.origin.validation_ids if self.origin is not None else np.arange(len(self.validation))

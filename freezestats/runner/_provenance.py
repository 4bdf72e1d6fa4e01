"""Provenance that travels with a study: the exact subsets, the code and data it ran on, the libraries.

Stored once when a study is first run, and checked on every resume: if the task data changed since, the
computed subsets or validation halves differ from the stored ones, and mixing results is refused.
"""

from __future__ import annotations

import datetime as _dt
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from freezestats import __version__
from freezestats.exceptions import StorageError
from freezestats.runner._prepare import PreparedStudy, prepare_study
from freezestats.spec.grid import FULL
from freezestats.study.trials import set_user_attrs
from freezestats.tasks.taskdata import TaskData

__all__ = ["library_versions", "store_study_attrs", "stored_carves", "with_stored_carves"]

_CARVE = "validation_carve:"


def store_study_attrs(study: optuna.Study, prepared: PreparedStudy, artifacts: Path) -> None:
    """Provenance and the exact subsets; stored once, and checked on resume (the data must not change)."""
    for key, value in _subset_attrs(prepared).items():
        stored = study.user_attrs.get(key)
        if stored is None:
            set_user_attrs(study, {key: value})
        elif key.startswith("subsets:") and all(value.get(size) == idx for size, idx in stored.items()):
            if set(value) != set(stored):  # an extended grid adds sizes; the stored ones must not change
                set_user_attrs(study, {key: {**stored, **value}})
        elif stored != value:
            raise StorageError(
                f"The stored train subsets, validation halves or evaluation pool of study '{study.study_name}' ({key}) "
                "differ from "
                f"those computed now: the task data changed since the study was created. Refusing to mix results."
            )
    if "provenance" not in study.user_attrs:
        set_user_attrs(study, {"provenance": _provenance(prepared), "artifact_dir": str(artifacts)})


def _subset_attrs(prepared: PreparedStudy) -> dict[str, Any]:
    """Each task's train subsets per draw and size (``all`` for the whole pool) and its select half."""
    attrs: dict[str, Any] = {}
    for name, task in prepared.tasks.items():
        for draw, by_size in task.subsets.items():
            attrs[f"subsets:{name}:draw={draw}"] = {
                str(size): (
                    "all"
                    if size == prepared.pool_sizes[name] and FULL in prepared.spec.grid.train_sizes
                    else idx.tolist()
                )
                for size, idx in sorted(by_size.items())
            }
        attrs[f"validation_select:{name}"] = task.select_idx.tolist()
        if task.pool is not None:  # the evaluation pool: a resume must reserve (and score) the same items
            attrs[f"evaluation_pool:{name}"] = {"n": len(task.pool), "identity": task.pool.identity(
                task.data.task.text_columns), "population": task.pool.population}  # fmt: skip
    for name, carved in prepared.carves().items():
        attrs[f"{_CARVE}{name}"] = carved.tolist()
    return attrs


def stored_carves(study: optuna.Study) -> dict[str, np.ndarray]:
    """The validation rows each user task's study carved from train (task -> row positions, from 0)."""
    return {
        key[len(_CARVE) :]: np.asarray(rows, dtype=np.int64)
        for key, rows in study.user_attrs.items()
        if key.startswith(_CARVE)
    }


def with_stored_carves(study: optuna.Study, prepared: PreparedStudy, data_dir: str | Path | None) -> PreparedStudy:
    """``prepared``, or prepared again with the carves ``study`` stored where a fresh carve differs from them.

    Only after the data's identity passed (same files): the carve is then a choice made once, and a resume, or
    another machine whose library draws another carve from the same seed, keeps the one the runs were scored on.
    """
    stored = stored_carves(study)
    now = prepared.carves()
    if all(np.array_equal(stored[name], now.get(name, np.empty(0))) for name in stored if name in prepared.tasks):
        return prepared
    return prepare_study(prepared.spec, data_dir, carves=stored)


def _provenance(prepared: PreparedStudy) -> dict[str, Any]:
    return {
        "freezestats_version": __version__,
        "git_hash": _git_hash(),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "spec_hash": prepared.spec.spec_hash,
        "spec_source": prepared.spec.source,
        "tasks": {
            name: {
                "version": t.data.task.version,
                "source": t.data.source,
                "n_train": len(t.data.train),
                "n_validation": len(t.data.validation),
                **_user_task(t.data),
            }
            for name, t in prepared.tasks.items()
        },
        "n_layers": prepared.n_layers,
        "platform": platform.platform(),
        "versions": library_versions(),
    }


def _user_task(data: TaskData) -> dict[str, Any]:
    """What the report says of a user task: its kind, class names, carved validation rows, test split, duplicates."""
    if data.origin is None:
        return {}
    return {
        "kind": data.task.kind_name,
        "labels": list(data.task.label_names) if data.task.label_names else None,
        "carved_validation": None if data.origin.carved is None else len(data.origin.carved),
        "n_test": data.origin.n_test,
        "duplicates": data.origin.duplicates,
    }


def library_versions() -> dict[str, str]:
    """The versions of the libraries that shape a result (stored with the study and with every trial)."""
    import torch
    import transformers

    return {
        "freezestats": __version__,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "optuna": optuna.__version__,
        "numpy": np.__version__,
    }


def _git_hash() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None

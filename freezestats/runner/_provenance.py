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
from freezestats.runner._prepare import PreparedStudy
from freezestats.spec.grid import FULL
from freezestats.study.trials import set_user_attrs

__all__ = ["library_versions", "store_study_attrs"]


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
                f"The stored train subsets or validation halves of study '{study.study_name}' ({key}) differ from "
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
    return attrs


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
            }
            for name, t in prepared.tasks.items()
        },
        "n_layers": prepared.n_layers,
        "platform": platform.platform(),
        "versions": library_versions(),
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

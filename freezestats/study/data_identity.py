"""The identity of a user task's data, kept with the study: a resume on changed files is refused with the change.

A packaged task's data is pinned by its name and version (and its stored subsets); a user's task reads whatever
its files hold today. So the study keeps, per user task, each split's path and sha256 (the file's bytes; a
``save_to_disk`` folder's files; a hub split's content) and the label map built from train
(:meth:`freezestats.tasks.taskdata.DataOrigin.identity`). A later ``run`` or ``worker`` compares the data it
reads with that, before it writes anything, and refuses a difference as a changed spec is refused: results
measured on two versions of a data set must never be pooled silently. The task's definition itself is part of
the stored spec (``task_definitions``), guarded by the spec hash.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import optuna

from freezestats.exceptions import StorageError
from freezestats.study.extend import _diff

__all__ = ["DATA_ATTR", "check_data_identity", "store_data_identity"]

DATA_ATTR = "data_identity"
"""The study's user attribute: task -> its data's identity (user tasks only)."""
_HEX = re.compile(r"\b([0-9a-f]{12})[0-9a-f]{52}\b")


def check_data_identity(study: optuna.Study, identity: Mapping[str, Any]) -> None:
    """Refuse (:class:`StorageError`) when a user task's data differs from what ``study`` stored for it.

    Tasks the study has not stored yet (a new study, a task added with ``--extend``, a study from before data
    identities) pass; :func:`store_data_identity` then records them.
    """
    stored = study.user_attrs.get(DATA_ATTR) or {}
    now = json.loads(json.dumps(dict(identity)))
    changed = [task for task in now if task in stored and stored[task] != now[task]]
    if not changed:
        return
    changes = _diff({task: stored[task] for task in changed}, {task: now[task] for task in changed})
    shown = "; ".join(_HEX.sub(r"\1…", change) for change in changes[:4]) + ("; …" if len(changes) > 4 else "")
    raise StorageError(
        f"Study '{study.study_name}' ran on other data for task(s) {', '.join(changed)}; refusing to mix results. "
        f"Changed: {shown}. Restore the data the study ran on, or give the study a new `name` (or another storage)."
    )


def store_data_identity(study: optuna.Study, identity: Mapping[str, Any]) -> None:
    """Record the identity of every user task the study has not recorded yet (after :func:`check_data_identity`)."""
    stored = dict(study.user_attrs.get(DATA_ATTR) or {})
    new = {task: value for task, value in json.loads(json.dumps(dict(identity))).items() if task not in stored}
    if new:
        study.set_user_attr(DATA_ATTR, {**stored, **new})

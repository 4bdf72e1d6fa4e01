"""One cell becomes one Optuna trial: how cells, results and provenance are kept in the study database.

The study database is plain Optuna RDB storage, so it opens in optuna-dashboard and any Optuna storage
URL works. Conventions:

* every cell is created with ``enqueue_trial`` (state WAITING) and claimed by exactly one worker;
* the cell's coordinates are trial *params* (task, frozen_layers, train_size, subset_draw, seed,
  learning_rate, order_seed in a grid crossed with ``grid.order_seeds``, pair_encoding in a ``bi`` cell); its
  identity is the user attribute ``cell_key``, its role (grid or search) the attribute ``role``, and a ``bi``
  cell also has the attribute ``pair_encoding`` (so a worker knows to read that param back);
* results are trial *user attributes* (see :func:`record_outcome`), the objective value is the primary
  metric's ``best_dev``;
* study-level user attributes hold the spec, its hash, provenance, the exact train-subset indices and
  the validation halves, so that any run can be reproduced and audited from the database alone;
* per-example predictions of the final checkpoint are Optuna artifacts in a folder next to the DB.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState

from freezestats.exceptions import StorageError
from freezestats.spec.pairs import CROSS, PAIR_ENCODINGS
from freezestats.spec.study import StudySpec
from freezestats.study.cells import Cell, CellRole
from freezestats.study.data_identity import check_data_identity, store_data_identity
from freezestats.study.extend import _diff, _not_an_extension
from freezestats.study.storage import (  # noqa: F401 (GRACE_PERIOD, HEARTBEAT_INTERVAL: re-exported)
    DEFAULT_STORAGE,
    GRACE_PERIOD,
    HEARTBEAT_INTERVAL,
    artifact_dir_for,
    open_storage,
)

__all__ = [
    "DEFAULT_STORAGE",
    "artifact_dir_for",
    "cell_distributions",
    "create_or_load_study",
    "load_study",
    "open_storage",
]

SPEC_ATTR = "freezestats_spec"
SPEC_HASH_ATTR = "spec_hash"


def create_or_load_study(
    storage: optuna.storages.BaseStorage,
    spec: StudySpec,
    extend: bool = False,
    data_identity: Mapping[str, Any] | None = None,
) -> optuna.Study:
    """The study named after the spec; an existing one must have been created from the same spec.

    With ``extend``, the spec may add values to the grid (tasks, frozen levels, sizes, seeds, order seeds,
    subset draws) and nothing else: the stored spec is replaced, its predecessors are kept in
    ``spec_history``, and only the new cells will run.

    ``data_identity``: the user tasks' data as read now (:mod:`freezestats.study.data_identity`); an existing
    study that ran on other data is refused before anything is written, like one with another spec.
    """
    study = optuna.create_study(storage=storage, study_name=spec.name, direction="maximize", load_if_exists=True)
    stored_hash = study.user_attrs.get(SPEC_HASH_ATTR)
    if stored_hash is not None and data_identity:
        check_data_identity(study, data_identity)
    if stored_hash is None:
        study.set_user_attr(SPEC_ATTR, spec.to_dict())
        study.set_user_attr(SPEC_HASH_ATTR, spec.spec_hash)
    elif stored_hash != spec.spec_hash:
        stored = study.user_attrs.get(SPEC_ATTR, {})
        new = json.loads(json.dumps(spec.to_dict()))
        changes = _diff(stored, new)
        if not extend:
            raise StorageError(
                f"Study '{spec.name}' already exists in this storage with a different spec; refusing to mix "
                f"results. Changed: {'; '.join(changes) or 'unknown'}. Give the study a new `name`, use another "
                f"storage, or pass --extend if the change only adds grid values."
            )
        problems = _not_an_extension(stored, new)
        if problems:
            raise StorageError(
                "--extend may only add grid values (tasks, frozen_layers, train_sizes, seeds, order_seeds, "
                f"subset_draws, arm tables and levels) to "
                f"study '{spec.name}', but: {'; '.join(problems)}."
            )
        history = [*study.user_attrs.get("spec_history", []), {"spec": stored, "spec_hash": stored_hash}]
        study.set_user_attr("spec_history", history)
        study.set_user_attr(SPEC_ATTR, new)
        study.set_user_attr(SPEC_HASH_ATTR, spec.spec_hash)
    elif spec.task_definitions:  # same meaning; the folder the data is read from may have moved: workers read it
        new = json.loads(json.dumps(spec.to_dict()))
        if study.user_attrs.get(SPEC_ATTR) != new:
            study.set_user_attr(SPEC_ATTR, new)
    if data_identity:
        store_data_identity(study, data_identity)
    return study


def load_study(storage: optuna.storages.BaseStorage, study_name: str | None) -> optuna.Study:
    """A freezestats study from ``storage``; ``study_name`` may be omitted when the storage holds one."""
    names = [s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)]
    if study_name is None:
        if len(names) != 1:
            listing = ", ".join(names) if names else "none"
            raise StorageError(f"This storage holds {len(names)} studies ({listing}); choose one with --study-name.")
        study_name = names[0]
    if study_name not in names:
        raise StorageError(f"No study named '{study_name}' in this storage; it holds: {', '.join(names) or 'none'}.")
    study = optuna.load_study(study_name=study_name, storage=storage)
    if SPEC_HASH_ATTR not in study.user_attrs:
        raise StorageError(f"Study '{study_name}' was not created by freezestats (it has no stored spec).")
    return study


def cell_distributions(
    spec: StudySpec, crossed: bool = False, paired: bool = False
) -> dict[str, optuna.distributions.BaseDistribution]:
    """Distributions of the cell params: wide numeric ranges, so that extending a grid never conflicts.

    ``crossed``: a grid cell of a study with ``grid.order_seeds``, which has the ``order_seed`` param too;
    ``paired``: a cell that is not ``cross`` (``grid.pair_encoding``), which has ``pair_encoding``.
    A spec with ``[[arms]]`` has ``arm_level`` in place of ``frozen_layers`` (the arm itself is a user attribute,
    :meth:`Cell.attrs`), and the arms without a learning rate leave ``learning_rate`` out (:func:`suggest_cell`).
    """
    distributions: dict[str, optuna.distributions.BaseDistribution] = {
        "task": CategoricalDistribution(spec.tasks + tuple(group.name for group in spec.groups)),
    }
    if spec.has_arms:
        distributions["arm_level"] = IntDistribution(-1, 4096)
    else:
        distributions["frozen_layers"] = IntDistribution(-1, 4096)
    distributions |= {
        "train_size": IntDistribution(1, 10**9),
        "subset_draw": IntDistribution(0, 10**6),
        "seed": IntDistribution(0, 2**32),
        "learning_rate": FloatDistribution(1e-12, 1e12, log=True),
    }
    if crossed:
        distributions["order_seed"] = IntDistribution(0, 2**32)
    if paired:
        distributions["pair_encoding"] = CategoricalDistribution(PAIR_ENCODINGS)
    return distributions


def suggest_cell(trial: optuna.Trial, spec: StudySpec) -> Cell:
    """Read the enqueued cell back from a claimed trial (suggest returns the enqueued values).

    Grid cells of a crossed study (``grid.order_seeds``) carry an ``order_seed``; search cells never do. Cells
    that are not ``cross`` carry ``pair_encoding`` (their user attribute says so).
    """
    role = CellRole(trial.user_attrs.get("role", CellRole.GRID.value))
    arm = trial.user_attrs.get("arm")
    paired = trial.user_attrs.get("pair_encoding", CROSS) != CROSS
    values: dict[str, Any] = {}
    crossed = spec.grid.crossed and role is CellRole.GRID
    for name, dist in cell_distributions(spec, crossed=crossed, paired=paired).items():
        if name == "learning_rate" and arm is not None and spec.variant(arm).learning_rate is None:
            values[name] = None  # an arm without a rate (a probe)
        elif isinstance(dist, CategoricalDistribution):
            values[name] = trial.suggest_categorical(name, dist.choices)
        elif isinstance(dist, IntDistribution):
            values[name] = trial.suggest_int(name, dist.low, dist.high)
        else:
            values[name] = trial.suggest_float(name, dist.low, dist.high, log=True)
    if "arm_level" in values:
        values["frozen_layers"] = values.pop("arm_level")
    return Cell(**values, role=role, arm=arm)


def copy_trial(study: optuna.Study, source: FrozenTrial, cell: Cell, spec: StudySpec) -> None:
    """Record ``cell`` as done by an identical run that already exists (a search trial at the chosen rate).

    Only with ``lr_search.reuse``: the copy is flagged (``reused_from_trial``, ``lr_search_reuse``), since
    a run copied because its rate won the search carries the winner's curse.
    """
    attrs = dict(source.user_attrs)
    attrs.update(cell_key=cell.key, role=cell.role.value, reused_from_trial=source.number, lr_search_reuse=True)
    study.add_trial(
        optuna.trial.create_trial(
            params=cell.params(),
            distributions=cell_distributions(
                spec, crossed=cell.order_seed is not None, paired=cell.pair_encoding != CROSS
            ),
            value=source.value,
            user_attrs=attrs,
            state=TrialState.COMPLETE,
        )
    )


def set_user_attrs(target: optuna.Trial | optuna.Study, attrs: Mapping[str, Any]) -> None:
    """Store JSON-safe values (numpy scalars and tuples are converted); a trial's in one transaction where the
    storage can (:meth:`~freezestats.study.storage._HeartbeatOnClaimStorage.set_trial_user_attrs`), so that a
    run's record is stored whole or not at all, with one commit instead of one per attribute."""
    safe = {key: json.loads(json.dumps(value, default=_to_builtin)) for key, value in attrs.items()}
    storage = getattr(target, "storage", None)
    # Optuna wraps RDB storage in its _CachedStorage, which hands attribute writes to the RDB storage unchanged
    batch = getattr(getattr(storage, "_backend", storage), "set_trial_user_attrs", None)
    if isinstance(target, optuna.Trial) and batch is not None:
        batch(target._trial_id, safe)
        target._cached_frozen_trial.user_attrs.update(safe)  # what Trial.set_user_attr does for each key
        return
    for key, value in safe.items():
        target.set_user_attr(key, value)


def _to_builtin(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")

"""The per-example predictions of every run, gathered from a study's artifacts into one long table.

Every run is scored on the same validation items, so item-sampling noise is shared by all runs and cannot be
seen in the one-row-per-run results table. The item-level statistics (:mod:`freezestats.stats.items.uncertainty`) need
which items each run got right, at the checkpoint the analysed metric scores. The runner keeps that per run
as an Optuna artifact (:func:`freezestats.training.predictions.predictions_frame`); this module joins them to the runs
so that a study can be published as two files (``results.csv`` and ``predictions.parquet``) and analysed
without its database.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from freezestats.exceptions import StorageError

__all__ = [
    "ITEM_COLUMNS",
    "RUN_KEYS",
    "USER_ITEM_COLUMNS",
    "export_item_predictions",
    "item_predictions",
    "load_item_table",
    "load_pool_table",
    "pool_file",
    "pool_item_predictions",
    "pool_populations",
    "read_item_predictions",
    "study_artifacts",
    "study_item_predictions",
]

#: The columns that tie an item row to its run in the results table.
RUN_KEYS = ["trial", "task", "frozen_layers", "train_size", "subset_draw", "seed", "order_seed"]
#: One row per (run, validation item): the keys of its run, the item, its label and half, and the prediction
#: of each stored checkpoint (``best`` scores ``best_dev``, ``heldout`` ``heldout``, ``final`` ``final_dev``).
ITEM_COLUMNS = [*RUN_KEYS, "idx", "label", "half", "prediction_best", "prediction_heldout", "prediction_final"]
#: (``arm`` and ``arm_level`` follow them when the results table has them: a study with ``[[arms]]``.)
USER_ITEM_COLUMNS = ["row_id", "label_name"]
"""A user task's item columns, after the others when its runs stored them: the user's row id of the item and its
class name (``label`` holds the class code)."""


def item_predictions(results: pd.DataFrame, artifact_dir: str | Path) -> pd.DataFrame:
    """The long item table (:data:`ITEM_COLUMNS`) of the grid runs of ``results`` whose artifact is present.

    Runs without a ``predictions_artifact`` (stored before the runner kept predictions, or reused search runs)
    are left out; a run whose artifact file is missing raises, because a partial copy of a study would
    otherwise be analysed as if it were whole.
    """
    folder = Path(artifact_dir)
    if "predictions_artifact" not in results.columns:
        raise StorageError("The results table has no `predictions_artifact` column: export it with freezestats.")
    runs = results[results["predictions_artifact"].notna()]
    if "role" in runs.columns:
        runs = runs[runs["role"].astype(str).str.lower() == "grid"]
    arm_keys = [key for key in ("arm", "arm_level") if key in runs.columns]  # which arm made each run, when known
    frames = []
    for run in runs.itertuples(index=False):
        path = folder / str(run.predictions_artifact)
        if not path.is_file():
            raise StorageError(
                f"The predictions of trial {run.trial} ({path.name}) are not in {folder}; copy the study's artifact "
                "folder along with its database (default: <db>.artifacts beside it)."
            )
        user = [c for c in USER_ITEM_COLUMNS if c in pq.read_schema(path).names]
        frame = pd.read_parquet(
            path, columns=["idx", "label", "half", "prediction_best", "prediction_heldout", "prediction", *user]
        ).rename(columns={"prediction": "prediction_final"})
        for key in [*RUN_KEYS, *arm_keys]:
            frame[key] = getattr(run, key)
        frames.append(frame)
    if not frames:
        raise StorageError("No run of the results table has stored per-example predictions.")
    table = pd.concat(frames, ignore_index=True)
    user = [c for c in USER_ITEM_COLUMNS if c in table.columns]
    if "row_id" in table.columns:
        table["row_id"] = _one_type(table["row_id"])
    return table[[*ITEM_COLUMNS, *arm_keys, *user]]


def _one_type(ids: pd.Series) -> pd.Series:
    """Row ids of one type, as a parquet column needs: integers (nullable) when every id is one, else strings."""
    known = ids.dropna()
    if all(isinstance(v, (int, np.integer)) for v in known):
        return ids.astype("Int64")
    return ids.map(lambda v: None if pd.isna(v) else str(v))


def study_item_predictions(
    storage: str, study_name: str | None = None, runs: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The item table of a study, read from its database and its artifact folder.

    ``runs`` is the study's results table when the caller has built it already (``analyze --storage`` has):
    building it reads every trial of the database, so it is done once.
    """
    from freezestats.results.export import results_table

    study, folder = study_artifacts(storage, study_name)
    return item_predictions(results_table(study) if runs is None else runs, folder)


def study_artifacts(storage: str, study_name: str | None) -> tuple[Any, Path]:
    """The study in ``storage`` and the folder its artifacts are in now."""
    from freezestats.study.storage import artifact_dir_for, open_storage
    from freezestats.study.trials import load_study

    study = load_study(open_storage(storage, must_exist=True), study_name)
    folder = Path(study.user_attrs.get("artifact_dir") or artifact_dir_for(storage))
    if not folder.is_dir():  # the study moved (a committed example): its artifacts are beside the database
        folder = artifact_dir_for(storage)
    return study, folder


#: One row per (run, evaluation-pool item): the keys of its run, the item, its label, and the prediction at the
#: checkpoint chosen on the select half (the only checkpoint the pool is scored at).
POOL_ITEM_COLUMNS = [*RUN_KEYS, "idx", "label", "prediction"]


def pool_item_predictions(results: pd.DataFrame, artifact_dir: str | Path) -> pd.DataFrame | None:
    """The long table of the runs' evaluation-pool predictions (:data:`POOL_ITEM_COLUMNS`); ``None`` when no run
    scored a pool. A run whose pool file is missing raises, as for the validation items."""
    if "pool_artifact" not in results.columns or results["pool_artifact"].isna().all():
        return None
    folder = Path(artifact_dir)
    frames = []
    for run in results[results["pool_artifact"].notna()].itertuples(index=False):
        path = folder / str(run.pool_artifact)
        if not path.is_file():
            raise StorageError(f"The pool predictions of trial {run.trial} ({path.name}) are not in {folder}.")
        frame = pd.read_parquet(path, columns=["idx", "label", "prediction"])
        for key in RUN_KEYS:
            frame[key] = getattr(run, key)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)[POOL_ITEM_COLUMNS]


def pool_file(predictions: str | Path) -> Path:
    """Where ``export --predictions FILE`` writes the pool items: ``FILE`` with ``-pool`` before ``.parquet``."""
    path = Path(predictions)
    return path.with_name(f"{path.stem}-pool{path.suffix}")


def export_item_predictions(storage: str, output: str | Path, study_name: str | None = None) -> pd.DataFrame:
    """Write the item table of a study to ``output`` (.parquet), atomically, and its evaluation-pool items (if any)
    to :func:`pool_file`; returns the item table."""
    output = Path(output)
    if output.suffix != ".parquet":
        raise StorageError(f"The predictions file must end in .parquet, but got {str(output)!r}.")
    if not output.parent.is_dir():
        raise StorageError(f"The folder of the predictions file does not exist: {output.parent}.")
    from freezestats.results.export import results_table

    study, folder = study_artifacts(storage, study_name)
    runs = results_table(study)
    table, pool = item_predictions(runs, folder), pool_item_predictions(runs, folder)
    for frame, path in ((table, output), (pool, pool_file(output))):
        if frame is None:
            continue
        partial = path.with_name(path.name + ".partial")
        try:
            frame.to_parquet(partial, index=False)
            partial.replace(path)
        finally:
            partial.unlink(missing_ok=True)
    return table


def load_item_table(
    storage: str | None,
    predictions: str | Path | None,
    study_name: str | None = None,
    runs: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame | None, str | None]:
    """The item table for an analysis and, when there is none, why: from ``predictions`` (a file written by
    ``freezestats export --predictions``), else from the study database's artifacts, else ``None``.

    A study whose runs predate stored predictions is still analysed (seed-only); the reason says so.
    """
    if predictions is not None:
        return read_item_predictions(predictions), None
    if storage is None:
        return None, "no per-item predictions given (--predictions), so the intervals are seed-only"
    try:
        return study_item_predictions(storage, study_name, runs), None
    except StorageError as err:
        return None, f"no per-item predictions ({err}), so the intervals are seed-only"


def load_pool_table(
    storage: str | None,
    predictions: str | Path | None,
    study_name: str | None = None,
    runs: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame | None, dict[str, str]]:
    """The evaluation pool's predictions (or None) and, per task, the population the pool samples: from the file
    beside ``predictions`` (:func:`pool_file`), else from the study database's artifacts and attributes."""
    if predictions is not None:
        path = pool_file(predictions)
        return (pd.read_parquet(path) if path.is_file() else None), {}
    if storage is None:
        return None, {}
    from freezestats.results.export import results_table

    try:
        study, folder = study_artifacts(storage, study_name)
        pool = pool_item_predictions(results_table(study) if runs is None else runs, folder)
    except StorageError:
        return None, {}
    return pool, pool_populations(study.user_attrs)


def pool_populations(attrs: Mapping[str, Any]) -> dict[str, str]:
    """Per task, what its evaluation pool is a sample of, from the study attribute the runner stores
    (``evaluation_pool:<task>``, :mod:`freezestats.runner._provenance`)."""
    names = {k.split(":", 1)[1]: v.get("population") for k, v in attrs.items() if k.startswith("evaluation_pool:")}
    return {task: str(name) for task, name in names.items() if name}


def read_item_predictions(path: str | Path) -> pd.DataFrame:
    """Read an item table written by :func:`export_item_predictions`, checking its columns."""
    path = Path(path)
    if not path.is_file():
        raise StorageError(f"The predictions file {str(path)!r} does not exist.")
    try:
        table = pd.read_parquet(path)
    except Exception as err:  # pyarrow raises several unrelated types for a file that is not parquet
        raise StorageError(f"Cannot read {path} as parquet: {err}.") from err
    missing = [c for c in ITEM_COLUMNS if c not in table.columns]
    if missing:
        raise StorageError(f"{path} lacks column(s) {missing}: write it with `freezestats export --predictions`.")
    return table

"""What one trial does: train its cell with the study's arm, keep the predictions, build its record.

The record is a :class:`~freezestats.results.record.TrialRecord`, the one definition of what a trial exports; the
caller (the runner's objective) stores :meth:`~freezestats.results.record.TrialRecord.attrs` with the trial.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna
import pandas as pd
import torch

from freezestats.encoder.backbone import load_tokenizer
from freezestats.results.record import GroupTrialRecord, TrialRecord
from freezestats.runner._prepare import PreparedStudy, encoded_pool, encoded_splits
from freezestats.runner._provenance import library_versions
from freezestats.spec.pairs import CROSS
from freezestats.study.cells import Cell
from freezestats.study.lr_search import select_half_best
from freezestats.tasks.metrics import compute_metrics, is_failed_run, majority_baseline
from freezestats.training.predictions import checkpoint_counts, predictions_frame

if TYPE_CHECKING:
    from freezestats.encoder.prefix_cache import PrefixCache
    from freezestats.spec.groups import GroupSpec
    from freezestats.tasks.taskdata import TaskData
    from freezestats.training._encoding import EncodedSplit
    from freezestats.training._outcome import RunOutcome

__all__ = ["run_cell", "task_record"]


def run_cell(
    prepared: PreparedStudy,
    cell: Cell,
    trial: optuna.Trial,
    *,
    artifact_store: Any,
    prefix_cache: PrefixCache,
    on_step: Callable[[int, int], None] | None = None,
    interruptible: Callable[[], AbstractContextManager[None]] = nullcontext,
) -> TrialRecord | GroupTrialRecord:
    """Fine-tune ``cell`` (its level on the arm's axis), upload its predictions, and return its record.

    A task group's cell trains the group's shared encoder and returns one record per task. Only the training
    runs inside ``interruptible()`` (the runner's Ctrl-C gate): the uploads write to the study's database,
    which a KeyboardInterrupt must not cut short.
    """
    spec = prepared.spec
    group = spec.group_named(cell.task)
    if group is not None:
        return _run_group_cell(
            prepared,
            cell,
            group,
            trial,
            artifact_store=artifact_store,
            prefix_cache=prefix_cache,
            on_step=on_step,
            interruptible=interruptible,
        )
    train, validation = encoded_splits(prepared, cell)
    metric = spec.metric_for(cell.task)
    with interruptible():
        outcome = _train_single(prepared, cell, train, validation, metric, on_step, prefix_cache)
    return task_record(prepared, cell, cell.task, outcome, train, validation, trial, artifact_store)


def _train_single(
    prepared: PreparedStudy,
    cell: Cell,
    train: EncodedSplit,
    validation: EncodedSplit,
    metric: str,
    on_step: Callable[[int, int], None] | None,
    prefix_cache: PrefixCache,
) -> RunOutcome:
    """Fine-tune one task's cell with its arm."""
    spec = prepared.spec
    task = prepared.tasks[cell.task]
    return prepared.arm_of(cell).run(
        level=cell.level,
        model_name=spec.model.name,
        task=task.data.task,
        metric=metric,
        train=train,
        validation=validation,
        select_idx=task.select_idx,
        score_idx=task.score_idx,
        seed=cell.seed,
        order_seed=cell.data_order_seed,
        learning_rate=cell.learning_rate,
        training=spec.training,
        tokenizer=load_tokenizer(spec.model.name),
        on_step=on_step,
        prefix_cache=prefix_cache,
        # only when not cross, or with a pool: arms that train with a loop of their own keep their signature
        **({"pair_encoding": cell.pair_encoding} if cell.pair_encoding != CROSS else {}),
        **({"pool": pool} if (pool := encoded_pool(prepared, cell.task)) is not None else {}),
    )


def _run_group_cell(
    prepared: PreparedStudy,
    cell: Cell,
    group: GroupSpec,
    trial: optuna.Trial,
    *,
    artifact_store: Any,
    prefix_cache: PrefixCache,
    on_step: Callable[[int, int], None] | None,
    interruptible: Callable[[], AbstractContextManager[None]],
) -> GroupTrialRecord:
    """Train the group's shared encoder on each task's subset of the cell's size; one record per task."""
    from freezestats.training.shared_encoder.train import GroupMember, fine_tune_group

    spec = prepared.spec
    members = []
    for name in group.tasks:
        task = prepared.tasks[name]
        train, validation = encoded_splits(prepared, replace(cell, task=name))
        members.append(
            GroupMember(task.data.task, spec.metric_for(name), train, validation, task.select_idx, task.score_idx)
        )
    with interruptible():
        outcomes = fine_tune_group(
            model_name=spec.model.name,
            group=group,
            members=members,
            frozen_layers=cell.frozen_layers,
            seed=cell.seed,
            order_seed=cell.data_order_seed,
            learning_rate=cell.learning_rate,
            training=spec.training,
            tokenizer=load_tokenizer(spec.model.name),
            arm=prepared.arm,
            on_step=on_step,
            prefix_cache=prefix_cache,
            pair_encoding=cell.pair_encoding,
        )
    records = {
        m.task.name: task_record(
            prepared, cell, m.task.name, outcomes[m.task.name], m.train, m.validation, trial, artifact_store
        )
        for m in members
    }
    return GroupTrialRecord(group.name, records)


def task_record(
    prepared: PreparedStudy,
    cell: Cell,
    task_name: str,
    outcome: RunOutcome,
    train: EncodedSplit,
    validation: EncodedSplit,
    trial: optuna.Trial,
    artifact_store: Any,
) -> TrialRecord:
    """One task's record of a run: baseline, checkpoint counts, failure flag, and its uploaded predictions."""
    task = prepared.tasks[task_name]
    metric = prepared.spec.metric_for(task_name)
    regression = task.data.task.is_regression
    labels = validation.labels
    baseline = majority_baseline(metric, train.labels, labels, regression)
    frame = _with_user_names(predictions_frame(outcome.checkpoints, labels, task.select_idx), task.data)
    suffix = "" if task_name == cell.task else f"_{task_name}"
    record = _record(
        prepared,
        cell,
        outcome,
        metric=metric,
        baseline=baseline,
        counts=checkpoint_counts(outcome.checkpoints, labels, task.score_idx, regression),
        failed=is_failed_run(outcome.final_predictions, regression, outcome.summary.final_dev, baseline),
        artifact_id=upload_predictions(artifact_store, trial, frame, suffix),
    )
    if task.pool is None or outcome.pool_predictions is None:
        return record
    pool_frame = pd.DataFrame({"idx": np.arange(len(task.pool)), "label": task.pool.labels})
    pool_frame["prediction"] = outcome.pool_predictions
    return replace(
        record,
        pool_score=compute_metrics([metric], outcome.pool_predictions, task.pool.labels)[metric],
        n_pool=len(task.pool),
        pool_identity=task.pool.identity(task.data.task.text_columns),
        pool_artifact=upload_predictions(artifact_store, trial, pool_frame, f"{suffix}_pool"),
    )


def _record(
    prepared: PreparedStudy,
    cell: Cell,
    outcome: RunOutcome,
    *,
    metric: str,
    baseline: float,
    counts: dict[str, Any],
    failed: bool,
    artifact_id: str,
) -> TrialRecord:
    """The trial's record from its run (the fields the trial itself holds are left to it)."""
    spec = prepared.spec
    arm = prepared.arm_of(cell)
    return TrialRecord(
        model=spec.model.name,
        freezing=arm.options().get("freezing"),  # the freeze arm's (`model.freezing` in a single-arm study)
        n_layers=prepared.n_layers,
        metric=metric,
        best_dev=outcome.summary.best_dev,
        best_step=outcome.summary.best_step,
        final_dev=outcome.summary.final_dev,
        heldout=outcome.summary.heldout,
        heldout_step=outcome.summary.heldout_step,
        select_best=select_half_best(outcome.curve),  # what lr_search.select_metric = "select" uses
        majority_baseline=baseline,
        failed=failed,
        **counts,
        final_metrics=outcome.final_metrics,
        curve=outcome.curve,
        lr_search=spec.lr_search.mode,
        lr_search_reuse=spec.lr_search.reuse,
        frozen_dropout=spec.training.frozen_dropout,
        order_seed=cell.data_order_seed,  # the seed of the data order: `seed` itself unless crossed
        trained_with=cell.task,  # the task itself, or the group whose cell this is
        pair_encoding=cell.pair_encoding,  # for a group: its pair tasks' (the shared encoder learnt from them)
        eval_prefix_cached=outcome.extra["eval_prefix_cached"],
        train_prefix_cached=outcome.extra["train_prefix_cached"],
        trainable_params=outcome.trainable_params,
        total_params=outcome.total_params,
        n_steps=outcome.n_steps,
        final_train_loss=outcome.final_train_loss,
        wall_seconds=outcome.wall_seconds,
        peak_mem_bytes=outcome.peak_mem_bytes,
        peak_mem_kind=outcome.peak_mem_kind,
        device=outcome.device,
        precision=outcome.precision,
        versions=library_versions(),
        predictions_artifact=artifact_id,
        arm_kind=None if cell.arm is None else arm.name,
        arm_options=arm.options() if cell.arm is not None else {},
        torch_threads=torch.get_num_threads(),
    )


def _with_user_names(frame: pd.DataFrame, data: TaskData) -> pd.DataFrame:
    """A user task's predictions keep its row ids (``row_id``) and class names (``label_name``)."""
    if data.origin is None:
        return frame
    frame.insert(1, "row_id", data.origin.validation_ids)
    names = data.task.label_names
    if names is not None:
        frame.insert(3, "label_name", [names[int(code)] for code in frame["label"]])
    return frame


def upload_predictions(artifact_store: Any, trial: optuna.Trial, frame: pd.DataFrame, suffix: str = "") -> str:
    """Store the per-example predictions as an Optuna artifact of ``trial``; returns its id.

    ``suffix`` tells apart the predictions of the tasks of one group trial (``_<task>``).
    """
    from optuna.artifacts import upload_artifact

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"predictions_trial{trial.number}{suffix}.parquet"
        frame.to_parquet(path, index=False)
        return upload_artifact(artifact_store=artifact_store, file_path=str(path), study_or_trial=trial)

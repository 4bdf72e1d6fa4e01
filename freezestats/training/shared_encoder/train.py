"""Fine-tune one task group: the shared-encoder counterpart of :func:`freezestats.training.fine_tune`.

The run reuses the single-task pieces: the same set-up order (seed, then the classifiers, then the arm),
the frozen-prefix cache and the evaluator per task (each task on its own validation set and metric, with
its own best, final and heldout checkpoints), and each task's ``batch_loss``. What is the group's own: the
model (:mod:`~freezestats.training.shared_encoder.model`), the mixed batches
(:mod:`~freezestats.training.shared_encoder.sampler`) and
the steps that honour ``freeze_for`` (:mod:`~freezestats.training.shared_encoder._steps`).

A group of one task draws from the RNGs in the single-task run's order and trains on its batches in its
order, so it reproduces that run exactly (``tests/test_shared_encoder_train.py`` checks it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from freezestats import training as _training
from freezestats.encoder.prefix_cache import PrefixCache
from freezestats.exceptions import SpecError
from freezestats.spec.groups import GroupSpec
from freezestats.spec.training import TrainingSpec
from freezestats.tasks import TaskConfig
from freezestats.training import _arm, _autocast, _outcome
from freezestats.training._encoding import EncodedSplit
from freezestats.training._evaluator import Evaluator
from freezestats.training._loop import Schedule, TrainingSteps
from freezestats.training._measure import Meter
from freezestats.training._outcome import RunOutcome
from freezestats.training._prefix import FrozenPrefix, wire_prefix_cache
from freezestats.training.model_builder import ModelBuilder
from freezestats.training.shared_encoder._steps import GroupSteps, last_loss
from freezestats.training.shared_encoder.model import SharedEncoderModel, build_shared_encoder_model
from freezestats.training.shared_encoder.sampler import MixedBatches

__all__ = ["GroupMember", "fine_tune_group"]


@dataclass(frozen=True)
class GroupMember:
    """One task of a group with its data: what :func:`~freezestats.training.fine_tune` takes per task."""

    task: TaskConfig
    metric: str
    train: EncodedSplit
    validation: EncodedSplit
    select_idx: np.ndarray
    score_idx: np.ndarray


def fine_tune_group(
    *,
    model_name: str,
    group: GroupSpec,
    members: Sequence[GroupMember],
    frozen_layers: int,
    seed: int,
    learning_rate: float,
    training: TrainingSpec,
    tokenizer: Any,
    arm: ModelBuilder | None = None,
    on_step: Callable[[int, int], None] | None = None,
    prefix_cache: PrefixCache | None = None,
    use_prefix_cache: bool = True,
    order_seed: int | None = None,
    pair_encoding: str = "cross",
) -> dict[str, RunOutcome]:
    """Train one shared encoder on every member's task at once; returns one outcome per task.

    ``members`` follow ``group.tasks``' order. ``frozen_layers`` is the arm's level for the shared encoder
    (the arm must freeze in place, as the ``freeze`` arm does). ``seed`` fixes every head's initialisation
    and dropout, ``order_seed`` (default ``seed``) the data order of each task and the interleaving of
    tasks. The outcomes share the run's measurements (time, memory, parameters: the whole group's) and
    ``n_steps`` (the group's); ``extra`` says how the task was trained (``trained_with``, ``task_steps``).
    ``pair_encoding = "bi"`` trains the group's pair tasks as bi-encoders on the shared encoder (their
    members' splits bi-encoded); its single-sentence tasks are unaffected.
    """
    if tuple(m.task.name for m in members) != group.tasks:
        raise SpecError(f"The members of group '{group.name}' must be its tasks {list(group.tasks)}, in order.")
    meter = Meter()
    for m in members:
        _training._check_encoded(m.task, pair_encoding, m.train)
    device, precision, model = _set_up(
        model_name, members, _arm(arm, None), frozen_layers, seed, training, meter, pair_encoding
    )
    shared_frozen = _frozen_for_some(model, group)
    autocast = _autocast(device, precision)
    cache = prefix_cache if prefix_cache is not None else PrefixCache()
    prefixes = {
        m.task.name: wire_prefix_cache(
            model.classifier(m.task.name),
            model.parts(m.task.name),
            cache=cache,
            model_name=model_name,
            train=m.train,
            validation=m.validation,
            tokenizer=tokenizer,
            device=device,
            precision=precision,
            training=training,
            use_prefix_cache=use_prefix_cache,
            autocast=autocast,
        )
        for m in members
    }
    batches = MixedBatches(
        {m.task.name: len(m.train) for m in members},
        training.batch_size,
        seed if order_seed is None else order_seed,
        _training.data_orders,
        group.sampling,
        group.temperature,
    )
    schedule = Schedule.of_steps(batches.steps_per_epoch, training)
    evaluators = {m.task.name: _evaluator(model, m, prefixes[m.task.name], autocast, schedule) for m in members}
    losses = {
        m.task.name: TrainingSteps(
            model.classifier(m.task.name),
            model.parts(m.task.name),
            m.train,
            tokenizer,
            training,
            device,
            precision,
            m.task.is_regression,
            prefixes[m.task.name],
            autocast,
        )
        for m in members
    }
    steps = GroupSteps(model, losses, training, precision, learning_rate, schedule, shared_frozen, group.frozen_for)

    def evaluate(step: int, last: Mapping[str, float]) -> None:
        for name, evaluator in evaluators.items():
            evaluator(step, last_loss(last, name))

    n_steps, last = steps.run(iter(batches), evaluate, on_step)
    measured = meter.read(device)
    outcomes = {}
    for name, evaluator in evaluators.items():
        outcome = _outcome(evaluator, measured, prefixes[name], n_steps, last_loss(last, name), precision)
        outcome.extra.update(_group_record(group, name, steps.task_steps[name]))
        outcomes[name] = outcome
    return outcomes


def _set_up(
    model_name: str,
    members: Sequence[GroupMember],
    arm: ModelBuilder,
    level: int,
    seed: int,
    training: TrainingSpec,
    meter: Meter,
    pair_encoding: str = "cross",
) -> tuple[torch.device, str, SharedEncoderModel]:
    """As the single-task set-up: device, precision, the seed, the classifiers in order, then the arm.

    ``load_classifier`` is looked up in :mod:`freezestats.training` at call time, so a test or benchmark
    that replaces it there replaces it for groups too.
    """
    from transformers import set_seed

    device = _training.resolve_device(training.device)
    precision = _training.resolve_precision(training.precision, device)
    meter.watch(device)
    set_seed(seed)
    model = build_shared_encoder_model(model_name, [m.task for m in members], _training.load_classifier, pair_encoding)
    first = model.classifier(members[0].task.name)
    if arm.prepare_model(first, level) is not first:
        raise SpecError(f"Arm '{arm.name}' wraps the model it prepares; task groups need an arm that freezes in place.")
    meter.count(model)
    model.to(device)
    return device, precision, model


def _frozen_for_some(model: SharedEncoderModel, group: GroupSpec) -> list[torch.nn.Parameter]:
    """With ``freeze_for`` a list: the frozen encoder parameters, made trainable (their own optimizer steps
    them on the other tasks' batches only). With ``"all"``: none, they stay frozen."""
    if group.freeze_for == "all":
        return []
    frozen = [p for p in model.encoder.parameters() if not p.requires_grad]
    for p in frozen:
        p.requires_grad_(True)
    return frozen


def _evaluator(
    model: SharedEncoderModel, member: GroupMember, prefix: FrozenPrefix, autocast: Any, schedule: Schedule
) -> Evaluator:
    """The single-task evaluator on ``member``'s classifier, validation set and metric."""
    return Evaluator(
        model.classifier(member.task.name),
        model.parts(member.task.name),
        prefix,
        autocast,
        task=member.task,
        metric=member.metric,
        labels=member.validation.labels,
        select_idx=member.select_idx,
        score_idx=member.score_idx,
        steps_per_epoch=schedule.steps_per_epoch,
    )


def _group_record(group: GroupSpec, task: str, task_steps: int) -> dict[str, Any]:
    """What a task's outcome records about the group it trained in."""
    freeze_for = group.freeze_for if group.freeze_for == "all" else list(group.freeze_for)
    record: dict[str, Any] = {
        "trained_with": group.name,
        "sampling": group.sampling,
        "freeze_for": freeze_for,
        "frozen_for_task": group.frozen_for(task),
        "task_steps": task_steps,
    }
    if group.sampling == "temperature":
        record["temperature"] = group.temperature
    return record

"""Multi-task fine-tuning: one shared encoder, one head per task, trained on mixed mini-batches.

A task group (``[[groups]]`` in the spec) trains its tasks together, MT-DNN style: every step updates the
shared encoder and one task's head on one batch of that task (:mod:`~freezestats.training.multitask.sampler`).
``frozen_layers`` freezes the shared encoder's bottom, for every task's batches (``freeze_for = "all"``)
or only for some tasks' (:mod:`~freezestats.training.multitask.train`). Each task is evaluated on its own
validation set with its own metric, so a group trial gives one result per task.
"""

from __future__ import annotations

from freezestats.training.multitask.model import MultiTaskModel, build_multitask_model
from freezestats.training.multitask.sampler import MixedBatches, task_probabilities
from freezestats.training.multitask.train import GroupMember, fine_tune_group

__all__ = [
    "GroupMember",
    "MixedBatches",
    "MultiTaskModel",
    "build_multitask_model",
    "fine_tune_group",
    "task_probabilities",
]

"""Shared-encoder fine-tuning of a task group: one encoder, one head per task, trained on mixed mini-batches.

A task group (``[[groups]]`` in the spec) trains its tasks together, MT-DNN style: every step updates the
shared encoder and one task's head on one batch of that task (:mod:`~freezestats.training.shared_encoder.sampler`).
``frozen_layers`` freezes the shared encoder's bottom, for every task's batches (``freeze_for = "all"``)
or only for some tasks' (:mod:`~freezestats.training.shared_encoder.train`). Each task is evaluated on its own
validation set with its own metric, so a group trial gives one result per task.
"""

from __future__ import annotations

from freezestats.training.shared_encoder.model import SharedEncoderModel, build_shared_encoder_model
from freezestats.training.shared_encoder.sampler import MixedBatches, task_probabilities
from freezestats.training.shared_encoder.train import GroupMember, fine_tune_group

__all__ = [
    "GroupMember",
    "MixedBatches",
    "SharedEncoderModel",
    "build_shared_encoder_model",
    "fine_tune_group",
    "task_probabilities",
]

"""One shared encoder with one head per task: the model a task group trains.

Each task's head is exactly the one the single-task runner trains for it (transformers'
``AutoModelForSequenceClassification`` with the task's labels and problem type: cross-entropy for
classification, mean squared error for STS-B), so a task's loss, head and predictions mean the same
alone and in a group. The group model loads one such classifier per task, in the group's order, and
points every one of them at the first one's base model (the ``AutoModel`` part: embeddings, layers,
pooler). Loading the classifiers in order, right after the seed, draws the heads from the RNG exactly as
the single-task run draws its one head, so a group of one task is the single-task model. A pair task
trained as a bi-encoder (``pair_encoding = "bi"``) has a :class:`~freezestats.encoder.pair_encoding.BiEncoderClassifier`
instead, on the same shared base model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from freezestats.encoder.freezing import EncoderParts, locate_encoder
from freezestats.encoder.pair_encoding import drop_unused_pooler, pair_model
from freezestats.exceptions import ModelError
from freezestats.tasks import TaskConfig

__all__ = ["SharedEncoderModel", "build_shared_encoder_model"]

Loader = Callable[[str, int, bool], nn.Module]
"""``load_classifier(name, num_labels, regression)``: a fresh sequence-classification model."""


class SharedEncoderModel(nn.Module):
    """Task classifiers that share one base model; ``model(task, **batch)`` runs ``task``'s classifier.

    The shared parameters are registered once per classifier, and ``parameters()`` yields each once.
    """

    def __init__(self, classifiers: Mapping[str, nn.Module]) -> None:
        super().__init__()
        if not classifiers:
            raise ModelError("A shared-encoder model needs at least one task classifier.")
        first = next(iter(classifiers.values()))
        shared = first.base_model
        for name, classifier in classifiers.items():
            if classifier.base_model_prefix != first.base_model_prefix:
                raise ModelError(f"The classifier of task '{name}' is not the same architecture as the others.")
            setattr(classifier, classifier.base_model_prefix, shared)
        self.heads = nn.ModuleDict(classifiers)

    @property
    def task_names(self) -> tuple[str, ...]:
        return tuple(self.heads)

    @property
    def encoder(self) -> nn.Module:
        """The shared base model (what ``frozen_layers`` freezes)."""
        return self.heads[self.task_names[0]].base_model

    def classifier(self, task: str) -> nn.Module:
        """``task``'s classifier: the shared encoder and that task's head, as one transformers model."""
        return self.heads[task]

    def parts(self, task: str) -> EncoderParts:
        """Embeddings, layers and head of ``task``'s classifier (the frozen-prefix cache cuts it there)."""
        return locate_encoder(self.heads[task])

    def forward(self, task: str, **batch: torch.Tensor) -> Any:
        return self.heads[task](**batch)


def build_shared_encoder_model(
    model_name: str, tasks: Sequence[TaskConfig], load: Loader, pair_encoding: str = "cross"
) -> SharedEncoderModel:
    """One classifier per task loaded with ``load`` in ``tasks``' order (the RNG order), sharing the first's encoder.

    The other classifiers' own pretrained encoders are dropped; loading whole classifiers costs a little
    time but keeps each head (and its initialisation) transformers' own. With ``pair_encoding = "bi"`` each
    pair task's classifier becomes a bi-encoder right after it is loaded (its pair head drawn then, as in the
    single-task run); single-sentence tasks keep theirs, and with them the shared pooler they read.
    """
    classifiers = {
        task.name: pair_model(load(model_name, task.num_labels, task.is_regression), task, pair_encoding)
        for task in tasks
    }
    model = SharedEncoderModel(classifiers)
    drop_unused_pooler(model.heads.values())
    return model

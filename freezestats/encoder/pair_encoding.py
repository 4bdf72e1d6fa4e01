"""How a sentence-pair task reads its two sentences: one joint input (``cross``) or two passes (``bi``).

``cross`` (the default, and what every study ran before the setting existed)
    The pair is one input, ``[CLS] a [SEP] b [SEP]``: every layer attends across both sentences, and the
    task's transformers classifier (pooler and linear layer) reads the joint encoding.
``bi``
    Each sentence runs through the (shared) encoder in a pass of its own and is mean-pooled over its tokens
    (the attention mask), giving ``u`` and ``v``; only the head sees both. Issue 14's source found this late
    and measured it once (paraphrase 0.82 -> 0.88, STS 0.69 -> 0.87 going from bi to cross); a grid axis
    (``[grid] pair_encoding``) makes it a measured contrast.

The bi-encoder's heads:

* classification (MRPC, RTE): a linear layer on ``[u, v, |u - v|, u * v]``, Sentence-BERT's
  classification objective (Reimers & Gurevych 2019) with the element-wise product added;
* regression (STS-B): ``w * cos(u, v) + b``. The cosine is how the packaged model (all-MiniLM-L6-v2, a
  sentence-transformers model trained with mean pooling and cosine similarity) is meant to be read, so the
  head starts from a meaningful similarity rather than from random weights (a bilinear ``u^T W v`` would).
  ``w`` and ``b`` start at the task's label range (``label_range``, STS-B ``[0, 5]``: ``w = 5, b = 0``,
  Sentence-BERT's regression objective, cosine 0 for unrelated and 1 for identical pairs) and are trained:
  Pearson and Spearman are unchanged by them, but the loss can fit the offset that mean-pooled cosines
  carry, and at every frozen level something trains (with all layers frozen nothing else would).

Frozen layers stay frozen: the bi-encoder keeps the classifier's base model, so ``locate_encoder`` (and the
``freeze`` arm) find the same embeddings and layers, and the bi head is the part that always trains. The
base model's pooler is unused by a bi head; :func:`drop_unused_pooler` removes it when no head needs it, so
that it is neither counted as trainable nor carried along.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from freezestats.exceptions import SpecError
from freezestats.spec.pairs import BI, CROSS, PAIR_ENCODINGS
from freezestats.tasks import TaskConfig

__all__ = [
    "BI",
    "CROSS",
    "PAIR_ENCODINGS",
    "SECOND",
    "BiEncoderClassifier",
    "drop_unused_pooler",
    "pair_model",
]

SECOND = "_b"
"""Suffix of the second sentence's features in a bi-encoded example (``input_ids_b``, ``attention_mask_b``)."""


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """The mean of each sequence's token states over its real tokens (in fp32, whatever autocast computes)."""
    mask = attention_mask.unsqueeze(-1).to(torch.float32)
    return (hidden.float() * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)


def pair_features(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``[u, v, |u - v|, u * v]``: what the classification head reads."""
    return torch.cat([u, v, (u - v).abs(), u * v], dim=-1)


class PairClassifierHead(nn.Module):
    """A linear layer on :func:`pair_features` (initialised from torch's RNG, like transformers' heads)."""

    def __init__(self, hidden_size: int, num_labels: int) -> None:
        super().__init__()
        self.linear = nn.Linear(4 * hidden_size, num_labels)

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        features = pair_features(u, v)
        return self.linear(features.to(self.linear.weight.dtype))


class CosineRegressionHead(nn.Module):
    """``w * cos(u, v) + b``, ``w`` and ``b`` starting at the label range (module docstring); draws no RNG."""

    def __init__(self, low: float, high: float) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(float(high - low)))
        self.shift = nn.Parameter(torch.tensor(float(low)))

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        cosine = F.cosine_similarity(u.float(), v.float(), dim=-1)
        return (self.scale * cosine + self.shift).unsqueeze(-1)


class BiEncoderClassifier(nn.Module):
    """A pair task's bi-encoder: a transformers classifier's base model, two mean-pooled passes, a pair head.

    It looks like the classifier to the rest of freezestats: ``base_model`` (found by ``locate_encoder`` and
    shared by a task group's :class:`~freezestats.training.shared_encoder.SharedEncoderModel`), and ``model(**batch,
    labels=...)`` returning ``.loss`` and ``.logits``, where ``batch`` holds the first sentence's features
    and the second's with the :data:`SECOND` suffix.
    """

    def __init__(self, classifier: nn.Module, task: TaskConfig) -> None:
        super().__init__()
        if not task.is_pair:
            raise SpecError(f"`pair_encoding = 'bi'` needs a sentence-pair task, but '{task.name}' has one text.")
        self.base_model_prefix = classifier.base_model_prefix
        self.config = classifier.config
        self.regression = task.is_regression
        setattr(self, self.base_model_prefix, classifier.base_model)
        if task.is_regression:
            if task.label_range is None:
                raise SpecError(f"Task '{task.name}' needs `label_range` in its YAML for `pair_encoding = 'bi'`.")
            self.head: nn.Module = CosineRegressionHead(*task.label_range)
        else:
            self.head = PairClassifierHead(classifier.config.hidden_size, task.num_labels)

    @property
    def base_model(self) -> nn.Module:
        return getattr(self, self.base_model_prefix)

    def embed(self, **inputs: torch.Tensor) -> torch.Tensor:
        """One sentence's pass through the encoder, mean-pooled over its tokens."""
        hidden = self.base_model(**inputs)[0]
        return mean_pool(hidden, inputs["attention_mask"])

    def forward(self, labels: torch.Tensor | None = None, **batch: torch.Tensor) -> Any:
        from transformers.modeling_outputs import SequenceClassifierOutput

        first = {k: v for k, v in batch.items() if not k.endswith(SECOND)}
        second = {k.removesuffix(SECOND): v for k, v in batch.items() if k.endswith(SECOND)}
        if not second:
            raise SpecError("A bi-encoder needs bi-encoded examples (the second sentence's `input_ids_b`).")
        logits = self.head(self.embed(**first), self.embed(**second))
        loss = None
        if labels is not None:
            if self.regression:
                loss = F.mse_loss(logits.view(-1).float(), labels.view(-1).float())
            else:
                loss = F.cross_entropy(logits.float(), labels.view(-1))
        return SequenceClassifierOutput(loss=loss, logits=logits)


def check_pair_encoding(value: str) -> str:
    """``value`` if it is a known pair encoding; else a one-line :class:`SpecError`."""
    if value not in PAIR_ENCODINGS:
        raise SpecError(f"`pair_encoding` must be one of {list(PAIR_ENCODINGS)}, but got {value!r}.")
    return value


def pair_model(classifier: nn.Module, task: TaskConfig, pair_encoding: str) -> nn.Module:
    """The model ``task`` trains under ``pair_encoding``: the classifier itself (``cross``, or a task with one
    text), else a :class:`BiEncoderClassifier` on its base model (the classifier's own head is dropped)."""
    if check_pair_encoding(pair_encoding) == CROSS or not task.is_pair:
        return classifier
    return BiEncoderClassifier(classifier, task)


def drop_unused_pooler(models: Iterable[nn.Module]) -> None:
    """Remove the shared base model's pooler when every model on it is a bi-encoder (none reads the pooler).

    A single-sentence task's classifier in the same task group still reads it, so it stays then.
    """
    models = list(models)
    if not models or not all(isinstance(m, BiEncoderClassifier) for m in models):
        return
    base = models[0].base_model
    if isinstance(getattr(base, "pooler", None), nn.Module):
        base.pooler = None

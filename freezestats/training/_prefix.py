"""Wire a run to the frozen-prefix cache: which modules are frozen, and which of their outputs are reused.

The cache (:mod:`freezestats.encoder.prefix_cache`) keeps the outputs of frozen layers per split, shared by the
trials of one process. A run asks it for the validation set's padded batches and, when a prefix of the
model is frozen, for that prefix's outputs on them; with ``frozen_dropout = "off"`` (frozen layers in eval
mode, so their outputs do not depend on dropout) also for the training examples' outputs. Whatever the
cache declines (a cut that is not exact, left padding) simply runs every layer.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import torch

from freezestats.encoder.freezing import EncoderParts
from freezestats.encoder.pair_encoding import BiEncoderClassifier
from freezestats.encoder.prefix_cache import EvalBatch, PrefixCache, frozen_depth
from freezestats.spec.training import TrainingSpec
from freezestats.training import _encoding
from freezestats.training._encoding import EncodedSplit

__all__ = ["FrozenPrefix", "wire_prefix_cache"]


@dataclass(frozen=True)
class FrozenPrefix:
    """What the training steps and the evaluator take from the cache for one run."""

    depth: int | None
    """How many layers (after the embeddings) are frozen; ``None``: the embeddings train."""
    no_dropout: tuple[torch.nn.Module, ...]
    """Frozen modules to run in eval mode while training (``frozen_dropout = "off"``), else empty."""
    batches: list[EvalBatch]
    """The validation set's padded batches."""
    eval_hidden: list[torch.Tensor] | None
    """The frozen prefix's output on each validation batch, or ``None``: evaluate through every layer."""
    train_hidden: dict[int, torch.Tensor] | None
    """The frozen prefix's output per training example id, or ``None``: train through every layer."""

    def extra(self) -> dict[str, Any]:
        """What the run records about the cache (``eval_prefix_cached``, ``train_prefix_cached``, depth)."""
        return {
            "eval_prefix_cached": self.eval_hidden is not None,
            "train_prefix_cached": self.train_hidden is not None,
            "prefix_depth": self.depth,
        }


def wire_prefix_cache(
    model: torch.nn.Module,
    parts: EncoderParts,
    *,
    cache: PrefixCache,
    model_name: str,
    train: EncodedSplit,
    validation: EncodedSplit,
    tokenizer: Any,
    device: torch.device,
    precision: str,
    training: TrainingSpec,
    use_prefix_cache: bool,
    autocast: Callable[[], AbstractContextManager[Any]],
) -> FrozenPrefix:
    """Look up (or compute and keep) what this run can reuse; ``use_prefix_cache=False`` reuses no states."""
    depth = frozen_depth(parts)
    frozen = () if depth is None else (*parts.embeddings, *parts.layers[:depth])
    dropout_off = training.frozen_dropout == "off"
    eval_key = (
        model_name,
        validation.name or id(validation),
        len(validation),
        str(device),
        precision,
        training.eval_batch_size,
    )
    batches = cache.eval_batches(
        eval_key, lambda: _encoding.eval_batches(tokenizer, validation, training.eval_batch_size, device)
    )
    eval_hidden = train_hidden = None
    # A bi-encoder runs two passes per example: the cache keeps one state per example and cuts a
    # transformers classifier, so it is off for "bi" (every layer runs; the padded batches are still shared).
    if use_prefix_cache and depth is not None and not isinstance(model, BiEncoderClassifier):
        model.eval()
        with autocast():
            eval_hidden = cache.eval_hidden(model, parts, eval_key, batches, depth)
        if eval_hidden is not None and dropout_off and tokenizer.padding_side == "right":
            train_hidden = _train_states(cache, model, parts, train, tokenizer, device, depth, training)
    return FrozenPrefix(depth, frozen if dropout_off else (), batches, eval_hidden, train_hidden)


def _train_states(
    cache: PrefixCache,
    model: torch.nn.Module,
    parts: EncoderParts,
    train: EncodedSplit,
    tokenizer: Any,
    device: torch.device,
    depth: int,
    training: TrainingSpec,
) -> dict[int, torch.Tensor]:
    """Frozen-prefix outputs of every training example (frozen layers in eval mode: ``frozen_dropout='off'``)."""
    position = {int(example): i for i, example in enumerate(train.example_ids())}
    by_length = sorted(position, key=lambda example: len(train.features[position[example]]["input_ids"]))
    return cache.train_hidden(
        model,
        parts,
        (train.name or id(train), str(device)),
        by_length,
        lambda chunk: _encoding.collate(tokenizer, [train.features[position[example]] for example in chunk], device),
        depth,
        training.eval_batch_size,
    )

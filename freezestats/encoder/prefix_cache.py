"""Frozen-prefix cache: compute what the frozen bottom of the encoder says about a text once, not per step.

In a freeze study most of the compute of a cell with ``k`` frozen layers is spent re-running those ``k``
layers: every evaluation re-encodes the whole validation set through them, although in eval mode they are
a fixed function of the text (their weights never change and dropout is off). The hidden states at depth
``k`` are therefore computed once per process and split, and every later evaluation — of this trial, and
of every other seed and train size with the same frozen depth — runs only the trainable layers on them.
A deeper depth is derived from the deepest shallower one already cached, so a grid over ``k = 2, 4, 6``
runs each pretrained layer over the validation set once.

The same works for training when the frozen layers run without dropout (the spec's
``frozen_dropout = "off"``, which changes the experiment and is off by default): then their outputs on
the training examples are fixed too, and are cached per example.

How a forward pass is cut: the encoder's ``layer`` list is temporarily narrowed to the trainable blocks
and a pre-hook replaces the encoder's input with the cached hidden states; everything else (attention
masks, relative positions, pooler, head) runs as usual. Nothing here knows an architecture by name, so
each new (depth, split) is checked once on a real batch against the uncut model: if the cut path does
not give the same logits, the cache stands down for that depth and the plain path is used.
"""

from __future__ import annotations

import inspect
import logging
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from freezestats.encoder.freezing import EncoderParts

__all__ = ["DEFAULT_MAX_BYTES", "EvalBatch", "PrefixCache", "forward_from", "frozen_depth", "hidden_at", "pad_hidden"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 2 * 1024**3
"""Cached hidden states kept per process before the least recently used depth is dropped."""


@dataclass(frozen=True)
class EvalBatch:
    """One padded evaluation batch: which examples (positions in the split) and their model inputs."""

    positions: tuple[int, ...]
    inputs: dict[str, torch.Tensor]


def frozen_depth(parts: EncoderParts) -> int | None:
    """How deep the frozen prefix goes: the largest ``d`` with the embeddings and ``layers[:d]`` frozen.

    Read from ``requires_grad`` rather than from a freezing rule's ``k``, so any registered freezing rule
    gets the cache when (and only when) it really freezes a prefix. ``None``: the embeddings train.
    """
    if any(p.requires_grad for module in parts.embeddings for p in module.parameters()):
        return None
    depth = 0
    for layer in parts.layers:
        if any(p.requires_grad for p in layer.parameters()):
            break
        depth += 1
    return depth


class _Stop(Exception):
    """Raised by a capture hook once the deepest requested depth is reached: the rest need not run."""


def _input_name(encoder: nn.Module) -> str:
    """Name of the encoder's hidden-states argument, for callers that pass it by keyword (DistilBERT)."""
    return next(iter(inspect.signature(encoder.forward).parameters))


@contextmanager
def _cut(parts: EncoderParts, start: int, hidden: torch.Tensor | None) -> Iterator[None]:
    """Run only ``layers[start:]``, fed with ``hidden`` (the hidden states at depth ``start``)."""
    encoder = parts.encoder
    layers = encoder.layer  # the encoder's own list: the object to put back
    if hidden is None:
        yield
        return
    first_param = _input_name(encoder)

    def feed(_module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        if args:
            return (hidden, *args[1:]), kwargs
        return args, {**kwargs, first_param: hidden}

    handle = encoder.register_forward_pre_hook(feed, with_kwargs=True)
    encoder.layer = nn.ModuleList(layers[start:])
    try:
        yield
    finally:
        encoder.layer = layers
        handle.remove()


def hidden_at(
    model: nn.Module,
    parts: EncoderParts,
    inputs: dict[str, torch.Tensor],
    depths: Sequence[int],
    start: int = 0,
    hidden: torch.Tensor | None = None,
) -> dict[int, torch.Tensor]:
    """Hidden states of one batch at each of ``depths``, stopping the forward pass after the deepest.

    ``start``/``hidden`` resume from a cached shallower depth instead of the embeddings.
    """
    wanted = sorted(set(depths))
    if not wanted or wanted[0] < start:
        raise ValueError(f"`depths` must be >= start={start}, but got {list(depths)}.")
    captured: dict[int, torch.Tensor] = {}
    deepest = wanted[-1]

    def keep(depth: int, value: Any) -> None:
        captured[depth] = (value[0] if isinstance(value, tuple) else value).detach()
        if depth == deepest:
            raise _Stop

    with ExitStack() as stack:
        stack.enter_context(_cut(parts, start, hidden))
        if start in wanted:
            name = _input_name(parts.encoder)

            def at_input(_m: nn.Module, args: tuple, kwargs: dict) -> None:
                keep(start, args[0] if args else kwargs[name])

            handle = parts.encoder.register_forward_pre_hook(at_input, with_kwargs=True)
            stack.callback(handle.remove)
        for depth in wanted:
            if depth > start:
                layer = parts.layers[depth - 1]
                handle = layer.register_forward_hook(lambda _m, _a, out, d=depth: keep(d, out))
                stack.callback(handle.remove)
        with suppress(_Stop):
            model(**inputs)
    missing = [d for d in wanted if d not in captured]
    if missing:
        raise RuntimeError(f"The forward pass never reached depth(s) {missing}.")
    return captured


def forward_from(
    model: nn.Module,
    parts: EncoderParts,
    inputs: dict[str, torch.Tensor],
    depth: int,
    hidden: torch.Tensor,
    **extra: Any,
) -> Any:
    """The model's output with its first ``depth`` blocks replaced by their (cached) output ``hidden``."""
    with _cut(parts, depth, hidden):
        return model(**inputs, **extra)


class PrefixCache:
    """Hidden states at frozen depths, per split, shared by all the trials of one worker process.

    Valid for one pretrained model, ``max_length`` and device: the runner keeps one per study and
    process; a fine-tuning call without one gets a private cache that still serves its own evaluations.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple, Any] = OrderedDict()
        self._sizes: dict[tuple, int] = {}
        self._refused: set[tuple] = set()
        self.stats = {"built": 0, "derived": 0, "hits": 0, "refused": 0}

    # -- bookkeeping ------------------------------------------------------------------------------
    def _get(self, key: tuple) -> Any:
        if key in self._entries:
            self._entries.move_to_end(key)
            return self._entries[key]
        return None

    def _put(self, key: tuple, value: Any, size: int) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)  # a store that just grew is the most recently used, not the oldest
        self._sizes[key] = size
        while sum(self._sizes.values()) > self.max_bytes and len(self._entries) > 1:
            old, _ = self._entries.popitem(last=False)
            del self._sizes[old]

    @property
    def nbytes(self) -> int:
        return sum(self._sizes.values())

    # -- evaluation -------------------------------------------------------------------------------
    def eval_batches(self, split_key: tuple, make: Any) -> list[EvalBatch]:
        """The split's padded evaluation batches (made once: tokenizer padding is not free either)."""
        key = ("batches", *split_key)
        batches = self._get(key)
        if batches is None:
            batches = make()
            self._put(key, batches, sum(_nbytes(b.inputs.values()) for b in batches))
        return batches

    def eval_hidden(
        self, model: nn.Module, parts: EncoderParts, split_key: tuple, batches: list[EvalBatch], depth: int
    ) -> list[torch.Tensor] | None:
        """Per-batch hidden states at ``depth`` for the split, or ``None`` when the cut path is not exact."""
        key = ("eval", *split_key, depth)
        if key in self._refused:
            return None
        cached = self._get(key)
        if cached is not None:
            self.stats["hits"] += 1
            return cached
        start, base = self._deepest_below(("eval", *split_key), depth)
        with torch.no_grad():
            hidden = [
                hidden_at(model, parts, b.inputs, [depth], start, None if base is None else base[i])[depth]
                for i, b in enumerate(batches)
            ]
            if not self._cut_is_exact(model, parts, batches[0].inputs, depth, hidden[0]):
                self._refused.add(key)
                self.stats["refused"] += 1
                return None
        self.stats["derived" if base is not None else "built"] += 1
        self._put(key, hidden, _nbytes(hidden))
        return hidden

    def _deepest_below(self, prefix: tuple, depth: int) -> tuple[int, list[torch.Tensor] | None]:
        found = [key[-1] for key in self._entries if key[:-1] == prefix and key[-1] < depth]
        if not found:
            return 0, None
        start = max(found)
        return start, self._get((*prefix, start))

    def _cut_is_exact(
        self, model: nn.Module, parts: EncoderParts, inputs: dict[str, torch.Tensor], depth: int, hidden: torch.Tensor
    ) -> bool:
        """Does the cut forward pass reproduce the whole model on this batch (exactly on CPU)?"""
        try:
            cut = forward_from(model, parts, inputs, depth, hidden).logits
        except Exception as err:  # an architecture whose encoder cannot run a partial block list
            logger.info("frozen-prefix cache off at depth %d: %s", depth, err)
            return False
        full = model(**inputs).logits
        # The same kernels run on the same inputs, so CPU must match bit for bit; GPUs may pick other
        # reduction orders, but a cut that changes the function (e.g. DeBERTa-v2's conv block) moves
        # logits by far more than these tolerances.
        same = torch.equal(cut, full) if cut.device.type == "cpu" else torch.allclose(cut, full, rtol=1e-5, atol=1e-6)
        if not same:
            logger.info("frozen-prefix cache off at depth %d: the cut model's logits differ", depth)
        return same

    # -- training (frozen layers without dropout) -------------------------------------------------
    def train_hidden(
        self,
        model: nn.Module,
        parts: EncoderParts,
        split_key: tuple,
        ids: Sequence[int],
        make_batch: Any,
        depth: int,
        batch_size: int,
    ) -> dict[int, torch.Tensor]:
        """Unpadded hidden states at ``depth`` for the training examples ``ids`` (computed where missing).

        ``make_batch(ids)`` returns the padded inputs of those examples; each example's states are kept
        without padding, so any later batch can be assembled from them.
        """
        key = ("train", *split_key, depth)
        store: dict[int, torch.Tensor] = self._get(key) or {}
        missing = [i for i in ids if i not in store]
        with torch.no_grad():
            for begin in range(0, len(missing), batch_size):
                chunk = missing[begin : begin + batch_size]
                inputs = make_batch(chunk)
                hidden = hidden_at(model, parts, inputs, [depth])[depth]
                lengths = inputs["attention_mask"].sum(dim=1).tolist()
                for row, (example, length) in enumerate(zip(chunk, lengths, strict=True)):
                    store[example] = hidden[row, : int(length)].clone()
        if missing or key not in self._entries:
            self._put(key, store, _nbytes(store.values()))
        return store


def pad_hidden(states: Sequence[torch.Tensor], length: int) -> torch.Tensor:
    """Stack per-example hidden states into one right-padded batch (padding is masked out downstream)."""
    batch = states[0].new_zeros((len(states), length, states[0].shape[-1]))
    for row, state in enumerate(states):
        batch[row, : state.shape[0]] = state
    return batch


def _nbytes(tensors: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)

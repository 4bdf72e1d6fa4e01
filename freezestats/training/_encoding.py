"""Tokenized splits, and the dynamically padded batches made from them.

The other steps call :func:`collate` and :func:`eval_batches` through this module (``_encoding.collate``),
so that a benchmark that wraps one of them to count padded tokens wraps it everywhere at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from freezestats.encoder.pair_encoding import SECOND, check_pair_encoding
from freezestats.encoder.prefix_cache import EvalBatch
from freezestats.exceptions import SpecError
from freezestats.spec.pairs import CROSS

__all__ = ["EncodedSplit", "collate", "encode_split", "eval_batches"]


@dataclass(frozen=True)
class EncodedSplit:
    """A tokenized split: one dict of token lists per example (unpadded), and the labels.

    ``name`` and ``ids`` (each example's position in the split it was cut from) let the frozen-prefix
    cache recognise the same examples in another trial's subset.
    """

    features: tuple[dict[str, list[int]], ...]
    labels: np.ndarray
    name: str = ""
    ids: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.features)

    def example_ids(self) -> np.ndarray:
        return np.arange(len(self)) if self.ids is None else self.ids

    def subset(self, indices: Sequence[int]) -> EncodedSplit:
        index = np.asarray(indices, dtype=int)
        return EncodedSplit(
            tuple(self.features[i] for i in indices), self.labels[index], self.name, self.example_ids()[index]
        )


def encode_split(
    texts: Sequence[Sequence[str]],
    labels: np.ndarray,
    tokenizer: Any,
    max_length: int,
    name: str = "",
    pair_encoding: str = CROSS,
) -> EncodedSplit:
    """Tokenize once, without padding (padding happens per batch, to the batch's longest sequence).

    ``texts`` holds one sequence of strings per text column; two columns are encoded as a sequence pair
    (``pair_encoding = "cross"``), or (``"bi"``) each on its own, the second's features under the
    :data:`~freezestats.encoder.pair_encoding.SECOND` suffix, each sentence truncated to ``max_length`` by itself.
    """
    columns = [list(column) for column in texts]
    if check_pair_encoding(pair_encoding) == CROSS or len(columns) == 1:
        features = _features(tokenizer(*columns, truncation=True, max_length=max_length, padding=False))
    else:
        if len(columns) != 2:
            raise SpecError(f"`pair_encoding = 'bi'` needs two text columns, but got {len(columns)}.")
        first, second = (
            _features(tokenizer(column, truncation=True, max_length=max_length, padding=False)) for column in columns
        )
        features = tuple({**a, **{k + SECOND: v for k, v in b.items()}} for a, b in zip(first, second, strict=True))
    return EncodedSplit(features=features, labels=np.asarray(labels), name=name)


def _features(encoded: Any) -> tuple[dict[str, list[int]], ...]:
    keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in encoded]
    return tuple({k: encoded[k][i] for k in keys} for i in range(len(encoded["input_ids"])))


def collate(tokenizer: Any, features: list[dict[str, list[int]]], device: torch.device) -> dict[str, torch.Tensor]:
    """Pad ``features`` to their longest sequence and move them to ``device``.

    Bi-encoded examples pad each sentence to the longest of its own side (two tensors per feature).
    """
    if "input_ids" + SECOND not in features[0]:
        batch = dict(tokenizer.pad(features, padding=True, return_tensors="pt"))
    else:
        first = [{k: v for k, v in f.items() if not k.endswith(SECOND)} for f in features]
        second = [{k.removesuffix(SECOND): v for k, v in f.items() if k.endswith(SECOND)} for f in features]
        batch = {
            **tokenizer.pad(first, padding=True, return_tensors="pt"),
            **{k + SECOND: v for k, v in tokenizer.pad(second, padding=True, return_tensors="pt").items()},
        }
    return {k: v.to(device) for k, v in batch.items()}


def _length(feature: dict[str, list[int]]) -> int:
    """Tokens of an example (both sentences of a bi-encoded one): what eval batches are sorted by."""
    return len(feature["input_ids"]) + len(feature.get("input_ids" + SECOND, ()))


def eval_batches(tokenizer: Any, split: EncodedSplit, batch_size: int, device: torch.device) -> list[EvalBatch]:
    """Length-sorted, dynamically padded batches of the whole split (made once per split and process)."""
    order = sorted(range(len(split)), key=lambda i: _length(split.features[i]))
    return [
        EvalBatch(tuple(chunk), collate(tokenizer, [split.features[i] for i in chunk], device))
        for chunk in (order[start : start + batch_size] for start in range(0, len(order), batch_size))
    ]

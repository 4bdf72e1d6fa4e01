"""The probe's features: every layer's pooled hidden states of the frozen encoder, computed once per process.

Features are computed once per (model, pooling, example) and process, for every layer at once, and reused across
layers, sizes, draws and seeds: a probe cell then costs the fit alone. They are kept in memory only, like the
frozen-prefix cache. Apart from the arm (:mod:`freezestats.arms._probe`) and the fit
(:mod:`freezestats.arms._probe_fit`), which both read them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from freezestats.training._encoding import EncodedSplit

__all__ = ["clear_feature_cache", "encoder", "features"]

_FEATURES: dict[tuple[Any, ...], dict[int, np.ndarray]] = {}
_ENCODERS: dict[str, Any] = {}


def features(
    model_name: str, split: EncodedSplit, tokenizer: Any, pooling: str, batch_size: int, device: Any
) -> tuple[np.ndarray, bool]:
    """Pooled features of every example of ``split`` at every layer, ``(n, L + 1, hidden)``, and whether all
    of them came from the cache (computed once per model, pooling and device in this process).

    Examples are recognised by their tokens, not by their position in a split: positions mean different
    examples in two studies run by one process, tokens always mean the same features.
    """
    known = _FEATURES.setdefault((model_name, pooling, str(device)), {})
    keys = [_token_key(example) for example in split.features]
    missing = [position for position, key in enumerate(keys) if key not in known]
    if missing:
        computed = _encode(model_name, split.subset(missing), tokenizer, pooling, batch_size, device)
        for position, row in zip(missing, computed, strict=True):
            known[keys[position]] = row
    return np.stack([known[key] for key in keys]), not missing


def _token_key(example: Mapping[str, list[int]]) -> tuple[tuple[int, ...], ...]:
    """What determines an example's features: its token ids (and segment ids, for sentence pairs)."""
    return tuple(example["input_ids"]), tuple(example.get("token_type_ids", ()))


def clear_feature_cache() -> None:
    """Forget every cached feature and encoder (tests; a process that changes models)."""
    _FEATURES.clear()
    _ENCODERS.clear()


def _encode(model_name: str, split: EncodedSplit, tokenizer: Any, pooling: str, batch_size: int, device: Any) -> Any:
    """Run the frozen encoder (eval mode, fp32) over ``split`` and pool every layer's hidden states."""
    import torch

    from freezestats.training import _encoding

    model = encoder(model_name, device)
    result = np.empty((len(split), model.config.num_hidden_layers + 1, model.config.hidden_size), np.float32)
    with torch.no_grad():
        for batch in _encoding.eval_batches(tokenizer, split, batch_size, device):
            hidden = model(**batch.inputs, output_hidden_states=True).hidden_states
            mask = batch.inputs["attention_mask"].unsqueeze(-1).float()
            if pooling == "mean":
                pooled = [(h * mask).sum(1) / mask.sum(1).clamp(min=1) for h in hidden]
            else:  # the first real token ([CLS] / <s>), wherever padding put it
                first = batch.inputs["attention_mask"].argmax(dim=1)
                pooled = [h[torch.arange(h.shape[0]), first] for h in hidden]
            result[np.asarray(batch.positions)] = torch.stack(pooled, dim=1).float().cpu().numpy()
    return result


def encoder(model_name: str, device: Any) -> Any:
    """The pretrained encoder without a head, loaded once per process and device, in eval mode."""
    key = f"{model_name}@{device}"
    if key not in _ENCODERS:
        from transformers import AutoModel

        from freezestats.encoder.backbone import resolve_model

        _ENCODERS[key] = AutoModel.from_pretrained(resolve_model(model_name)).to(device).eval()
    return _ENCODERS[key]

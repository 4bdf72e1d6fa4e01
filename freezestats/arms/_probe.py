"""The ``probe`` arm: L2-regularised logistic regression on the frozen encoder's pooled features.

A linear probe is the CPU-friendly, statistically stable baseline every adaptation method should beat.
It needs no training loop, so the arm overrides :meth:`Arm.run`: the frozen encoder's hidden states are
pooled (``mean`` over the tokens, or the ``cls`` token) at the cell's layer (0: the embeddings; ``L`` or
``"last"``: the top layer), and scikit-learn fits a logistic regression whose ``C`` is chosen by
stratified cross-validation *on the training subset only* (folds = min(5, smallest class count); the
validation set never chooses anything). Regression tasks get a ridge regression, its ``alpha`` chosen
the same way.

Features are computed once per (model, pooling, example) and process, for every layer at once, and reused
across layers, sizes, draws and seeds (:func:`features`): a probe cell then costs the fit alone. They are
kept in memory only, like the frozen-prefix cache. Given
the features and the subset the fit is deterministic, so a probe has no seed variance.

So that the probe is comparable with the fine-tuned arms it reports the same numbers: its one model is
its one "checkpoint" (``best``, ``heldout`` and ``final`` alike), scored on the whole validation set
(``best_dev`` = ``final_dev``: the dev score of the chosen C) and on the score half (``heldout``, as the
evaluator defines it: chosen without the score half, scored on it). Its logits are the log-probabilities.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from freezestats.arms._base import Arm
from freezestats.arms._registry import register_arm

if TYPE_CHECKING:
    from torch import nn

    from freezestats.spec import StudySpec
    from freezestats.training import EncodedSplit, RunOutcome

__all__ = ["POOLINGS", "ProbeArm", "clear_feature_cache", "features"]

POOLINGS = ("mean", "cls")
C_GRID = tuple(float(c) for c in np.logspace(-4, 2, 7))
"""The inverse regularisation strengths cross-validated (the ridge's ``alpha`` runs over their inverses)."""
LAST = "last"

_FEATURES: dict[tuple[Any, ...], dict[int, np.ndarray]] = {}
_ENCODERS: dict[str, Any] = {}


@register_arm("probe")
class ProbeArm(Arm):
    """``layers = l``: a linear probe on layer ``l``'s pooled output; ``pooling`` is an option axis."""

    level_axis = "layers"
    uses_learning_rate = False
    option_defaults: ClassVar[Mapping[str, Any]] = {"pooling": "mean"}
    option_axes = ("pooling",)

    def __init__(self, pooling: str = "mean") -> None:
        self.pooling = pooling

    @classmethod
    def from_spec(cls, spec: StudySpec) -> ProbeArm:
        for variant in spec.arm_variants():
            if variant.kind == cls.name:
                return cls.from_options(variant.options)
        return cls()

    @classmethod
    def check_level(cls, value: Any) -> int | str:
        if value == LAST or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
            return value
        raise ValueError(f"must be 'last' or a layer index >= 0 (0: the embeddings), but got {value!r}")

    @classmethod
    def check_option(cls, key: str, value: Any) -> Any:
        if value not in POOLINGS:
            raise ValueError(f"must be one of {list(POOLINGS)}, but got {value!r}")
        return value

    @classmethod
    def resolve_level(cls, level: int | str, n_layers: int) -> int:
        return n_layers if level == LAST else int(level)

    def options(self) -> dict[str, Any]:
        return {"pooling": self.pooling}

    def valid_levels(self, n_layers: int) -> Sequence[int]:
        return range(0, n_layers + 1)

    def prepare_model(self, model: nn.Module, level: int) -> nn.Module:
        """The encoder is frozen whole; only a probe on top of it is fitted (in :meth:`run`)."""
        model.requires_grad_(False)
        return model

    def run(self, *, level: int, **inputs: Any) -> RunOutcome:
        """Pool the frozen features of layer ``level``, fit the probe on the train subset, score it."""
        from freezestats.arms._probe_fit import fit_probe

        return fit_probe(self, level, **inputs)


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

    encoder = _encoder(model_name, device)
    result = np.empty((len(split), encoder.config.num_hidden_layers + 1, encoder.config.hidden_size), np.float32)
    with torch.no_grad():
        for batch in _encoding.eval_batches(tokenizer, split, batch_size, device):
            hidden = encoder(**batch.inputs, output_hidden_states=True).hidden_states
            mask = batch.inputs["attention_mask"].unsqueeze(-1).float()
            if pooling == "mean":
                pooled = [(h * mask).sum(1) / mask.sum(1).clamp(min=1) for h in hidden]
            else:  # the first real token ([CLS] / <s>), wherever padding put it
                first = batch.inputs["attention_mask"].argmax(dim=1)
                pooled = [h[torch.arange(h.shape[0]), first] for h in hidden]
            result[np.asarray(batch.positions)] = torch.stack(pooled, dim=1).float().cpu().numpy()
    return result


def _encoder(model_name: str, device: Any) -> Any:
    """The pretrained encoder without a head, loaded once per process and device, in eval mode."""
    key = f"{model_name}@{device}"
    if key not in _ENCODERS:
        from transformers import AutoModel

        from freezestats.backbone import resolve_model

        _ENCODERS[key] = AutoModel.from_pretrained(resolve_model(model_name)).to(device).eval()
    return _ENCODERS[key]

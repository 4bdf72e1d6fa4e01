"""The ``reinit`` arm: re-initialise the top ``k`` encoder layers (and the pooler), then fine-tune everything.

Zhang et al. (2020, *Revisiting few-sample BERT fine-tuning*) found that the top layers of a pretrained
BERT are specialised to the pre-training task and that re-initialising a few of them helps small-data
fine-tuning. The weights are drawn by the model's own ``_init_weights`` (its configured
``initializer_range``), from torch's global generator right after the cell's seed was set and the model
loaded, so the same seed gives the same weights. The training itself is the shared loop, at full
fine-tuning's rate by default (the paper's protocol).

transformers >= 5 marks every loaded tensor ``_is_hf_initialized`` and its init functions then skip it, so
``_init_weights`` alone would silently leave the pretrained weights in place; the flags of the modules
being re-initialised are cleared first (and a test checks that the weights really change).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from freezestats.arms._base import Arm
from freezestats.arms._registry import register_arm
from freezestats.spec.arm_kinds import ReinitKind

if TYPE_CHECKING:
    from torch import nn

    from freezestats.spec.study import StudySpec

__all__ = ["ReinitArm", "reinit_modules"]


@register_arm("reinit")
class ReinitArm(Arm, ReinitKind):
    """``top_layers = k``: the top ``k`` encoder layers and the pooler get fresh weights; every parameter trains.

    ``k = 0`` is plain full fine-tuning (the same run as the ``freeze`` arm at depth 0, seed for seed).
    """

    @classmethod
    def from_spec(cls, spec: StudySpec) -> ReinitArm:
        return cls()

    def options(self) -> dict[str, Any]:
        return {}

    def valid_levels(self, n_layers: int) -> Sequence[int]:
        return range(0, n_layers + 1)

    def prepare_model(self, model: nn.Module, level: int) -> nn.Module:
        model.requires_grad_(True)
        for module in reinit_modules(model, level):
            _reinitialise(model, module)
        return model


def reinit_modules(model: nn.Module, top_layers: int) -> list[nn.Module]:
    """The modules ``top_layers = k`` re-initialises: the top ``k`` blocks, and the pooler when ``k > 0``.

    The pooler (BERT's, ELECTRA's, ...) sits between the top layer and the classifier and was trained for
    next-sentence prediction: Zhang et al. re-initialise it with the layers. The classifier head is new
    in every arm anyway.
    """
    from freezestats.encoder.freezing import locate_encoder

    layers = locate_encoder(model).layers
    if not 0 <= top_layers <= len(layers):
        raise ValueError(f"top_layers must lie in 0..{len(layers)}, but got top_layers={top_layers}")
    if top_layers == 0:
        return []
    modules = list(layers[len(layers) - top_layers :])
    for owner in (model.base_model, model):  # BERT's pooler is in the base model, DeBERTa's beside it
        pooler = getattr(owner, "pooler", None)
        if pooler is not None and next(pooler.parameters(), None) is not None and pooler not in modules:
            modules.append(pooler)
    return modules


def _reinitialise(model: nn.Module, module: nn.Module) -> None:
    """Draw fresh weights for every submodule of ``module`` with the model's own ``_init_weights``."""
    for tensor in [*module.parameters(), *module.buffers()]:
        if getattr(tensor, "_is_hf_initialized", False):
            tensor._is_hf_initialized = False  # else transformers' init functions skip the loaded tensor
    module.apply(model._init_weights)

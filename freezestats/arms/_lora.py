"""The ``lora`` arm: low-rank adapters (the ``peft`` library) on the attention projections, the head trained.

Hu et al. (2021, *LoRA*) adapt RoBERTa to GLUE with rank-``r`` updates of the query and value projections
of every layer, ``alpha = r`` (scaling 1) and a learning rate about ten times full fine-tuning's (5e-4
on SST-2, 4e-4 on CoLA for RoBERTa-base); those are this arm's defaults. The adapters are injected with
``peft.inject_adapter_in_model``, which keeps the transformers model itself (so the trainer, the
evaluator and :func:`~freezestats.encoder.freezing.locate_encoder` see the classifier they know) and freezes
every pretrained weight. The head (pooler and classifier, as :class:`~freezestats.encoder.freezing.EncoderParts`
defines it) then trains in full, like the ``freeze`` arm's at depth ``L``: a LoRA cell is that cell
plus the adapters.

``lora_A`` draws from torch's global generator right after the head, so the cell's seed fixes it;
``lora_B`` starts at zero, so the adapted model starts as the pretrained one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from freezestats.arms._base import Arm
from freezestats.arms._registry import register_arm
from freezestats.exceptions import ModelError
from freezestats.spec.arm_kinds import MAX_RANK, LoraKind

if TYPE_CHECKING:
    from torch import nn

    from freezestats.spec.study import StudySpec

__all__ = ["TARGET_MODULES", "LoraArm", "lora_targets"]

TARGET_MODULES: tuple[tuple[str, ...], ...] = (
    ("query", "value"),  # BERT, MiniLM, RoBERTa, ELECTRA
    ("q_lin", "v_lin"),  # DistilBERT
    ("query_proj", "value_proj"),  # DeBERTa-v2/v3
    ("in_proj",),  # DeBERTa (v1 projects query, key and value in one matrix)
)
"""The attention projections adapted, per model family: the first set whose names all occur in the layers."""


@register_arm("lora")
class LoraArm(Arm, LoraKind):
    """``rank = r``: rank-``r`` adapters on the query and value projections of every layer; the head trains."""

    def __init__(self, scaling: float = 1.0, dropout: float = 0.1) -> None:
        self.scaling = float(scaling)
        self.dropout = float(dropout)

    @classmethod
    def from_spec(cls, spec: StudySpec) -> LoraArm:
        for variant in spec.arm_variants():
            if variant.kind == cls.name:
                return cls.from_options(variant.options)
        return cls()

    def options(self) -> dict[str, Any]:
        return {"scaling": self.scaling, "dropout": self.dropout}

    def valid_levels(self, n_layers: int) -> Sequence[int]:
        return range(1, MAX_RANK + 1)

    def prepare_model(self, model: nn.Module, level: int) -> nn.Module:
        from peft import LoraConfig, inject_adapter_in_model

        from freezestats.encoder.freezing import locate_encoder

        config = LoraConfig(
            r=level,
            lora_alpha=self.scaling * level,
            lora_dropout=self.dropout,
            target_modules=list(lora_targets(model)),
            bias="none",
        )
        model.requires_grad_(False)
        model = inject_adapter_in_model(config, model)
        for module in locate_encoder(model).head:
            module.requires_grad_(True)
        return model


def lora_targets(model: nn.Module) -> tuple[str, ...]:
    """The names of the attention projections to adapt in ``model`` (see :data:`TARGET_MODULES`)."""
    from torch import nn

    from freezestats.encoder.freezing import locate_encoder

    names = {
        name.rsplit(".", 1)[-1]
        for layer in locate_encoder(model).layers
        for name, module in layer.named_modules()
        if isinstance(module, nn.Linear)
    }
    for targets in TARGET_MODULES:
        if set(targets) <= names:
            return targets
    raise ModelError(
        f"The lora arm finds no attention projections to adapt in {type(model).__name__}: its layers have "
        f"linear layers {sorted(names)}, but none of the known sets {[list(t) for t in TARGET_MODULES]}."
    )

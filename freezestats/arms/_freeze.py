"""The ``freeze`` arm: freeze the embeddings and the first ``k`` encoder layers, fine-tune the rest.

It wraps the freezing rules of :mod:`freezestats.encoder.freezing` (``[model] freezing`` picks one), so a
study run before arms existed trains exactly the same models, and its cells keep their keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from freezestats.arms._base import Arm
from freezestats.arms._registry import register_arm
from freezestats.spec.arm_kinds import FreezeKind
from freezestats.training.model_builder import FreezePrefix

if TYPE_CHECKING:
    from torch import nn

    from freezestats.spec.study import StudySpec

__all__ = ["FreezeArm"]


@register_arm("freeze")
class FreezeArm(Arm, FreezeKind):
    """Freeze depth ``k`` (``frozen_layers``): -1 the embeddings only, 0 nothing, ``k`` embeddings + ``k`` layers.

    ``freezing`` names the registered freezing rule (:func:`freezestats.encoder.freezing.register_freezing`)
    that sets ``requires_grad`` for a depth; the default, ``freeze``, is :func:`freezestats.encoder.freezing.freeze`.
    """

    def __init__(self, freezing: str = "freeze") -> None:
        self.freezing = freezing

    @classmethod
    def from_spec(cls, spec: StudySpec) -> FreezeArm:
        """``[model] freezing``, looked up now so that a misspelt freezing rule fails before any training."""
        arm = cls(spec.model.freezing)
        arm._freezing()
        return arm

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> FreezeArm:
        """An ``[[arms]]`` variant's freeze arm, its freezing rule looked up now (before any training)."""
        arm = cls(**options)
        arm._freezing()
        return arm

    def options(self) -> dict[str, Any]:
        return {"freezing": self.freezing}

    def valid_levels(self, n_layers: int) -> Sequence[int]:
        return range(-1, n_layers + 1)

    def prepare_model(self, model: nn.Module, level: int) -> nn.Module:
        return FreezePrefix(self.freezing).prepare_model(model, level)

    def _freezing(self) -> Any:
        from freezestats.encoder.freezing import get_freezing  # imports torch: only when a model is built or checked

        return get_freezing(self.freezing)

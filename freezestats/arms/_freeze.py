"""The ``freeze`` arm: freeze the embeddings and the first ``k`` encoder layers, fine-tune the rest.

It wraps the freezing strategies of :mod:`freezestats.encoder.freezing` (``[model] strategy`` picks one), so a
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

    ``strategy`` names the registered freezing strategy (:func:`freezestats.encoder.freezing.register_strategy`)
    that sets ``requires_grad`` for a depth; the default, ``freeze``, is :func:`freezestats.encoder.freezing.freeze`.
    """

    def __init__(self, strategy: str = "freeze") -> None:
        self.strategy = strategy

    @classmethod
    def from_spec(cls, spec: StudySpec) -> FreezeArm:
        """``[model] strategy``, looked up now so that a misspelt strategy fails before any training."""
        arm = cls(spec.model.strategy)
        arm._strategy()
        return arm

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> FreezeArm:
        """An ``[[arms]]`` variant's freeze arm, its strategy looked up now (before any training)."""
        arm = cls(**options)
        arm._strategy()
        return arm

    def options(self) -> dict[str, Any]:
        return {"strategy": self.strategy}

    def valid_levels(self, n_layers: int) -> Sequence[int]:
        return range(-1, n_layers + 1)

    def prepare_model(self, model: nn.Module, level: int) -> nn.Module:
        return FreezePrefix(self.strategy).prepare_model(model, level)

    def _strategy(self) -> Any:
        from freezestats.encoder.freezing import get_strategy  # imports torch: only when a model is built or checked

        return get_strategy(self.strategy)

"""What the training loop needs from an arm: a model built for a level. Declared here so that training needs no arm.

The arms (:mod:`freezestats.arms`) sit above the loop they train in: an arm's ``run`` calls
:func:`freezestats.training.fine_tune` with itself as the builder. The loop sees only :class:`ModelBuilder`; a
call without one (a bare ``fine_tune``, as before arms existed) freezes a prefix with a freezing rule, which
is what the ``freeze`` arm does too (both call :func:`~freezestats.encoder.freezing.get_freezing`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from torch import nn

__all__ = ["FreezePrefix", "ModelBuilder"]


@runtime_checkable
class ModelBuilder(Protocol):
    """Builds the model a cell at ``level`` trains from the freshly loaded pretrained ``model``."""

    name: str

    def prepare_model(self, model: nn.Module, level: int) -> nn.Module: ...


class FreezePrefix:
    """The model building of a call without an arm: freeze depth ``level`` with the freezing rule ``freezing``."""

    name = "freeze"

    def __init__(self, freezing: str = "freeze") -> None:
        self.freezing = freezing

    def prepare_model(self, model: nn.Module, level: int) -> nn.Module:
        from freezestats.encoder.freezing import get_freezing  # imports torch: only when a model is built

        get_freezing(self.freezing)(model, level)
        return model

"""The one abstract base every arm derives from: what the study compares, level by level.

An *arm* is one way of adapting a pretrained encoder to a task (freezing a prefix today; probes, LoRA or
re-initialised layers later). The runner and the trainer know only this interface, so a new arm is a new
module, never an edit of ``runner`` or ``training``: the arm says which levels it has, builds the model for
a cell's level, and trains it (by default in the shared loop, :func:`freezestats.training.fine_tune`).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from freezestats.spec.arm_kinds import ArmKind

if TYPE_CHECKING:
    from torch import nn

    from freezestats.spec.study import StudySpec
    from freezestats.training._outcome import RunOutcome

__all__ = ["Arm"]


class Arm(ArmKind, abc.ABC):
    """One arm of a study: a family of models indexed by an integer *level* on :attr:`level_axis`.

    What its ``[[arms]]`` table holds (the level axis, options, checks) is its kind
    (:class:`~freezestats.spec.arm_kinds.ArmKind`): a built-in arm subclasses its declared kind as well.

    Subclasses are registered with :func:`~freezestats.arms.register_arm`, which sets :attr:`name`.
    An instance carries the arm's options as the spec sets them (:meth:`from_spec`); two instances with
    the same options must build the same model for the same level and seed, or resumed studies would mix
    different experiments under one name.
    """

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> Arm:
        """The arm of one ``[[arms]]`` variant (its options, axes already one value each)."""
        return cls(**options)

    @classmethod
    @abc.abstractmethod
    def from_spec(cls, spec: StudySpec) -> Arm:
        """The arm with its options read (and checked) from ``spec``; raises :class:`SpecError` on bad options."""

    @abc.abstractmethod
    def options(self) -> dict[str, Any]:
        """The options this instance was built with, as plain data (recorded with the study)."""

    @abc.abstractmethod
    def valid_levels(self, n_layers: int) -> Sequence[int]:
        """The levels that mean something for an encoder with ``n_layers`` transformer blocks."""

    @abc.abstractmethod
    def prepare_model(self, model: nn.Module, level: int) -> nn.Module:
        """Build the model a cell at ``level`` trains from the freshly loaded ``model``, and return it.

        Called after the seed is set and before the model moves to its device; it may change ``model``
        in place (and return it) or wrap it. It must not draw from the random number generators unless
        that is part of the arm, since the head initialisation and dropout draw from them next.
        """

    def run(self, *, level: int, **inputs: Any) -> RunOutcome:
        """Train and evaluate one cell at ``level``; ``inputs`` are :func:`~freezestats.training.fine_tune`'s.

        The default is the shared training loop, so that arms differ only in the model they train; an
        arm that needs another loop overrides this.
        """
        from freezestats.training import fine_tune

        return fine_tune(arm=self, frozen_layers=level, **inputs)

    def __repr__(self) -> str:
        options = ", ".join(f"{key}={value!r}" for key, value in self.options().items())
        return f"{type(self).__name__}({options})"

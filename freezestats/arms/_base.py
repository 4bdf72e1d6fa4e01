"""The one abstract base every arm derives from: what the study compares, level by level.

An *arm* is one way of adapting a pretrained encoder to a task (freezing a prefix today; probes, LoRA or
re-initialised layers later). The runner and the trainer know only this interface, so a new arm is a new
module, never an edit of ``runner`` or ``training``: the arm says which levels it has, builds the model for
a cell's level, and trains it (by default in the shared loop, :func:`freezestats.training.fine_tune`).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from torch import nn

    from freezestats.spec import StudySpec
    from freezestats.training import RunOutcome

__all__ = ["Arm"]


class Arm(abc.ABC):
    """One arm of a study: a family of models indexed by an integer *level* on :attr:`level_axis`.

    Subclasses are registered with :func:`~freezestats.arms.register_arm`, which sets :attr:`name`.
    An instance carries the arm's options as the spec sets them (:meth:`from_spec`); two instances with
    the same options must build the same model for the same level and seed, or resumed studies would mix
    different experiments under one name.
    """

    name: ClassVar[str] = ""
    """The registered name (what a spec and the results call the arm)."""
    level_axis: ClassVar[str] = "frozen_layers"
    """The grid axis that holds this arm's levels: the key of an ``[[arms]]`` table that lists them."""
    uses_learning_rate: ClassVar[bool] = True
    """Whether the arm trains by gradient steps (a probe fits in closed form: it has no rate)."""
    default_learning_rate: ClassVar[float | None] = None
    """The arm's rate when its ``[[arms]]`` table gives none; ``None``: ``training.learning_rate`` (full FT's)."""
    option_defaults: ClassVar[Mapping[str, Any]] = {}
    """The options an ``[[arms]]`` table may set besides the levels and the rate, with their defaults."""
    option_axes: ClassVar[tuple[str, ...]] = ()
    """Options given as lists: the table becomes one arm variant per value (e.g. a probe's pooling)."""

    @classmethod
    def check_level(cls, value: Any) -> int | str:
        """A level as an ``[[arms]]`` table writes it, checked; raises ``ValueError`` saying what is allowed.

        Levels are integers (``-1`` and up); an arm with symbolic levels (``"last"``) overrides this and
        :meth:`resolve_level`.
        """
        if isinstance(value, bool) or not isinstance(value, int) or value < -1:
            raise ValueError(f"must be an integer >= -1, but got {value!r}")
        return value

    @classmethod
    def check_option(cls, key: str, value: Any) -> Any:
        """One option's value, checked (a single value, also for an option axis); raises ``ValueError``."""
        default = cls.option_defaults[key]
        number = isinstance(default, float) and isinstance(value, (int, float))  # an int is a fine float
        if isinstance(default, bool) != isinstance(value, bool) or not (number or isinstance(value, type(default))):
            raise ValueError(f"must be a {type(default).__name__}, but got {value!r}")
        return value

    @classmethod
    def resolve_level(cls, level: int | str, n_layers: int) -> int:
        """The integer level a spec's level means for a model with ``n_layers`` blocks (cells hold these)."""
        return int(level)

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

"""Arms by name: :func:`register_arm` and :func:`get_arm` over the arm-kind registry of the spec.

One registry (:mod:`freezestats.spec.arm_kinds`) holds a class per name: the spec reads the kind from it to
validate an ``[[arms]]`` table; the runner gets the implementation, the :class:`Arm` subclass registered here.
Arms from user code reach every process through ``plugins`` or a ``freezestats.arms`` entry point (see there).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from freezestats.arms._base import Arm
from freezestats.exceptions import SpecError
from freezestats.spec.arm_kinds import available_kinds, get_kind, register_kind

__all__ = ["available_arms", "get_arm", "register_arm"]

A = TypeVar("A", bound=type[Arm])


def register_arm(name: str) -> Callable[[A], A]:
    """Class decorator registering an :class:`Arm` subclass under ``name`` (returns the class unchanged).

    A built-in arm implements the kind declared under its name (and subclasses it); any other name must be new.
    """
    kind = register_kind(name)

    def decorator(cls: A) -> A:
        if not (isinstance(cls, type) and issubclass(cls, Arm)):
            raise TypeError(f"@register_arm({name!r}) must decorate a subclass of Arm, but got {cls!r}.")
        return kind(cls)

    return decorator


def available_arms() -> list[str]:
    """Names of the registered arms (entry points included), sorted."""
    return available_kinds()


def get_arm(name: str) -> type[Arm]:
    """The arm class registered as ``name``; an unknown name raises :class:`SpecError` with close matches."""
    cls = get_kind(name)
    if not issubclass(cls, Arm):
        raise SpecError(f"Arm kind {name!r} is declared, but no arm implements it (nothing registered an Arm for it).")
    return cls

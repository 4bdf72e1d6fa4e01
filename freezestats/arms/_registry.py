"""Arms by name: the registry, and the two ways arms from user code reach every process of a study.

A study's worker processes (``freezestats worker``, ``run --workers N``) start from the study database,
not from the user's session, so an arm registered only by code the user ran in their own interpreter would
be unknown there. Two ways make it known everywhere:

* an installed package declares an entry point in the ``freezestats.arms`` group (the entry point names
  the arm's class or the module that registers it); they are loaded on the first look-up;
* the spec lists modules in ``plugins``; every process imports them before it resolves the study's arm
  (:func:`load_plugins`), and a worker reads that list from the spec stored with the study.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterable
from importlib import metadata
from typing import TypeVar

from freezestats.arms._base import Arm
from freezestats.exceptions import SpecError

__all__ = ["ENTRY_POINT_GROUP", "available_arms", "get_arm", "load_plugins", "register_arm"]

ENTRY_POINT_GROUP = "freezestats.arms"

_ARMS: dict[str, type[Arm]] = {}
_entry_points_loaded = False

A = TypeVar("A", bound=type[Arm])


def register_arm(name: str) -> Callable[[A], A]:
    """Class decorator registering an :class:`Arm` subclass under ``name`` (returns the class unchanged).

    Duplicate names are an error rather than a silent override: two arms answering to one name would make
    recorded results ambiguous. Registering the very same class again (a module imported twice, once as
    a plugin and once by an entry point) is allowed.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"An arm name must be a non-empty string, but got {name!r}.")

    def decorator(cls: A) -> A:
        if not (isinstance(cls, type) and issubclass(cls, Arm)):
            raise TypeError(f"@register_arm({name!r}) must decorate a subclass of Arm, but got {cls!r}.")
        known = _ARMS.get(name)
        if known is not None and known is not cls:
            raise ValueError(f"Arm names must be unique, but {name!r} is already registered (by {known.__qualname__}).")
        cls.name = name
        _ARMS[name] = cls
        return cls

    return decorator


def available_arms() -> list[str]:
    """Names of the registered arms (entry points included), sorted."""
    _load_entry_points()
    return sorted(_ARMS)


def get_arm(name: str) -> type[Arm]:
    """The arm class registered as ``name``; an unknown name raises :class:`SpecError` with close matches."""
    _load_entry_points()
    if isinstance(name, str) and name in _ARMS:
        return _ARMS[name]
    available = available_arms()
    close = difflib.get_close_matches(name, available, n=3) if isinstance(name, str) else []
    hint = f" Did you mean: {', '.join(repr(c) for c in close)}?" if close else ""
    raise SpecError(f"Unknown arm {name!r}.{hint} Available: {', '.join(available) or '(none)'}.")


def load_plugins(modules: Iterable[str], where: str = "plugins") -> None:
    """Import ``modules`` (a spec's ``plugins``) so that the arms and strategies they register exist here."""
    for i, module in enumerate(modules):
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise SpecError(
                f"`{where}` must name importable modules, but importing {module!r} ({where}[{i}]) failed: {err}. "
                "Is its folder on PYTHONPATH (or its package installed) in this process?"
            ) from err


def _load_entry_points() -> None:
    """Load the ``freezestats.arms`` entry points once per process (an installed package's arms).

    A broken entry point fails every look-up until it is fixed, rather than leaving its arm silently missing.
    """
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = entry_point.load()  # importing the module runs its @register_arm decorators
        except Exception as err:
            raise SpecError(
                f"The `{ENTRY_POINT_GROUP}` entry point {entry_point.name!r} ({entry_point.value}) failed to load: "
                f"{type(err).__name__}: {err}"
            ) from err
        if isinstance(loaded, type) and issubclass(loaded, Arm) and loaded not in _ARMS.values():
            register_arm(entry_point.name)(loaded)
    _entry_points_loaded = True

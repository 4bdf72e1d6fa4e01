"""What each arm kind's ``[[arms]]`` table may hold, declared below the spec so that the spec needs no training code.

An arm (:mod:`freezestats.arms`) is an arm *kind* (its levels' axis, its options, how a table's values are
checked) plus the code that builds and trains its model. The spec validates a table with the kind alone; the
arms, which sit above the training loop, implement each kind by subclassing it and registering the subclass
under the same name (:func:`freezestats.arms.register_arm`). The built-in kinds are declared here; an arm from
user code declares its own kind simply by being a subclass of :class:`ArmKind` (every :class:`~freezestats.arms.Arm`
is), so one class does both jobs.

The registry holds one class per name: the declared kind until its implementation registers, then the
implementation (a subclass of the declaration). Arms from user code reach every process in two ways:

* an installed package declares an entry point in the ``freezestats.arms`` group (the entry point names the arm's
  class or the module that registers it); they are loaded on the first look-up;
* the spec lists modules in ``plugins``; every process imports them before it resolves the study's arm
  (:func:`load_plugins`), and a worker reads that list from the spec stored with the study.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterable, Mapping
from importlib import metadata
from typing import Any, ClassVar, TypeVar

from freezestats.exceptions import SpecError

__all__ = [
    "ENTRY_POINT_GROUP",
    "LAST",
    "MAX_RANK",
    "POOLINGS",
    "ArmKind",
    "available_kinds",
    "get_kind",
    "load_plugins",
    "register_kind",
]

ENTRY_POINT_GROUP = "freezestats.arms"

_KINDS: dict[str, type[ArmKind]] = {}
_DECLARED: set[str] = set()  # names whose registered class is still the bare declaration
_entry_points_loaded = False


class ArmKind:
    """The declaration of an arm kind: the axis of its levels, its options, and how a spec's values are checked."""

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
    renamed_options: ClassVar[Mapping[str, str]] = {}
    """An option's name before it was renamed -> its name now. A table may still use the old name (with a note),
    and the stored form of the table keeps it, so that the spec hash of a study made before is unchanged."""

    @classmethod
    def check_level(cls, value: Any) -> int | str:
        """A level as an ``[[arms]]`` table writes it, checked; raises ``ValueError`` saying what is allowed.

        Levels are integers (``-1`` and up); a kind with symbolic levels (``"last"``) overrides this and
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


K = TypeVar("K", bound=type[ArmKind])


def register_kind(name: str, *, declaration: bool = False) -> Callable[[K], K]:
    """Class decorator registering an :class:`ArmKind` subclass under ``name`` (returns the class unchanged).

    Duplicate names are an error rather than a silent override: two arms answering to one name would make
    recorded results ambiguous. Two registrations are allowed: the very same class again (a module imported
    twice, once as a plugin and once by an entry point), and the first implementation of a ``declaration``
    (a subclass of it), which takes its place.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"An arm name must be a non-empty string, but got {name!r}.")

    def decorator(cls: K) -> K:
        if not (isinstance(cls, type) and issubclass(cls, ArmKind)):
            raise TypeError(f"@register_arm({name!r}) must decorate a subclass of Arm, but got {cls!r}.")
        known = _KINDS.get(name)
        implements = name in _DECLARED and known is not None and issubclass(cls, known)
        if known is not None and known is not cls and not implements:
            raise ValueError(f"Arm names must be unique, but {name!r} is already registered (by {known.__qualname__}).")
        cls.name = name
        _KINDS[name] = cls
        if declaration:
            _DECLARED.add(name)
        elif known is not cls:
            _DECLARED.discard(name)
        return cls

    return decorator


def available_kinds() -> list[str]:
    """Names of the registered arm kinds (entry points included), sorted."""
    _load_entry_points()
    return sorted(_KINDS)


def get_kind(name: str) -> type[ArmKind]:
    """The class registered as ``name``; an unknown name raises :class:`SpecError` with close matches."""
    _load_entry_points()
    if isinstance(name, str) and name in _KINDS:
        return _KINDS[name]
    available = available_kinds()
    close = difflib.get_close_matches(name, available, n=3) if isinstance(name, str) else []
    hint = f" Did you mean: {', '.join(repr(c) for c in close)}?" if close else ""
    raise SpecError(f"Unknown arm {name!r}.{hint} Available: {', '.join(available) or '(none)'}.")


def load_plugins(modules: Iterable[str], where: str = "plugins") -> None:
    """Import ``modules`` (a spec's ``plugins``) so that the arms and freezing rules they register exist here."""
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
        if isinstance(loaded, type) and issubclass(loaded, ArmKind) and loaded not in _KINDS.values():
            register_kind(entry_point.name)(loaded)
    _entry_points_loaded = True


# The built-in kinds: what their tables hold. freezestats.arms implements each (FreezeArm, LoraArm, ...).

POOLINGS = ("mean", "cls")
LAST = "last"
MAX_RANK = 1024


@register_kind("freeze", declaration=True)
class FreezeKind(ArmKind):
    """``frozen_layers = k``: -1 the embeddings only, 0 nothing, ``k`` embeddings + ``k`` layers; ``freezing``: the
    freezing rule (``strategy`` before it was renamed)."""

    level_axis = "frozen_layers"
    option_defaults: ClassVar[Mapping[str, Any]] = {"freezing": "freeze"}
    renamed_options: ClassVar[Mapping[str, str]] = {"strategy": "freezing"}


@register_kind("lora", declaration=True)
class LoraKind(ArmKind):
    """``rank = r``: rank-``r`` adapters; options ``scaling`` (alpha / rank) and ``dropout``."""

    level_axis = "rank"
    default_learning_rate = 5e-4
    option_defaults: ClassVar[Mapping[str, Any]] = {"scaling": 1.0, "dropout": 0.1}

    @classmethod
    def check_level(cls, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_RANK:
            raise ValueError(f"must be an integer in 1..{MAX_RANK} (the adapters' rank), but got {value!r}")
        return value

    @classmethod
    def check_option(cls, key: str, value: Any) -> Any:
        value = super().check_option(key, value)
        if key == "scaling" and not value > 0:
            raise ValueError(f"must be > 0 (alpha / rank), but got {value!r}")
        if key == "dropout" and not 0 <= value < 1:
            raise ValueError(f"must lie in [0, 1), but got {value!r}")
        return float(value)


@register_kind("probe", declaration=True)
class ProbeKind(ArmKind):
    """``layers = l``: a linear probe on layer ``l`` (or ``"last"``); ``pooling`` is an option axis."""

    level_axis = "layers"
    uses_learning_rate = False
    option_defaults: ClassVar[Mapping[str, Any]] = {"pooling": "mean"}
    option_axes = ("pooling",)

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


@register_kind("reinit", declaration=True)
class ReinitKind(ArmKind):
    """``top_layers = k``: the top ``k`` layers and the pooler re-initialised; every parameter trains."""

    level_axis = "top_layers"

    @classmethod
    def check_level(cls, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"must be an integer >= 0 (the number of top layers re-initialised), but got {value!r}")
        return value

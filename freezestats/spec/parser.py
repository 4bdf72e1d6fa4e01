"""Type and range checks for the study spec, phrased the same way everywhere: the key path and the file.

Shared by :mod:`freezestats.spec.study` and the modules that parse parts of a spec (``[[arms]]``, ``[[groups]]``),
so that every message reads alike: "`grid.train_sizes[2]` must be an integer, but got train_size='x' (file)".
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from typing import Any

from freezestats.exceptions import SpecError, warn_renamed
from freezestats.tasks import TaskConfig, get_task

__all__ = ["_Parser"]


class _Parser:
    """Type and range checks that all phrase their errors the same way."""

    def __init__(self, source: str, stored: bool = False) -> None:
        self.source = source
        self.stored = stored
        self.user_tasks: dict[str, TaskConfig] = {}  # the spec's own tasks ([[tasks]]), once they are parsed

    def task(self, name: str) -> TaskConfig:
        """The task called ``name``: one the spec defines (``[[tasks]]``) first, else a packaged one."""
        return self.user_tasks[name] if name in self.user_tasks else get_task(name)

    def fail(self, message: str) -> SpecError:
        return SpecError(f"{message} ({self.source}).")

    def keys(self, table: Mapping[str, Any], prefix: str, allowed: set[str]) -> None:
        for key in table:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f" Did you mean '{prefix}{close[0]}'?" if close else ""
                raise self.fail(f"Unknown key '{prefix}{key}'.{hint} Allowed keys: {', '.join(sorted(allowed))}")

    def renamed(self, table: Mapping[str, Any], old: str, new: str, prefix: str) -> Mapping[str, Any]:
        """``table`` with the key ``old`` (a key's name before it was renamed) read as ``new``.

        A spec file that uses it gets a one-line note (:func:`~freezestats.exceptions.warn_renamed`); a stored
        spec does not, since its stored form keeps the old name on purpose (the spec hash). Both names at once
        are an error: they are the same key.
        """
        if old not in table:
            return table
        if new in table:
            raise self.fail(f"`{prefix}{old}` is `{prefix}{new}` under its old name: give `{prefix}{new}` only")
        if not self.stored:
            warn_renamed("spec key", f"{prefix}{old}", f"{prefix}{new}", self.source, stacklevel=4)
        return {new if key == old else key: value for key, value in table.items()}

    def required(self, table: Mapping[str, Any], key: str, prefix: str) -> Any:
        if key not in table:
            raise self.fail(f"`{prefix}{key}` is required")
        return table[key]

    def table(self, raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        value = raw.get(key, {})
        if not isinstance(value, Mapping):
            raise self.fail(f"`{key}` must be a table ([{key}]), but got {value!r}")
        return value

    def nonempty_list(self, table: Mapping[str, Any], key: str, prefix: str) -> Sequence[Any]:
        value = self.required(table, key, prefix)
        if not isinstance(value, list) or not value:
            raise self.fail(f"`{prefix}{key}` must be a non-empty list, but got {key}={value!r}")
        return value

    def unique(self, values: Sequence[Any], key: str) -> None:
        seen = [v for i, v in enumerate(values) if v in values[:i]]
        if seen:
            raise self.fail(f"`{key}` must not repeat values, but {seen[0]!r} appears twice")

    def string(self, value: Any, key: str) -> str:
        if not isinstance(value, str):
            raise self.fail(f"`{key}` must be a string, but got {key.split('.')[-1]}={value!r}")
        return value

    def integer(self, value: Any, key: str, low: int | None = None, allow: tuple[str, ...] = ()) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            extra = f" or one of {list(allow)}" if allow else ""
            raise self.fail(f"`{key}` must be an integer{extra}, but got {_leaf(key)}={value!r}")
        if low is not None and value < low:
            raise self.fail(f"`{key}` must be >= {low}, but got {_leaf(key)}={value}")
        return value

    def number(self, value: Any, key: str, positive: bool = False) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(f"`{key}` must be a finite number, but got {_leaf(key)}={value!r}")
        if positive and value <= 0:
            raise self.fail(f"`{key}` must be > 0, but got {_leaf(key)}={value}")
        if not positive and value < 0:
            raise self.fail(f"`{key}` must be >= 0, but got {_leaf(key)}={value}")
        return float(value)

    def choice(self, value: Any, key: str, allowed: Sequence[str]) -> str:
        if value not in allowed:
            raise self.fail(f"`{key}` must be one of {list(allowed)}, but got {_leaf(key)}={value!r}")
        return value


_SINGULAR = {
    "train_sizes": "train_size",
    "seeds": "seed",
    "order_seeds": "order_seed",
    "rates": "rate",
    "tasks": "task",
}


def _leaf(key: str) -> str:
    """The name a value is shown under: ``grid.train_sizes[2]`` -> ``train_size``."""
    leaf = key.split(".")[-1]
    return _SINGULAR.get(leaf.split("[")[0], leaf.split("[")[0]) if "[" in leaf else leaf

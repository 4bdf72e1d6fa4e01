"""The spec's ``[[arms]]`` tables: which arms a study compares, their levels, rates and options.

Kept apart from :mod:`freezestats.spec.study` because what a table may hold depends on its arm: the arm class
(found by ``kind`` in the registry) names the key of its levels (:attr:`~freezestats.arms.Arm.level_axis`),
its options with their defaults, and whether it has a learning rate. The spec layer only checks the values
against that declaration and phrases every error with the table's index (``arms[2].rank[0]``).

A table whose options include an *axis* (a list-valued option such as the probe's ``pooling``) becomes one
arm *variant* per value, named ``<name>-<value>``: the variants are what cells, results and the analysis
call an arm. Every variant runs over the same tasks, sizes, draws and seeds.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from freezestats.exceptions import SpecError
from freezestats.spec.arm_kinds import get_kind

if TYPE_CHECKING:
    from freezestats.spec.parser import _Parser

__all__ = ["ArmSpec", "ArmVariant", "parse_arms"]


@dataclass(frozen=True)
class ArmSpec:
    """One ``[[arms]]`` table as validated: defaults filled in, axes as tuples (what the study stores)."""

    kind: str
    levels: tuple[int | str, ...]
    learning_rate: float | None
    options: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""
    """The name the table gives its variants (default: ``kind``)."""

    def stored_form(self) -> dict[str, Any]:
        """The table in spec-file shape (so that :meth:`StudySpec.from_stored` parses it back to itself).

        A renamed option is stored under its old name (:attr:`~freezestats.spec.arm_kinds.ArmKind.renamed_options`):
        the stored form is what the spec hash covers, and studies made before the rename keep theirs.
        """
        kind = get_kind(self.kind)
        stored_name = {new: old for old, new in kind.renamed_options.items()}
        data: dict[str, Any] = {"kind": self.kind, kind.level_axis: list(self.levels)}
        if self.name:
            data["name"] = self.name
        if self.learning_rate is not None:
            data["learning_rate"] = self.learning_rate
        data.update({stored_name.get(k, k): list(v) if isinstance(v, tuple) else v for k, v in self.options.items()})
        return data

    def variants(self) -> list[ArmVariant]:
        """One variant per combination of the axis values (one variant when the arm has no axes)."""
        axes = get_kind(self.kind).option_axes
        base = self.name or self.kind
        out = []
        for values in itertools.product(*(self.options[axis] for axis in axes)):
            options = {**self.options, **dict(zip(axes, values, strict=True))}
            name = "-".join([base, *(str(v) for v in values)])
            out.append(ArmVariant(name, self.kind, self.levels, self.learning_rate, options))
        return out


@dataclass(frozen=True)
class ArmVariant:
    """One arm as cells and results know it: a name, a kind, its levels, its rate and scalar options."""

    name: str
    kind: str
    levels: tuple[int | str, ...]
    learning_rate: float | None
    options: Mapping[str, Any]


def parse_arms(p: _Parser, value: Any, default_rate: float) -> tuple[ArmSpec, ...]:
    """Validate the ``arms`` array of tables; ``default_rate`` is ``training.learning_rate`` (full FT's rate)."""
    if not isinstance(value, list) or not value or not all(isinstance(t, Mapping) for t in value):
        raise p.fail(f"`arms` must be a non-empty array of tables ([[arms]] with kind = ...), but got arms={value!r}")
    arms = tuple(_parse_table(p, table, f"arms[{i}]", default_rate) for i, table in enumerate(value))
    seen: dict[str, int] = {}
    for i, arm in enumerate(arms):
        for variant in arm.variants():
            if variant.name in seen:
                raise p.fail(
                    f"`arms[{i}]` repeats the arm name {variant.name!r} of arms[{seen[variant.name]}]; "
                    "give one of the tables a distinct `name`"
                )
            seen[variant.name] = i
    return arms


def _parse_table(p: _Parser, table: Mapping[str, Any], where: str, default_rate: float) -> ArmSpec:
    kind = p.string(p.required(table, "kind", f"{where}."), f"{where}.kind")
    try:
        cls = get_kind(kind)
    except SpecError as err:
        raise SpecError(f"{err} ({where}.kind, {p.source})") from None
    axis = cls.level_axis
    for old, new in cls.renamed_options.items():
        table = p.renamed(table, old, new, f"{where}.")
    allowed = {"kind", "name", axis, *cls.option_defaults} | ({"learning_rate"} if cls.uses_learning_rate else set())
    for key in table:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise p.fail(
                f"Unknown key '{where}.{key}' for arm kind {kind!r}.{hint} Allowed keys: {', '.join(sorted(allowed))}"
            )
    levels = tuple(
        _checked(p, cls.check_level, v, f"{where}.{axis}[{j}]")
        for j, v in enumerate(p.nonempty_list(table, axis, f"{where}."))
    )
    p.unique(levels, f"{where}.{axis}")
    rate = None
    if cls.uses_learning_rate:
        fallback = cls.default_learning_rate if cls.default_learning_rate is not None else default_rate
        rate = p.number(table.get("learning_rate", fallback), f"{where}.learning_rate", positive=True)
    options: dict[str, Any] = {}
    for key, default in cls.option_defaults.items():
        raw = table.get(key, default)
        if key in cls.option_axes:
            values = raw if isinstance(raw, list) else [raw]
            if not values:
                raise p.fail(f"`{where}.{key}` must be a non-empty list, but got {key}=[]")
            checked = tuple(_checked(p, lambda v, k=key: cls.check_option(k, v), v, f"{where}.{key}") for v in values)
            p.unique(checked, f"{where}.{key}")
            options[key] = checked
        else:
            options[key] = _checked(p, lambda v, k=key: cls.check_option(k, v), raw, f"{where}.{key}")
    name = p.string(table.get("name", ""), f"{where}.name")
    if name and not name.replace("_", "").replace("-", "").isalnum():
        raise p.fail(f"`{where}.name` must be letters, digits, '-' or '_', but got name={name!r}")
    return ArmSpec(kind=kind, levels=levels, learning_rate=rate, options=options, name=name)


def _checked(p: _Parser, check: Any, value: Any, key: str) -> Any:
    """``check(value)``, its ``ValueError`` turned into a spec error naming ``key``."""
    try:
        return check(value)
    except ValueError as err:
        raise p.fail(f"`{key}` {err}") from None

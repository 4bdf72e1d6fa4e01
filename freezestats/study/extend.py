"""What ``run --extend`` may change in a study's spec: only add grid values, arm tables and arm levels.

Kept apart from :mod:`freezestats.study.trials` because these rules compare two *stored* specs
(:meth:`freezestats.spec.study.StudySpec.to_dict` output, as plain data) and need neither Optuna nor a database:
whatever a new spec drops or changes would orphan or redefine cells that already ran, so each such change is
named in the refusal, one phrase per change (:func:`_diff` for the "Changed: ..." message of a plain re-run).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from freezestats.spec.pairs import CROSS
from freezestats.spec.tasks import without_roots

__all__ = ["_diff", "_not_an_extension"]


def _not_an_extension(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What in ``new`` is more than adding grid values to ``old`` (empty when it is an extension)."""
    problems = []
    grid_lists = {"tasks": (old["tasks"], new["tasks"])}
    for k in ("frozen_layers", "train_sizes", "seeds"):  # a spec with [[arms]] has no grid.frozen_layers
        grid_lists[f"grid.{k}"] = (old["grid"].get(k, []), new["grid"].get(k, []))
    old_orders, new_orders = old["grid"].get("order_seeds"), new["grid"].get("order_seeds")
    if old_orders is None and new_orders is not None:
        problems.append("grid.order_seeds is added (crossing the data order with the seeds makes every cell new)")
    elif old_orders is not None and new_orders is None:
        problems.append(f"grid.order_seeds is removed (it was {old_orders})")
    elif old_orders is not None:
        grid_lists["grid.order_seeds"] = (old_orders, new_orders)
    grid_lists["grid.pair_encoding"] = tuple(g.get("pair_encoding", [CROSS]) for g in (old["grid"], new["grid"]))
    grid_lists["grid.bi_frozen_layers"] = tuple(_bi_levels(g) for g in (old["grid"], new["grid"]))
    for key, (before, after) in grid_lists.items():
        removed = [v for v in before if v not in after]
        if removed:
            problems.append(f"{key} drops {removed}")
    if new["grid"]["subset_draws"] < old["grid"]["subset_draws"]:
        problems.append(f"grid.subset_draws shrinks from {old['grid']['subset_draws']}")
    problems.extend(_arms_not_extended(old.get("arms", []), new.get("arms", [])))
    problems.extend(_task_definitions_not_extended(old.get("task_definitions", []), new.get("task_definitions", [])))
    for key in sorted(set(old) | set(new)):
        if key in ("tasks", "grid", "description", "execution", "arms", "task_definitions"):
            continue
        if key == "primary_metric":
            changed = [t for t in old.get(key, {}) if old[key].get(t) != new.get(key, {}).get(t)]
            problems.extend(f"primary_metric.{t} changes" for t in changed)
        elif old.get(key) != new.get(key):
            problems.extend(_diff({key: old.get(key)}, {key: new.get(key)}))
    return problems


def _arms_not_extended(old: list[Mapping[str, Any]], new: list[Mapping[str, Any]]) -> list[str]:
    """What in ``new``'s ``[[arms]]`` is more than adding arm tables or levels to ``old``'s.

    A table is the same arm when everything but its levels is equal (kind, name, rate, options); its levels
    may grow. Adding or removing ``[[arms]]`` altogether changes every cell's identity and is refused.
    """
    if bool(old) != bool(new):
        return [f"[[arms]] is {'added' if new else 'removed'} (every cell's identity changes)"]
    from freezestats.spec.arm_kinds import get_kind

    def split(table: Mapping[str, Any]) -> tuple[dict[str, Any], list[Any]]:
        axis = get_kind(table["kind"]).level_axis
        return {k: v for k, v in table.items() if k != axis}, list(table[axis])

    problems = []
    candidates = [split(table) for table in new]
    for i, table in enumerate(old):
        rest, levels = split(table)
        match = next((found for found in candidates if found[0] == rest), None)
        if match is None:
            problems.append(f"arms[{i}] ({rest.get('name') or rest['kind']}) changes or is removed")
        elif [level for level in levels if level not in match[1]]:
            problems.append(f"arms[{i}] drops levels {[level for level in levels if level not in match[1]]}")
    return problems


def _task_definitions_not_extended(old: list[Mapping[str, Any]], new: list[Mapping[str, Any]]) -> list[str]:
    """A user task of the study may not change (its folder, ``root``, may move); new ones may be added."""
    by_name = {task["name"]: task for task in without_roots(new)}
    problems = []
    for task in without_roots(old):
        if task["name"] in by_name and by_name[task["name"]] != task:
            problems.extend(_diff({f"task {task['name']}": task}, {f"task {task['name']}": by_name[task["name"]]}))
    return problems


def _bi_levels(grid: Mapping[str, Any]) -> list[int]:
    """The frozen levels a stored grid runs ``bi`` cells at (none without ``bi``, every level unless restricted)."""
    if "bi" not in grid.get("pair_encoding", [CROSS]):
        return []
    return list(grid.get("bi_frozen_layers") or grid["frozen_layers"])


def _diff(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Every value that differs between two stored forms, as ``key.path: old -> new`` (user tasks by name, less
    the folder their data is read from)."""
    if "task_definitions" in old or "task_definitions" in new:
        old, new = (
            {
                **{k: v for k, v in side.items() if k != "task_definitions"},
                **{f"task {t['name']}": t for t in without_roots(side.get("task_definitions", []))},
            }
            for side in (old, new)
        )
    changes = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            changes.extend(_diff(a, b, f"{prefix}{key}."))
        elif json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True):
            changes.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return changes

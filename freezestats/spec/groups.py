"""The spec's ``[[groups]]``: tasks trained together with a shared encoder, one head per task (issue 14).

Kept apart from :mod:`freezestats.spec.study` as ``[[arms]]`` is: a group's table has its own keys (the tasks, how
steps sample them, which tasks' batches leave the frozen layers alone), validated here with the same one-line
messages (``groups[1].freeze_for[0]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from freezestats.exceptions import SpecError
from freezestats.spec.parser import _Parser
from freezestats.tasks import available_tasks

__all__ = ["SAMPLINGS", "GroupSpec", "parse_groups"]

SAMPLINGS = ("proportional", "uniform", "temperature")


@dataclass(frozen=True)
class GroupSpec:
    """A task group: one shared encoder trained on several tasks at once, one head per task (MT-DNN style).

    ``sampling`` picks which task each step trains on (see :mod:`freezestats.training.shared_encoder.sampler`):
    ``proportional`` visits every batch of every task once per epoch, ``uniform`` draws tasks with equal
    probability, ``temperature`` with probability proportional to ``n_t ** (1 / temperature)``.
    ``freeze_for`` names the tasks whose batches leave the frozen layers untouched (``"all"``: every
    task's, the frozen layers never change); the other tasks' batches update them.
    """

    name: str
    tasks: tuple[str, ...]
    sampling: str = "proportional"
    temperature: float = 2.0
    freeze_for: str | tuple[str, ...] = "all"

    def frozen_for(self, task: str) -> bool:
        """Whether ``task``'s batches leave the frozen layers untouched."""
        return self.freeze_for == "all" or task in self.freeze_for


def parse_groups(p: _Parser, value: Any) -> tuple[GroupSpec, ...]:
    """``[[groups]]``: each a name, its tasks (known, at least one), the sampling and ``freeze_for``."""
    if not isinstance(value, list):
        raise p.fail(f"`groups` must be an array of tables ([[groups]]), but got groups={value!r}")
    groups = []
    for i, raw in enumerate(value):
        where = f"groups[{i}]"
        if not isinstance(raw, Mapping):
            raise p.fail(f"`{where}` must be a table ([[groups]]), but got {raw!r}")
        p.keys(raw, f"{where}.", {"name", "tasks", "sampling", "temperature", "freeze_for"})
        name = p.string(p.required(raw, "name", f"{where}."), f"{where}.name")
        if not name.strip() or any(ch in name for ch in "/\\"):
            raise p.fail(f"`{where}.name` must be a non-empty name without slashes, but got name={name!r}")
        if name in available_tasks() or name in p.user_tasks:
            raise p.fail(f"`{where}.name` must not be a task's name (results say 'trained_with'), but got {name!r}")
        tasks = raw.get("tasks")
        if not isinstance(tasks, list) or not tasks:
            raise p.fail(f"`{where}.tasks` must be a non-empty list of task names, but got tasks={tasks!r}")
        for j, task in enumerate(tasks):
            try:
                p.task(p.string(task, f"{where}.tasks[{j}]"))
            except SpecError as err:
                raise p.fail(f"{err} ({where}.tasks[{j}])") from None
        p.unique(tasks, f"{where}.tasks")
        sampling = p.choice(raw.get("sampling", GroupSpec.sampling), f"{where}.sampling", SAMPLINGS)
        if "temperature" in raw and sampling != "temperature":
            raise p.fail(f"`{where}.temperature` is set but `{where}.sampling` is {sampling!r}, not 'temperature'")
        temperature = p.number(raw.get("temperature", GroupSpec.temperature), f"{where}.temperature", positive=True)
        groups.append(
            GroupSpec(name, tuple(tasks), sampling, temperature, _parse_freeze_for(p, raw, where, tuple(tasks)))
        )
    p.unique([group.name for group in groups], "groups[].name")
    return tuple(groups)


def _parse_freeze_for(p: _Parser, raw: Mapping[str, Any], where: str, tasks: tuple[str, ...]) -> str | tuple[str, ...]:
    """``"all"`` or a non-empty list of the group's own tasks."""
    value = raw.get("freeze_for", "all")
    if value == "all":
        return "all"
    if not isinstance(value, list) or not value:
        raise p.fail(f"`{where}.freeze_for` must be 'all' or a non-empty list of the group's tasks, but got {value!r}")
    for j, task in enumerate(value):
        if task not in tasks:
            raise p.fail(f"`{where}.freeze_for[{j}]` must be one of the group's tasks {list(tasks)}, but got {task!r}")
    p.unique(value, f"{where}.freeze_for")
    return tuple(value)

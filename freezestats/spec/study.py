"""The study spec: one TOML file describes one study, and is validated whole before any training.

A spec is parsed into frozen dataclasses. Every key is checked for its type and range, unknown keys are
rejected with a suggestion, and each message names the key path (``grid.train_sizes[2]``) and the file,
so that a typo costs seconds, not a GPU night. Checks that need the model's config or the task's data
(frozen layers within -1..L, train sizes within the train pool) live in :func:`check_against` and are
run by ``freezestats validate`` and by ``freezestats run`` before the first trial.
"""

from __future__ import annotations

import hashlib
import json
import sys
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from freezestats.exceptions import SpecError
from freezestats.spec.adaptive import AdaptiveSpec, parse_adaptive
from freezestats.spec.arms import ArmSpec, ArmVariant, parse_arms
from freezestats.spec.evaluation import EvaluationSpec, parse_evaluation
from freezestats.spec.grid import FULL, GridSpec, parse_grid
from freezestats.spec.groups import GroupSpec, parse_groups
from freezestats.spec.pairs import BI, CROSS
from freezestats.spec.parser import _Parser
from freezestats.spec.search import LRSearchSpec, parse_lr_search
from freezestats.spec.tasks import parse_tasks, stored_task, without_roots
from freezestats.spec.training import DEVICES, PRECISIONS, TrainingSpec, parse_training  # noqa: F401 (re-exported)
from freezestats.tasks import TaskConfig, get_task

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["SPEC_VERSION", "ExecutionSpec", "ModelSpec", "StudySpec", "check_against", "load_spec", "parse_spec"]

SPEC_VERSION = 1


@dataclass(frozen=True)
class ModelSpec:
    """Which pretrained encoder to fine-tune, and how its layers are frozen (``freezing``: the freezing rule)."""

    name: str = "minilm-l6"
    freezing: str = "freeze"

    @property
    def strategy(self) -> str:
        """``freezing``'s name before it was renamed (deprecated)."""
        warnings.warn("ModelSpec.strategy is deprecated: use ModelSpec.freezing", DeprecationWarning, stacklevel=2)
        return self.freezing


@dataclass(frozen=True)
class ExecutionSpec:
    """How trials are executed; changing these never changes what a study measures (not in the hash)."""

    max_retries: int = 1
    heartbeat_interval: int = 30
    grace_period: int = 120


@dataclass(frozen=True)
class StudySpec:
    """A whole study: model, tasks, grid, protocol, learning-rate search."""

    name: str
    tasks: tuple[str, ...]
    grid: GridSpec
    model: ModelSpec = field(default_factory=ModelSpec)
    training: TrainingSpec = field(default_factory=TrainingSpec)
    lr_search: LRSearchSpec = field(default_factory=LRSearchSpec)
    execution: ExecutionSpec = field(default_factory=ExecutionSpec)
    primary_metric: Mapping[str, str] = field(default_factory=dict)
    groups: tuple[GroupSpec, ...] = ()
    """Task groups trained with a shared encoder, next to the single tasks of ``tasks``."""
    plugins: tuple[str, ...] = ()
    """Modules every process of the study imports before it builds the arm: where user code registers arms
    and freezing rules, so that worker processes (which read the spec from the study) know them too."""
    arms: tuple[ArmSpec, ...] = ()
    """The ``[[arms]]`` tables; empty for a single-arm study (``[model] freezing`` + ``grid.frozen_layers``)."""
    task_definitions: tuple[TaskConfig, ...] = ()
    """The user's own tasks among ``tasks`` (``[[tasks]]`` tables or task files, :mod:`freezestats.spec.tasks`)."""
    evaluation: EvaluationSpec | None = None  # ``[evaluation]``: the pool each task reserves from train, or None
    adaptive: AdaptiveSpec | None = None
    """``[adaptive]``: seeds allocated in rounds until each depth is decided; ``None``: every cell runs every seed."""
    description: str = ""
    version: int = SPEC_VERSION
    source: str = field(default="", compare=False)

    @property
    def has_arms(self) -> bool:
        """Whether the spec compares arms (``[[arms]]``) rather than being a single freeze study."""
        return bool(self.arms)

    def arm_variants(self) -> tuple[ArmVariant, ...]:
        """Every arm the cells run: the ``[[arms]]`` variants, or the one ``freeze`` arm of a single-arm spec."""
        if not self.arms:
            options = {"freezing": self.model.freezing}
            return (ArmVariant("freeze", "freeze", self.grid.frozen_layers, self.training.learning_rate, options),)
        return tuple(variant for arm in self.arms for variant in arm.variants())

    def variant(self, name: str) -> ArmVariant:
        """The arm variant called ``name`` (``KeyError`` when the spec has none)."""
        for variant in self.arm_variants():
            if variant.name == name:
                return variant
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain data (what is stored with the study and hashed)."""
        data = asdict(self)
        data.pop("source")
        data.pop("task_definitions")
        if self.task_definitions:  # absent otherwise, so specs of packaged tasks keep their hash
            data["task_definitions"] = [stored_task(task) for task in self.task_definitions]
        data["model"] = {"name": self.model.name, "strategy": self.model.freezing}  # the key's name before: same hash
        data["lr_search"] = self.lr_search.stored_form(self.grid.seeds)
        data["grid"] = self.grid.stored_form()
        if not self.plugins:  # likewise for `plugins`
            del data["plugins"]
        if not self.groups:  # likewise for `groups`
            del data["groups"]
        for group in data.get("groups", []):
            group["tasks"] = list(group["tasks"])
            if group["sampling"] != "temperature":  # unused, so not part of the meaning
                del group["temperature"]
        if self.arms:
            data["arms"] = [arm.stored_form() for arm in self.arms]
            del data["grid"]["frozen_layers"]  # each arm lists its own levels
        else:  # likewise for `arms`
            del data["arms"]
        data.pop("evaluation")  # likewise for `evaluation`
        data |= {"evaluation": self.evaluation.stored_form()} if self.evaluation else {}
        data.pop("adaptive")  # likewise for `adaptive`
        data |= {"adaptive": self.adaptive.stored_form()} if self.adaptive else {}
        data["primary_metric"] = dict(sorted(self.primary_metric.items()))
        return data

    @property
    def spec_hash(self) -> str:
        """sha256 of the canonical JSON form: two specs that mean the same thing hash the same.

        ``execution`` (retries, heartbeats) is left out: it changes how cells run, not what they measure.
        """
        meaning = {k: v for k, v in self.to_dict().items() if k != "execution"}
        if "task_definitions" in meaning:  # the folder the data paths are read from is where, not what
            meaning["task_definitions"] = without_roots(meaning["task_definitions"])
        if meaning["training"]["frozen_dropout"] == "on":  # the default; studies made before the key keep their hash
            meaning["training"] = {k: v for k, v in meaning["training"].items() if k != "frozen_dropout"}
        canonical = json.dumps(meaning, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    @classmethod
    def from_stored(cls, data: Mapping[str, Any], source: str = "<stored spec>") -> StudySpec:
        """Rebuild (and re-validate) a spec from :meth:`to_dict` output, e.g. the copy kept in a study."""
        plain = json.loads(json.dumps(dict(data)))  # tuples -> lists, as TOML gives them
        raw = {k: v for k, v in plain.items() if k not in ("primary_metric", "task_definitions")}
        raw["metrics"] = {"primary": dict(data.get("primary_metric", {}))}
        defined = {task["name"]: task for task in plain.get("task_definitions", [])}
        raw["tasks"] = [defined.get(name, name) for name in plain.get("tasks", [])]
        return _parse(raw, source, stored=True)

    @property
    def all_tasks(self) -> tuple[str, ...]:
        """Every task the study trains, alone (``tasks``) or in a group, each once, in spec order."""
        names = [*self.tasks, *(task for group in self.groups for task in group.tasks)]
        return tuple(dict.fromkeys(names))

    def group_named(self, name: str) -> GroupSpec | None:
        """The task group called ``name`` (a cell's ``task`` when the cell trains a group), else ``None``."""
        return next((group for group in self.groups if group.name == name), None)

    def pair_encodings_for(self, name: str, frozen_layers: int) -> tuple[str, ...]:
        """The pair encodings a cell of ``name`` (a task or a group) runs at ``frozen_layers``.

        ``("cross",)`` unless it is, or its group holds, a sentence-pair task; then ``grid.pair_encoding``,
        less ``bi`` at levels that ``grid.bi_frozen_layers`` leaves out.
        """
        group = self.group_named(name)
        tasks = group.tasks if group is not None else (name,)
        if not any(self.task(task).is_pair for task in tasks):
            return (CROSS,)
        levels = self.grid.bi_frozen_layers
        return tuple(e for e in self.grid.pair_encoding if e == CROSS or levels is None or frozen_layers in levels)

    def metric_for(self, task: str) -> str:
        """The primary metric of ``task`` in this study (the spec's choice, else the task's first)."""
        return self.primary_metric.get(task, self.task(task).metrics[0])

    def task(self, name: str) -> TaskConfig:
        """The task called ``name``: one this spec defines (``[[tasks]]``) first, else a packaged one."""
        for task in self.task_definitions:
            if task.name == name:
                return task
        return get_task(name)


def load_spec(path: str | Path) -> StudySpec:
    """Read and validate a study spec file."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"The study spec must be an existing file, but {str(path)!r} is not.")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise SpecError(f"{path} is not valid TOML: {err}") from err
    return parse_spec(raw, source=str(path))


def parse_spec(raw: Mapping[str, Any], source: str = "<spec>") -> StudySpec:
    """Validate plain data (a parsed TOML document) into a :class:`StudySpec`."""
    return _parse(raw, source, stored=False)


def _parse(raw: Mapping[str, Any], source: str, stored: bool) -> StudySpec:
    """``stored``: ``raw`` is a study's stored copy (:meth:`StudySpec.to_dict`), not a spec file."""
    p = _Parser(source, stored)
    p.keys(raw, "", _TOP_LEVEL_KEYS)
    version, name = _parse_identity(p, raw)
    tasks, definitions = parse_tasks(p, raw.get("tasks"), _base_folder(source))
    p.user_tasks = {task.name: task for task in definitions}
    plugins = _parse_plugins(p, raw.get("plugins", []))
    groups = parse_groups(p, raw.get("groups", []))
    model_raw = p.renamed(p.table(raw, "model"), "strategy", "freezing", "model.")
    p.keys(model_raw, "model.", {"name", "freezing"})
    model = ModelSpec(
        name=p.string(model_raw.get("name", ModelSpec.name), "model.name"),
        freezing=p.string(model_raw.get("freezing", ModelSpec.freezing), "model.freezing"),
    )
    grid = parse_grid(p, raw, [*tasks, *(t for group in groups for t in group.tasks)])
    training = parse_training(p, p.table(raw, "training"))
    lr_search, arms = _parse_search_and_arms(p, raw, grid, groups, model, training, plugins)
    return StudySpec(
        name=name,
        tasks=tasks,
        grid=grid,
        model=model,
        training=training,
        lr_search=lr_search,
        execution=_parse_execution(p, p.table(raw, "execution")),
        primary_metric=_parse_primary_metrics(p, p.table(raw, "metrics"), tasks, groups),
        groups=groups,
        plugins=plugins,
        arms=arms,
        task_definitions=definitions,
        evaluation=parse_evaluation(p, raw, grid),
        adaptive=parse_adaptive(p, raw, grid, len(tasks) + len(groups)),
        description=p.string(raw.get("description", ""), "description"),
        version=version,
        source=source,
    )


_TOP_LEVEL_KEYS = {
    "version", "name", "description", "tasks", "model", "grid", "training", "lr_search", "metrics", "execution",
    "plugins", "groups", "arms", "adaptive", "evaluation",
}  # fmt: skip


def _base_folder(source: str) -> Path:
    """The folder a spec's relative task files and data paths are read from: the spec file's (``source`` names a
    file), else the current one (a spec given as data, ``<spec>``)."""
    path = Path(source)
    return path.resolve().parent if path.suffix else Path.cwd()


def _parse_identity(p: _Parser, raw: Mapping[str, Any]) -> tuple[int, str]:
    """``version`` and ``name``: what the study is, checked before anything that depends on it."""
    version = p.integer(raw.get("version", SPEC_VERSION), "version", low=1)
    if version > SPEC_VERSION:
        raise SpecError(
            f"`version` must be <= {SPEC_VERSION} for this freezestats, but got version={version} ({p.source})."
        )
    name = p.string(p.required(raw, "name", ""), "name")
    if not name.strip() or any(ch in name for ch in "/\\"):
        raise SpecError(f"`name` must be a non-empty name without slashes, but got name={name!r} ({p.source}).")
    p.required(raw, "tasks", "")
    return version, name


def _parse_search_and_arms(
    p: _Parser,
    raw: Mapping[str, Any],
    grid: GridSpec,
    groups: tuple[GroupSpec, ...],
    model: ModelSpec,
    training: TrainingSpec,
    plugins: tuple[str, ...],
) -> tuple[LRSearchSpec, tuple[ArmSpec, ...]]:
    """``[lr_search]`` and ``[[arms]]``, with the combinations of them, groups and bi cells not supported yet."""
    with_arms = "arms" in raw
    if with_arms and p.table(raw, "lr_search").get("mode", "none") != "none":
        raise p.fail("`lr_search.mode` must be 'none' with [[arms]]: each arm sets its own `learning_rate`")
    lr_search = parse_lr_search(p, p.table(raw, "lr_search"), grid)
    if groups and lr_search.mode != "none":
        raise p.fail("`groups` run at `training.learning_rate`; a learning-rate search for groups is not supported yet")
    if lr_search.mode != "none" and BI in grid.pair_encoding:
        raise p.fail(
            "`grid.pair_encoding` 'bi' cells run at `training.learning_rate`; a learning-rate search for them is "
            "not supported yet"
        )
    if groups and FULL in grid.train_sizes:
        raise p.fail("`grid.train_sizes` of a study with `groups` must be numbers (each task's subset), not 'full'")
    if not with_arms:
        return lr_search, ()
    if model.freezing != ModelSpec.freezing:
        raise p.fail("`model.freezing` must be left out with [[arms]]: set `freezing` in the freeze arm's table")
    if groups:
        raise p.fail("`groups` and [[arms]] cannot be combined yet: a task group trains the freeze arm's encoder only")
    from freezestats.spec.arm_kinds import load_plugins  # the kinds that plugins register must be known here

    load_plugins(plugins)
    return lr_search, parse_arms(p, raw["arms"], training.learning_rate)


def _parse_execution(p: _Parser, ex: Mapping[str, Any]) -> ExecutionSpec:
    """``[execution]``: retries and heartbeats (never part of what a study measures)."""
    p.keys(ex, "execution.", set(ExecutionSpec.__dataclass_fields__))
    execution = ExecutionSpec(
        max_retries=p.integer(ex.get("max_retries", 1), "execution.max_retries", low=0),
        heartbeat_interval=p.integer(ex.get("heartbeat_interval", 30), "execution.heartbeat_interval", low=1),
        grace_period=p.integer(ex.get("grace_period", 120), "execution.grace_period", low=1),
    )
    if execution.grace_period <= execution.heartbeat_interval:
        raise p.fail(
            "`execution.grace_period` must be > `execution.heartbeat_interval`, but got "
            f"grace_period={execution.grace_period}, heartbeat_interval={execution.heartbeat_interval}"
        )
    return execution


def _parse_primary_metrics(
    p: _Parser, metrics_raw: Mapping[str, Any], tasks: tuple[str, ...], groups: tuple[GroupSpec, ...]
) -> dict[str, str]:
    """``[metrics] primary``: a task's metric other than its default, for a task of the study or of a group."""
    p.keys(metrics_raw, "metrics.", {"primary"})
    primary_raw = metrics_raw.get("primary", {})
    if not isinstance(primary_raw, Mapping):
        raise SpecError(f"`metrics.primary` must be a table of task = metric, but got {primary_raw!r} ({p.source}).")
    known = list(dict.fromkeys([*tasks, *(t for group in groups for t in group.tasks)]))
    primary: dict[str, str] = {}
    for task, metric in primary_raw.items():
        if task not in known:
            raise SpecError(
                f"`metrics.primary.{task}` names a task that is not in `tasks` or a group {known} ({p.source})."
            )
        primary[task] = p.choice(metric, f"metrics.primary.{task}", p.task(task).metrics)
    return primary


def _parse_plugins(p: _Parser, value: Any) -> tuple[str, ...]:
    """``plugins``: dotted module names, imported (later, in every process) by
    :func:`freezestats.spec.arm_kinds.load_plugins`."""
    if not isinstance(value, list):
        raise p.fail(f"`plugins` must be a list of module names, but got plugins={value!r}")
    modules = tuple(p.string(v, f"plugins[{i}]") for i, v in enumerate(value))
    for i, module in enumerate(modules):
        if not all(part.isidentifier() for part in module.split(".")):
            raise p.fail(f"`plugins[{i}]` must be a dotted module name like 'my_arms.probe', but got {module!r}")
    p.unique(modules, "plugins")
    return modules


def check_against(
    spec: StudySpec,
    n_layers: int,
    pool_sizes: Mapping[str, int],
    classes: Mapping[str, int] | None = None,
    pool_notes: Mapping[str, str] | None = None,
) -> None:
    """Checks that need the model (its number of layers L) and the data (each task's train pool size).

    ``classes``: a user classification task's number of classes, so that a train size too small for a stratified
    subset to hold each class is refused; ``pool_notes``: how a pool came about (a carve), said with its size.
    """
    for i, k in enumerate(spec.grid.frozen_layers):
        if not -1 <= k <= n_layers:
            raise SpecError(
                f"`grid.frozen_layers` must lie in -1..{n_layers} for model '{spec.model.name}' "
                f"(L={n_layers}), but got frozen_layers={k} (grid.frozen_layers[{i}], {spec.source})."
            )
    for task in spec.all_tasks:
        pool, n_classes = pool_sizes[task], (classes or {}).get(task, 0)
        note = (pool_notes or {}).get(task, "")
        for i, size in enumerate(spec.grid.train_sizes):
            if size != FULL and size > pool:
                raise SpecError(
                    f"`grid.train_sizes` must be <= the train pool of '{task}' ({pool} examples{note}), but got "
                    f"train_size={size} (grid.train_sizes[{i}], {spec.source})."
                )
            if size != FULL and size < n_classes:
                raise SpecError(
                    f"`grid.train_sizes` must be >= the {n_classes} classes of '{task}', so that a stratified subset "
                    f"holds every class, but got train_size={size} (grid.train_sizes[{i}], {spec.source})."
                )

"""Arms: the ways of adapting a pretrained encoder that a study compares, one module per arm.

``freeze`` (:class:`FreezeArm`) is the arm of a single-arm study; a spec's ``[[arms]]`` tables add
``reinit`` (:class:`ReinitArm`), ``lora`` (:class:`LoraArm`) and ``probe`` (:class:`ProbeArm`), or any
registered arm. To add an arm:

1. subclass :class:`Arm` in a module of its own: ``level_axis`` (the ``[[arms]]`` key of its levels),
   ``option_defaults`` and ``check_option``/``check_level`` (what its table may hold), ``from_spec``,
   ``valid_levels``, ``prepare_model`` (and ``run`` only if the shared training loop does not fit);
2. decorate it with ``@register_arm("name")``;
3. make it reach every process: import it from ``freezestats/arms/__init__.py`` (an arm of this package),
   or list its module in the spec's ``plugins``, or declare a ``freezestats.arms`` entry point.

Nothing here imports torch: the registry answers without it, and an arm loads torch only to build a model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from freezestats.arms._base import Arm
from freezestats.arms._freeze import FreezeArm
from freezestats.arms._lora import LoraArm
from freezestats.arms._probe import ProbeArm
from freezestats.arms._registry import available_arms, get_arm, register_arm
from freezestats.arms._reinit import ReinitArm
from freezestats.spec.arm_kinds import ENTRY_POINT_GROUP, load_plugins

if TYPE_CHECKING:
    from freezestats.spec.study import StudySpec

__all__ = [
    "ENTRY_POINT_GROUP",
    "Arm",
    "FreezeArm",
    "LoraArm",
    "ProbeArm",
    "ReinitArm",
    "arm_for_spec",
    "arms_for_spec",
    "available_arms",
    "get_arm",
    "load_plugins",
    "register_arm",
]


def arms_for_spec(spec: StudySpec) -> dict[str | None, Arm]:
    """The arm of every variant a study runs, by the name its cells carry (``None``: a single-arm study).

    A single-arm spec (no ``[[arms]]``) has the one arm of :func:`arm_for_spec`, and its cells no arm name,
    so that their keys are those of studies made before arms existed.
    """
    if not spec.has_arms:
        return {None: arm_for_spec(spec)}
    load_plugins(spec.plugins)
    return {variant.name: get_arm(variant.kind).from_options(variant.options) for variant in spec.arm_variants()}


def arm_for_spec(spec: StudySpec) -> Arm:
    """The arm of a single-arm study, with its options: its ``plugins`` imported first, then ``freeze`` built.

    Its ``[model] freezing`` may come from a plugin, which is why the plugins are imported before the arm is
    built. A spec with ``[[arms]]`` has several: :func:`arms_for_spec`.
    """
    load_plugins(spec.plugins)
    return get_arm(FreezeArm.name).from_spec(spec)

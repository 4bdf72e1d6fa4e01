"""The study spec (stage 2): one module per table of a spec file, and the :class:`StudySpec` that holds them.

``study`` parses a whole spec (``[model]``, ``[execution]`` and the order of the tables); ``tasks`` (packaged names
and the user's own ``[[tasks]]``), ``grid``, ``training``, ``arms``, ``search``, ``groups`` and ``pairs`` each validate
one table; ``arm_kinds`` declares what each arm kind's ``[[arms]]`` table may hold, so that the spec validates it
without importing any training code; ``init`` writes a spec for a user's data (``freezestats init``).
"""

from freezestats.spec.arms import ArmSpec, ArmVariant
from freezestats.spec.grid import GridSpec
from freezestats.spec.groups import GroupSpec
from freezestats.spec.search import LRSearchSpec
from freezestats.spec.study import (
    SPEC_VERSION,
    ExecutionSpec,
    ModelSpec,
    StudySpec,
    check_against,
    load_spec,
    parse_spec,
)
from freezestats.spec.training import TrainingSpec

__all__ = [
    "SPEC_VERSION",
    "ArmSpec",
    "ArmVariant",
    "ExecutionSpec",
    "GridSpec",
    "GroupSpec",
    "LRSearchSpec",
    "ModelSpec",
    "StudySpec",
    "TrainingSpec",
    "check_against",
    "load_spec",
    "parse_spec",
]

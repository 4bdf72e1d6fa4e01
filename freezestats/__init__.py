"""freezestats: how many layers of a pretrained transformer should you freeze, given your data?

The data flow is the module layout: ``spec`` (study spec) -> ``cells`` (the grid) -> ``trials`` (one
Optuna trial per cell; ``training`` fine-tunes it) -> ``results`` (the tidy table). torch and
transformers are imported only where training needs them, so validation, export and the statistics work
without loading them.
"""

from __future__ import annotations

__version__ = "0.1.0"

from freezestats.exceptions import (
    DataError,
    FreezestatsError,
    ModelError,
    ModelFitError,
    SpecError,
    StorageError,
    TrialFailed,
)
from freezestats.spec.study import StudySpec, load_spec, parse_spec

__all__ = [
    "DataError",
    "FreezestatsError",
    "ModelError",
    "ModelFitError",
    "SpecError",
    "StorageError",
    "StudySpec",
    "TrialFailed",
    "__version__",
    "load_spec",
    "parse_spec",
]


def __dir__() -> list[str]:
    """Only the public surface (submodules stay importable, but are not advertised)."""
    return list(__all__)

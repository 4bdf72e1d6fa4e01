"""Load a script that is not part of the package (an example's findings.py, a bench, a data generator) as a
module, so its tests call the very functions that wrote the committed files instead of a copy of them."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def load_script(path: Path) -> ModuleType:
    """The module defined by the Python file at ``path``, executed once per call (named after the file)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

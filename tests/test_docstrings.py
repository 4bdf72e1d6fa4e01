"""Every example in a docstring runs and prints what it shows (``doctest``): an example that is wrong misleads
the reader who copies it."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "freezestats"


def _modules_with_examples() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ">>>" in path.read_text() and path.name != "__main__.py":
            parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_some_module_has_examples() -> None:
    assert len(_modules_with_examples()) >= 3


@pytest.mark.parametrize("name", _modules_with_examples())
def test_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 0, f"{name}: every example is skipped"
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples fail (run doctest -v on it)"

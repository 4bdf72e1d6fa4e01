"""Locate files that ship with freezestats: the study specs, the demo data set, the reference figures.

They live at the top of the source tree (`study/`, `data/`) so that a reader finds them there; a wheel
carries copies under `freezestats/_bundled/`. Looking in both places keeps `freezestats run` working
from a source checkout, an editable install and a regular install alike.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["bundled_path"]

_PACKAGE_DIR = Path(__file__).resolve().parent.parent  # the package folder (this is freezestats/tasks/)


def bundled_path(relative: str) -> Path:
    """Path of a shipped file or folder, e.g. ``bundled_path("study/quick.toml")``.

    Raises FileNotFoundError naming both places searched, because a missing bundled file means a
    broken installation, not a user error.
    """
    candidates = [_PACKAGE_DIR / "_bundled" / relative, _PACKAGE_DIR.parent / relative]
    for candidate in candidates:
        if candidate.exists():
            return candidate
    searched = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(f"freezestats ships '{relative}', but it is missing (searched: {searched}).")

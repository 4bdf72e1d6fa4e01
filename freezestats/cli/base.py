"""What every ``freezestats`` command shares: the command base class and the study and storage arguments.

Kept apart from :mod:`freezestats.cli.main` so that the modules holding groups of commands (such as
:mod:`freezestats.cli.analysis`) can subclass :class:`_Command` and reuse the shared arguments without
importing :mod:`freezestats.cli.main`, which imports them to build its table of commands (a cycle otherwise).
Like the rest of the command line it imports nothing heavy at module level, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from freezestats.exceptions import SpecError

__all__ = ["_Command", "_resolve_study", "_storage_arg"]

_DEFAULT_STUDY = "quick"


def _resolve_study(value: str | None) -> Path:
    """A spec path, or the name of a shipped study (``quick``, ``blog2020``, ``blog2020-minilm``, ``lee2019``)."""
    from freezestats.tasks.bundled import bundled_path

    value = value or _DEFAULT_STUDY
    path = Path(value)
    if path.is_file():
        return path
    if path.suffix == "" and "/" not in value:
        try:
            return bundled_path(f"study/{value}.toml")
        except FileNotFoundError:
            pass
    shipped = sorted(p.stem for p in bundled_path("study").glob("*.toml"))
    raise SpecError(f"No study spec at {value!r}: give a .toml file or a shipped study ({', '.join(shipped)}).")


def _storage_arg(parser: argparse.ArgumentParser, study_name: bool = False) -> None:
    from freezestats.study.storage import DEFAULT_STORAGE

    parser.add_argument("--storage", default=DEFAULT_STORAGE, help=f"Optuna storage URL (default {DEFAULT_STORAGE})")
    if study_name:
        parser.add_argument("--study-name", help="needed when the storage holds several studies")


class _Command:
    name = ""
    help = ""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        raise NotImplementedError

    def take_action(self, args: argparse.Namespace) -> int:
        raise NotImplementedError

"""The ``freezestats`` command line: a table of commands, each a thin wrapper over one library call.

To add a command, subclass :class:`_Command` (from :mod:`freezestats.cli.base`) in the module of its group and add
it to ``_COMMANDS``: the study commands live in :mod:`freezestats.cli.study`, ``analyze`` and ``report`` in
:mod:`freezestats.cli.analysis`. Every deliberate error
(:class:`~freezestats.exceptions.FreezestatsError`) is printed as one line and exits with status 2, and a
renamed name still in use (:class:`~freezestats.exceptions.RenamedWarning`) and flawed data
(:class:`~freezestats.exceptions.DataWarning`) as one line that goes on;
Ctrl-C during ``run`` exits with 130 after the interrupted trial is recorded, so a re-run resumes.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

from freezestats import __version__
from freezestats.cli.analysis import _Analyze, _Report
from freezestats.cli.base import _Command
from freezestats.cli.plan import _Plan
from freezestats.cli.study import _Export, _Init, _Run, _Status, _Validate, _Worker
from freezestats.exceptions import DataWarning, FreezestatsError, RenamedWarning

__all__ = ["main"]


_COMMANDS: tuple[_Command, ...] = (
    _Init(),
    _Validate(),
    _Run(),
    _Worker(),
    _Status(),
    _Export(),
    _Analyze(),
    _Plan(),
    _Report(),
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="freezestats",
        description="How many layers of a pretrained transformer should you freeze? Measured, with error bars.",
    )
    parser.add_argument("--version", action="version", version=f"freezestats {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in _COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.help)
        command.add_arguments(p)
        p.set_defaults(_command=command)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    parser = _parser()
    args = parser.parse_args(argv)
    command: Any = getattr(args, "_command", None)
    if command is None:
        parser.print_help()
        return 2
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line(command.name, warnings.showwarning)
            return command.take_action(args)
    except FreezestatsError as err:
        print(f"freezestats {command.name}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130


def _one_line(command: str, show: Callable[..., None]) -> Callable[..., None]:
    """``warnings.showwarning`` that prints a :class:`RenamedWarning` (a note) and a :class:`DataWarning` (a warning)
    as one line each (no source line), others as before."""

    def showwarning(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        if issubclass(category, RenamedWarning):
            print(f"freezestats {command}: note: {message}", file=sys.stderr)
        elif issubclass(category, DataWarning):
            print(f"freezestats {command}: warning: {message}", file=sys.stderr)
        else:
            show(message, category, *args, **kwargs)

    return showwarning


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

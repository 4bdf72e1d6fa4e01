"""Modules stay under ~400 lines, functions under 80 code lines and 8 parameters, unless ARCHITECTURE.md lists them.

The exceptions are read from ARCHITECTURE.md's section "Exceptions to the size rules" (entries in backticks,
``path`` for a module, ``path:function`` for a function), so the document that names an exception and gives its
reason is the one list: a new long module or function fails here until it is split or listed there.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE_LINES, FUNCTION_LINES, PARAMETERS = 400, 80, 8


def listed_exceptions() -> set[str]:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    section = text.split("## Exceptions to the size rules", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`(freezestats/[\w/]+\.py(?::[\w.]+)?)`", section))


def _code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of a function's body after its docstring."""
    body = node.body
    first = body[0]
    docstring = isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str)
    start = (body[1].lineno if len(body) > 1 else first.end_lineno) if docstring else first.lineno
    return (node.end_lineno or start) - start + 1


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = node.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.arg not in ("self", "cls")]
    return len(names) + bool(args.vararg) + bool(args.kwarg)


def oversized() -> dict[str, str]:
    """Every module and function over a limit: ``path`` or ``path:qualname`` -> what is over."""
    found = {}
    for path in sorted((ROOT / "freezestats").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        if len(text.splitlines()) > MODULE_LINES:
            found[rel] = f"{len(text.splitlines())} lines"
        for node in ast.walk(ast.parse(text)):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    owner = f"{node.name}." if isinstance(node, ast.ClassDef) else ""
                    key = f"{rel}:{owner}{child.name}"
                    if _code_lines(child) > FUNCTION_LINES:
                        found[key] = f"{_code_lines(child)} code lines"
                    if _parameters(child) > PARAMETERS:
                        found[key] = f"{_parameters(child)} parameters"
    return found


def test_every_oversized_module_and_function_is_listed_in_architecture_md() -> None:
    unlisted = {k: v for k, v in oversized().items() if k not in listed_exceptions()}
    assert not unlisted, "split these or list them (with the reason) in ARCHITECTURE.md: " + "; ".join(
        f"{k} ({v})" for k, v in sorted(unlisted.items())
    )


def test_every_listed_exception_still_exists() -> None:
    """An exception that was split is taken off the list, so the list stays the truth."""
    stale = listed_exceptions() - set(oversized())
    assert not stale, f"no longer over a limit, remove from ARCHITECTURE.md: {sorted(stale)}"

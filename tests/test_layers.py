"""The package's stages import one way: a module may import its own stage or a stage below it, never above.

Read with ``ast`` from the source, so that imports inside functions and under ``TYPE_CHECKING`` count too: an
import that runs only when a function is called is still a dependency of that function's module. The order is
the one ``ARCHITECTURE.md`` states; this test fails on an import against it and on any cycle between modules.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "freezestats"

ORDER = (
    "exceptions",
    "tasks",
    "spec",
    "study",
    "encoder",
    "training",
    "arms",
    "results",
    "runner",
    "stats",
    "analysis",
    "report",
    "cli",
)
"""The stages, lowest first (ARCHITECTURE.md)."""

ROOT_FILES = {"__init__.py", "__main__.py", "exceptions.py"}
"""What may sit at the package root besides the stage folders."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module ``name`` refers to (``a.b.c`` may be the name ``c`` in module ``a.b``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """Module -> the freezestats modules it imports, anywhere in its body."""
    modules = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("freezestats"):
                targets = [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("freezestats")]
            else:
                continue
            for target in targets:
                resolved = _resolve(target, modules)
                if resolved and resolved != module:
                    graph[module].add(resolved)
        graph.setdefault(module, set())
    return dict(graph)


def stage(module: str) -> str | None:
    """The stage a module belongs to; None for the package root's ``__init__`` and ``__main__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] != "__main__" else None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports of a stage above the importer's (the root ``__init__`` and ``__main__`` are the public entry,
    above every stage; a module's import of the root package itself reads only ``__version__``)."""
    bad = []
    for module, targets in sorted(graph.items()):
        own = stage(module)
        if own is None:
            continue
        for target in sorted(targets):
            theirs = stage(target)
            if theirs is not None and ORDER.index(theirs) > ORDER.index(own):
                bad.append(f"{module} -> {target} ({own} imports {theirs})")
    return bad


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each a cycle to break."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _package_init_edges(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph without the edges into the root package ``freezestats`` (its ``__init__`` re-exports the public
    surface: a module that reads ``freezestats.__version__`` does not depend on the spec it re-exports)."""
    return {m: {t for t in ts if t != "freezestats"} for m, ts in graph.items()}


def test_the_root_holds_only_the_entry_points_and_the_stage_folders() -> None:
    files = {p.name for p in PACKAGE.iterdir() if p.is_file() and p.suffix == ".py"}
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert files == ROOT_FILES
    assert folders == set(ORDER) - {"exceptions"}


def test_no_import_runs_against_the_stage_order() -> None:
    bad = upward_imports(import_graph())
    assert not bad, f"{len(bad)} import(s) against the order {' -> '.join(ORDER)}:\n" + "\n".join(bad)


def test_no_import_cycle() -> None:
    found = cycles(_package_init_edges(import_graph()))
    assert not found, f"{len(found)} cycle(s):\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_checks_see_what_they_look_for() -> None:
    """The checks themselves, on a made-up graph: an upward import and a cycle are both found."""
    graph = {
        "freezestats.tasks.data": {"freezestats.report.text"},
        "freezestats.report.text": {"freezestats.tasks.data"},
        "freezestats.cli.main": {"freezestats.tasks.data"},
    }
    assert upward_imports(graph) == ["freezestats.tasks.data -> freezestats.report.text (tasks imports report)"]
    assert cycles(graph) == [["freezestats.report.text", "freezestats.tasks.data"]]

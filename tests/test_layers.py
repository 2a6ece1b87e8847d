"""The package's rooms import each other one way: no import circle, and no arrow up from the
store to auth, the gateway or the commands (docs/architecture.md draws them).

Every import counts, at module level or inside a function: a late import hides a circle
without removing it. Only imports under ``if TYPE_CHECKING:`` are left out, since they never
run."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "blackboard_mcp"

# What a part may not import. The settings become objects in one module, _composition, which
# `serve` and the commands use and which no part below it imports back.
FORBIDDEN = {
    "store": {"gateway", "auth", "_cli", "serve", "settings", "_composition"},
    "auth": {"gateway", "store", "_cli", "serve", "settings", "_composition"},
    "gateway": {"_cli", "serve", "_composition"},
    "errors": {"gateway", "auth", "store", "_cli", "serve", "settings", "audit", "_composition"},
    "audit": {"gateway", "auth", "store", "_cli", "serve", "settings", "errors", "_composition"},
}

# The store's subpackages, lowest first: each imports only those before it (and the store's
# error root, store/_errors.py); the Board facade (store/_board.py) stands above them all.
STORE_ORDER = [
    "embedded",
    "connection",
    "access",
    "notes",
    "sources",
    "requests",
    "reads",
    "search",
    "lifecycle",
]


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _statements(nodes: list[ast.stmt]) -> Iterator[ast.AST]:
    """Every node below ``nodes``, functions' bodies included, TYPE_CHECKING blocks left out."""
    for node in nodes:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _statements(node.orelse)
            continue
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                yield from _statements([child])
            else:
                yield child


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project's modules ``module`` imports, wherever in it the import is."""
    out = set()
    for node in _statements(ast.parse(path.read_text()).body):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                package = base if path.name == "__init__.py" else base[:-1]
                package = package[: len(package) - (node.level - 1)]
                target = ".".join(package + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                name = f"{target}.{alias.name}"
                out.add(name if name in modules else target)
    return {m for m in out if m in modules and m != module}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: _imports(m, p, modules) for m, p in modules.items()}


def _part(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def _store_subpackage(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "store" and parts[2] in STORE_ORDER:
        return parts[2]
    return None


def test_the_graph_sees_imports_inside_functions_and_skips_type_checking_blocks(
    tmp_path: Path,
) -> None:
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from blackboard_mcp import errors\n"
        "def late() -> None:\n"
        "    if True:\n"
        "        from blackboard_mcp import settings\n"
    )
    modules = _modules()
    assert _imports("probe", source, modules) == {"blackboard_mcp.settings"}


def test_no_module_imports_a_module_that_imports_it_back_at_any_distance() -> None:
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    assert circles == []


def test_each_part_imports_only_the_parts_below_it() -> None:
    upward = sorted(
        (module, imported)
        for module, imports in _graph().items()
        for imported in imports
        if _part(imported) in FORBIDDEN.get(_part(module), set())
    )
    assert upward == []


def test_settings_import_nothing_of_the_package() -> None:
    assert _graph()["blackboard_mcp.settings"] == set()


def test_each_store_subpackage_imports_only_those_below_it() -> None:
    subpackages = {
        path.name
        for path in (PACKAGE / "store").iterdir()
        if path.is_dir() and (path / "__init__.py").exists()
    }
    assert sorted(STORE_ORDER) == sorted(subpackages)
    upward = sorted(
        (module, imported)
        for module, imports in _graph().items()
        for imported in imports
        if (low := _store_subpackage(module)) is not None
        and (high := _store_subpackage(imported)) is not None
        and STORE_ORDER.index(high) > STORE_ORDER.index(low)
    )
    assert upward == []

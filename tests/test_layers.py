"""The package's rooms import each other one way: no import circle, and no arrow up from the
store to auth, the gateway or the commands (docs/architecture.md draws them)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "blackboard_mcp"

# What a part may not import at module level (a function may import what it needs late,
# as settings.board_limits does the store's BoardLimits).
FORBIDDEN = {
    "store": {"gateway", "auth", "_cli", "serve", "settings"},
    "auth": {"gateway", "store", "_cli", "serve"},
    "gateway": {"_cli", "serve"},
    "errors": {"gateway", "auth", "store", "_cli", "serve", "settings", "audit"},
    "audit": {"gateway", "auth", "store", "_cli", "serve", "settings", "errors"},
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project's modules ``module`` imports when it is loaded (not inside functions)."""
    out = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
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

"""The package's import graph, read from the source with ``ast`` (nothing is imported).

Every ``import`` and ``from ... import`` of a ``torchscan_lsp`` module counts, wherever it stands:
at module level, inside a function (a lazy import), or under ``if TYPE_CHECKING:``. An edge goes to
the module named, or to the submodule a ``from package import name`` names; importing a module
does not count as importing its package's ``__init__``.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "torchscan_lsp"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE


def module_files() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    modules = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _absolute(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (getattr(test, "id", None) == "TYPE_CHECKING"
                                         or getattr(test, "attr", None) == "TYPE_CHECKING")


def _walk(tree: ast.AST):
    """Every node with ``eager``: whether the statement runs when the module is imported (not
    inside a function, not under ``if TYPE_CHECKING:``)."""
    stack = [(tree, True)]
    while stack:
        node, eager = stack.pop()
        yield node, eager
        lazy_below = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) or _type_checking(node)
        stack.extend((child, eager and not lazy_below) for child in ast.iter_child_nodes(node))


def imports_of(module: str, path: Path, known: set[str]) -> dict[str, set[str]]:
    """What ``module`` imports: ``internal`` (package modules, any import), ``eager`` (those
    imported when the module itself is), ``external`` (top-level names of other packages:
    ``torch``, ``pygls``...) and ``external_eager``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: dict[str, set[str]] = {"internal": set(), "eager": set(), "external": set(), "external_eager": set()}
    is_package = path.name == "__init__.py"

    def add(name: str, eager: bool) -> None:
        if name == PACKAGE or name.startswith(PACKAGE + "."):
            while name not in known and "." in name:
                name = name.rsplit(".", 1)[0]
            if name != module:
                found["internal"].add(name)
                if eager:
                    found["eager"].add(name)
        elif name:
            found["external"].add(name.split(".")[0])
            if eager:
                found["external_eager"].add(name.split(".")[0])

    for node, eager in _walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, eager)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node, is_package)
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                add(candidate if candidate in known else base, eager)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                add(node.args[0].value, eager)
    return found


def graph() -> dict[str, dict[str, set[str]]]:
    """Every module's imports (see :func:`imports_of`)."""
    files = module_files()
    known = set(files)
    return {name: imports_of(name, path, known) for name, path in files.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
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
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found

"""The layers of docs/architecture.md, checked on the import graph (read with ``ast``):

    contract (no torch)  <-  engine (torch, no editor knowledge)
    targets (ast only)   <-  worker (runs user code)  <-  session (no pygls, no torch)  <-  server (pygls)
    cli: over the session (and the engine's table, and the server's builders for ``check``)

No cycle anywhere, lazy and ``TYPE_CHECKING`` imports included; no arrow the layers forbid.
"""

import sys

import pytest

import import_graph

GRAPH = import_graph.graph()


def layer(module: str) -> str:
    """``torchscan_lsp.engine.formulas.conv`` -> ``engine``; the package itself -> ``(top)``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(top)"


#: The layers each layer may import (besides itself).
ALLOWED = {
    "contract": set(),
    "version": set(),
    "__main__": {"cli"},
    "(top)": {"contract", "targets", "engine", "version"},
    "engine": {"contract", "version"},
    "targets": {"contract", "version"},
    "worker": {"contract", "engine", "targets", "version", "(top)"},
    "session": {"contract", "targets", "worker", "version"},
    "server": {"contract", "session", "version"},
    "cli": {"contract", "engine", "session", "server", "version"},
}

#: Other packages a layer must never import: the contract, the source reader and the session use
#: the standard library alone; the server process never imports torch; the engine knows no editor.
EDITOR = {"pygls", "lsprotocol", "watchdog"}
FORBIDDEN_EXTERNAL = {
    "engine": EDITOR,
    "worker": EDITOR,
    "server": {"torch"},
}
STANDARD_LIBRARY_ONLY = {"contract", "targets", "session", "version"}


def test_every_module_is_in_a_known_layer():
    assert {layer(m) for m in GRAPH} <= set(ALLOWED)


def test_no_import_cycle():
    edges = {module: imports["internal"] for module, imports in GRAPH.items()}
    assert import_graph.cycles(edges) == []


def test_the_cycle_finder_finds_one():
    assert import_graph.cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_no_forbidden_arrow(name):
    wrong = sorted(
        f"{module} -> {target}"
        for module, imports in GRAPH.items() if layer(module) == name
        for target in imports["internal"] if layer(target) not in ALLOWED[name] | {name}
    )
    assert wrong == []


@pytest.mark.parametrize("name", sorted(FORBIDDEN_EXTERNAL.keys() | STANDARD_LIBRARY_ONLY))
def test_no_forbidden_package(name):
    allowed_stdlib = set(sys.stdlib_module_names) | {"__future__"}
    wrong = []
    for module, imports in GRAPH.items():
        if layer(module) != name:
            continue
        for package in imports["external"]:
            if name in STANDARD_LIBRARY_ONLY and package not in allowed_stdlib:
                wrong.append(f"{module} imports {package}")
            elif package in FORBIDDEN_EXTERNAL.get(name, ()):
                wrong.append(f"{module} imports {package}")
    assert wrong == []


def _eager_closure(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(GRAPH[module]["eager"])
    return seen


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if layer(m) in ("server", "session")))
def test_importing_the_server_side_never_imports_torch(module):
    # what importing the module runs, module after module: none of it may import torch
    reached = _eager_closure(module)
    assert sorted(m for m in reached if "torch" in GRAPH[m]["external_eager"]) == []

"""The engine's rooms (docs/architecture.md, "The engine's rooms"), checked on the import graph.

Each room imports only the rooms drawn below it; no arrow points back up, so a reader can see where
recording ends and measuring begins:

    report, type_names             the report vocabulary (every room may import it)
    operator_formulas  <-  formulas
    recording          (the one pass: hooks, operator counter, module formulas)
    dataflow           (observes the pass: receptive field, token dependencies)
    crawler            (composes recording and dataflow into crawl_module)
    measuring          training          reporting
"""

import pytest

import import_graph

GRAPH = import_graph.graph()

VOCABULARY = {"report", "type_names"}

#: The rooms each room of the engine may import (besides itself and the vocabulary).
ROOMS = {
    "operator_formulas": set(),
    "formulas": {"operator_formulas"},
    "recording": {"formulas", "operator_formulas"},
    "dataflow": {"recording", "operator_formulas"},
    "crawler": {"recording", "dataflow"},
    "measuring": {"recording", "crawler"},
    "training": {"recording", "measuring"},
    "reporting": {"crawler"},
    "report": set(),
    "type_names": set(),
    "(engine)": {"crawler", "recording", "measuring", "training", "reporting"},
}


def room(module: str) -> str | None:
    """``torchscan_lsp.engine.recording.recorder`` -> ``recording``; the package itself -> ``(engine)``."""
    parts = module.split(".")
    if len(parts) < 2 or parts[1] != "engine":
        return None
    return parts[2] if len(parts) > 2 else "(engine)"


def test_every_engine_module_is_in_a_room():
    assert {room(m) for m in GRAPH} - {None} <= set(ROOMS)


def backward_arrows(graph: dict, name: str) -> list[str]:
    """The imports of room ``name`` that point at a room it may not import."""
    return sorted(
        f"{module} -> {target}"
        for module, imports in graph.items() if room(module) == name
        for target in imports["internal"]
        if room(target) not in ROOMS[name] | VOCABULARY | {name, None}
    )


@pytest.mark.parametrize("name", sorted(ROOMS))
def test_no_arrow_points_back(name):
    assert backward_arrows(GRAPH, name) == []


def test_a_backward_arrow_is_found():
    fake = {
        "torchscan_lsp.engine.recording.recorder": {"internal": {"torchscan_lsp.engine.dataflow.tracker",
                                                                 "torchscan_lsp.engine.report"}},
        "torchscan_lsp.engine.dataflow.tracker": {"internal": {"torchscan_lsp.engine.recording.recorder"}},
    }
    assert backward_arrows(fake, "recording") == [
        "torchscan_lsp.engine.recording.recorder -> torchscan_lsp.engine.dataflow.tracker"]
    assert backward_arrows(fake, "dataflow") == []

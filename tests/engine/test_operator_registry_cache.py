"""The operator formula registry is built once per process: a caller's mapping still wins, each
counter gets its own copy, and a formula registered later (or a changed default) is picked up."""

import torch
from torch.utils import flop_counter as fc

from torchscan_lsp.engine import operator_formulas
from torchscan_lsp.engine.recording import operator_table
from torchscan_lsp.engine.recording.operator_counter import OperatorCounter
from torchscan_lsp.engine.recording.operators import measure_flops

aten = torch.ops.aten


def test_base_registry_is_reused_and_copied():
    first, second = OperatorCounter(), OperatorCounter()
    assert first.registry is not second.registry
    assert first.registry.keys() == second.registry.keys()
    # the compiled formulas themselves are shared: nothing was rebuilt
    assert all(first.registry[key] is second.registry[key] for key in first.registry)


def test_custom_mapping_wins_and_does_not_leak():
    ones = torch.ones(3, 4)  # cos on 12 elements: 12 FLOPs with the default formula
    custom = measure_flops(lambda: torch.cos(ones), custom_mapping={aten.cos: lambda *a, **k: 7})
    assert custom["total"]["value"] == 7
    assert measure_flops(lambda: torch.cos(ones))["total"]["value"] == 12


def test_a_formula_registered_later_is_picked_up(monkeypatch):
    ones = torch.ones(2, 5)
    before = measure_flops(lambda: torch.cos(ones))["total"]["value"]  # 10: the default
    # as torch.utils.flop_counter.register_flop_formula would: a new entry in PyTorch's registry
    monkeypatch.setitem(fc.flop_registry, aten.cos, fc.shape_wrapper(lambda *a, out_shape=None, **k: 1000))
    monkeypatch.delitem(operator_formulas.DEFAULT_FORMULAS, aten.cos)
    assert measure_flops(lambda: torch.cos(ones))["total"]["value"] == 1000
    monkeypatch.undo()
    assert measure_flops(lambda: torch.cos(ones))["total"]["value"] == before == 10


def test_registry_matches_a_fresh_merge():
    expected = {**fc.flop_registry, **operator_table.default_mapping()}
    assert OperatorCounter().registry.keys() == expected.keys()

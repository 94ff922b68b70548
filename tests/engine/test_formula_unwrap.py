"""The compiled operator formulas read shapes once: PyTorch's formulas that call other registered
formulas (``addmm_flop`` calls ``mm_flop``) call them unwrapped, with the same counts, and PyTorch's
own functions stay as they are; a leaf module's parameters are counted by its own table, each
tensor once. Every expected count is derived by hand in the test."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils import flop_counter
from torch.utils import _pytree

from torchscan_lsp.engine.formulas._common import num_params
from torchscan_lsp.engine.recording.operator_table import flop_table

aten = torch.ops.aten


def test_matrix_products_are_counted_without_a_pytree_traversal(monkeypatch):
    table = flop_table()
    a, b, bias = torch.empty(3, 16), torch.empty(16, 8), torch.empty(8)
    batch1, batch2, base = torch.empty(2, 3, 16), torch.empty(2, 16, 8), torch.empty(2, 3, 8)

    def no_pytree(*args, **kwargs):
        raise AssertionError("a compiled formula walked a pytree")

    monkeypatch.setattr(_pytree, "tree_map", no_pytree)
    monkeypatch.setattr(flop_counter, "tree_map", no_pytree)
    # addmm (3 x 16)(16 x 8): 2 * M * N * K = 2 * 3 * 8 * 16 = 768; the bias add folded in
    assert table[aten.addmm]((bias, a, b), {}, torch.empty(3, 8)) == 768
    # baddbmm, 2 products (3 x 16)(16 x 8): 2 * B * M * N * K = 2 * 2 * 3 * 8 * 16 = 1536
    assert table[aten.baddbmm]((base, batch1, batch2), {}, torch.empty(2, 3, 8)) == 1536


def test_pytorchs_own_formulas_are_left_as_they_are():
    # the counter's table holds copies; PyTorch's addmm formula still calls its wrapped mm formula
    assert flop_counter.addmm_flop.__wrapped__.__globals__["mm_flop"] is flop_counter.mm_flop
    assert hasattr(flop_counter.mm_flop, "__wrapped__")


def test_a_leaf_counts_a_parameter_registered_under_two_names_once():
    linear = nn.Linear(4, 3)  # 4 * 3 weights + 3 biases = 15
    assert num_params(linear) == 15
    linear.register_parameter("alias", linear.weight)  # the same 12-element tensor again
    assert num_params(linear) == 15
    linear.register_parameter("extra", nn.Parameter(torch.zeros(5)))
    assert num_params(linear) == 20
    assert num_params(nn.Sequential(linear, nn.Linear(3, 2))) == 20 + 3 * 2 + 2  # a container, recursively

"""A subclass of a torch layer that writes its own ``forward`` is not counted by that layer's formula.

loralib's ``Linear`` (microsoft/LoRA) subclasses ``nn.Linear`` and adds a low-rank product in its own
``forward``: the Linear formula counts the base product only, so the module formulas must say they
missed work (partial, and ``strict=True`` raises) while the operators count all of it.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchscan_lsp import IncompleteAnalysisError, crawl_module
from torchscan_lsp.engine.formulas import family_of


class LoRALinear(nn.Linear):
    """loralib's pattern: the frozen product plus ``x A^T B^T``, scaled."""

    def __init__(self, features_in: int, features_out: int, rank: int = 4) -> None:
        nn.Linear.__init__(self, features_in, features_out)
        self.lora_A = nn.Parameter(torch.zeros(rank, features_in))
        self.lora_B = nn.Parameter(torch.zeros(features_out, rank))

    def forward(self, x):
        result = F.linear(x, self.weight, bias=self.bias)
        result += (x @ self.lora_A.T @ self.lora_B.T) * 2.0
        return result


class RenamedLinear(nn.Linear):
    """A subclass that keeps ``nn.Linear.forward``: the Linear formula still describes it."""


def test_a_subclass_that_keeps_the_torch_forward_keeps_its_formula():
    assert family_of(RenamedLinear(4, 3)) is family_of(nn.Linear(4, 3)) is not None
    assert family_of(LoRALinear(4, 3)) is None


def test_work_in_an_overridden_forward_makes_the_module_formulas_partial():
    # rows 16, 64 -> 64 then 64 -> 10, rank 4: base products 16*64*64 + 16*64*10 = 75,776 MACs;
    # low-rank products (x A^T then (.) B^T) 16*64*4 + 16*4*64 + 16*64*4 + 16*4*10 = 12,928 MACs
    model = nn.Sequential(LoRALinear(64, 64), nn.ReLU(), LoRALinear(64, 10))
    report = crawl_module(model, (16, 64))
    totals = report["totals"]
    assert totals["operator_macs"]["status"] == "complete"
    assert totals["operator_macs"]["value"] == 75_776 + 12_928
    assert totals["macs"]["status"] == "partial"
    messages = [d["message"] for d in report["diagnostics"]]
    assert any("LoRALinear" in m and "replaces Linear's" in m for m in messages), messages


def test_strict_true_raises_on_an_overridden_forward():
    # tanh(super().forward(x)) * 2 on (8, 4) -> (8, 4): the Linear formula's 8*4*4 = 128 MACs are
    # only the product; the tanh and the scaling are not in it
    class Squashed(nn.Linear):
        def forward(self, x):
            return torch.tanh(super().forward(x)) * 2

    with pytest.raises(IncompleteAnalysisError, match="macs partial"):
        crawl_module(Squashed(4, 4), (8, 4), strict=True)
    crawl_module(RenamedLinear(4, 4), (8, 4), strict=True)  # complete: nothing raised

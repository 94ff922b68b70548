"""``nn.Bilinear``: its module formulas and its operator, ``aten._trilinear``, counted by hand.

``Bilinear(3, 5, 7)`` on one row (``a = 3``, ``b = 5``, ``o = 7``, ``T = 1``), computed as PyTorch's
kernel does it: ``x1ᵀ W_k`` is 5 dot products of length 3 (15 MACs, 5·5 = 25 FLOPs), then a dot
product with ``x2`` of length 5 (5 MACs, 9 FLOPs), then the bias (1 FLOP), for each of 7 outputs:
MACs 7·(15 + 5) = 140; module FLOPs 7·(25 + 9 + 1) = 245; operator FLOPs 2·140 (PyTorch's 2 per
MAC) + 7 (the bias add) = 287; DMAs x1 3 + x2 5 + parameters 7·3·5 + 7 = 112 + output 7 = 127.
"""

import torch
from torch import nn

from torchscan_lsp import crawl_module


class TwoHalves(nn.Module):
    """One (8,) input split into the two inputs of a Bilinear(3, 5, 7)."""

    def __init__(self) -> None:
        super().__init__()
        self.mix = nn.Bilinear(3, 5, 7)

    def forward(self, x):
        return self.mix(x[..., :3], x[..., 3:])


def test_bilinear_is_counted_by_both_methods():
    torch.manual_seed(0)
    totals = crawl_module(TwoHalves(), (8,), strict=True)["totals"]
    assert (totals["macs"]["value"], totals["operator_macs"]["value"]) == (140, 140)
    assert (totals["module_flops"]["value"], totals["operator_flops"]["value"]) == (245, 287)
    assert totals["dmas"]["value"] == 127

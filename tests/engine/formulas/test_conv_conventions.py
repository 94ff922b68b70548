"""The FLOPs conventions of direct and transposed convolutions (docs/formulas.md), derived by counting
each product and each addition of the arithmetic itself.

Both compute, for every output element ``o``, a sum of ``c_o`` products. A direct convolution's dot
product lets the first product start the sum: ``2·c_o − 1`` FLOPs. A transposed convolution
scatters each product into an output that starts at zero: ``2·c_o``. Written in the direct
convention, the transposed convolution's FLOPs would be ``2·MACs − R``, ``R`` the outputs reached
by at least one product: the difference between the two conventions is exactly ``R``.
"""

from __future__ import annotations

import itertools

import torch
from torch import nn

from torchscan_lsp.engine.formulas import module_flops, module_macs


def _transposed_contributions(n: int, k: int, s: int, d: int) -> list[int]:
    """Products per output position of a 1-D transposed convolution (one channel pair, no padding):
    input ``i`` and tap ``j`` land on ``i·s + j·d``."""
    out = (n - 1) * s + d * (k - 1) + 1
    counts = [0] * out
    for i, j in itertools.product(range(n), range(k)):
        counts[i * s + j * d] += 1
    return counts


def _calls(module: nn.Module, x: torch.Tensor) -> tuple[int, int, torch.Tensor]:
    with torch.no_grad():
        y = module(x)
    return module_flops(module, (x,), y), module_macs(module, x, y), y


def test_transposed_convolution_counts_a_multiply_and_an_add_per_product():
    # ConvTranspose1d(2, 3, k=2, s=3) on (1, 2, 4): outputs of length (4 - 1)·3 + 2 = 11, of which 8
    # are reached (positions 2, 5 and 8 fall between the scattered kernels)
    counts = _transposed_contributions(4, 2, 3, 1)
    assert len(counts) == 11 and sum(c > 0 for c in counts) == 8
    module = nn.ConvTranspose1d(2, 3, 2, stride=3, bias=False)
    flops, macs, y = _calls(module, torch.rand(1, 2, 4))
    # every (output channel, input channel) pair makes the same products: 3·2 pairs
    pairs = 3 * 2
    assert macs == pairs * sum(counts) == 48
    assert flops == 2 * macs  # scatter convention: 2·c_o per output
    # the direct convention would be sum(2·c_o − 1) over reached outputs: 2·MACs − R, R = 3 channels·8
    direct_convention = sum(pairs * 2 * c - 3 for c in counts if c)
    assert direct_convention == 2 * macs - 3 * 8 == flops - 24


def test_transposed_convolution_bias_adds_one_per_output():
    module = nn.ConvTranspose1d(2, 3, 2, stride=3)
    flops, macs, y = _calls(module, torch.rand(1, 2, 4))
    assert flops == 2 * macs + y.numel()  # 96 + 3·11, holes included: they receive the bias


def test_direct_convolution_counts_its_dot_products():
    # Conv1d(2, 3, k=3) on (1, 2, 6): each of the 3·4 outputs is a dot product of 2·3 = 6 products:
    # 6 multiplies and 5 adds, plus the bias add
    module = nn.Conv1d(2, 3, 3)
    flops, macs, y = _calls(module, torch.rand(1, 2, 6))
    assert macs == 12 * 6
    assert flops == 12 * (2 * 6 - 1) + 12 == 2 * macs  # the bias add fills the "- 1"
    bias_free = nn.Conv1d(2, 3, 3, bias=False)
    assert _calls(bias_free, torch.rand(1, 2, 6))[0] == 2 * macs - 12  # 2·MACs − R, R = Ny


def test_the_two_conventions_differ_by_the_reached_outputs_on_a_dense_transposed_convolution():
    # stride 1: every output is reached, so R = Ny and the difference is one add per output
    module = nn.ConvTranspose2d(4, 2, 3, bias=False)
    flops, macs, y = _calls(module, torch.rand(1, 4, 5, 5))
    counts = _transposed_contributions(5, 3, 1, 1)
    assert macs == 4 * 2 * sum(counts) ** 2  # separable along the two axes: 8·25² = 5000 (Nx·Cout·K)
    assert all(counts)
    direct_convention = 2 * macs - y.numel()
    assert flops - direct_convention == y.numel() == 2 * 7 * 7

"""Convolution backward FLOPs: grouped and transposed convolutions, checked two independent ways.

PyTorch's ``conv_backward_flop`` counts the grad-weight term over every (Cin, Cout) channel pair,
ignoring groups, so grouped convolutions came out too high and marked complete. Our
``convolution_backward`` formula replaces it; here it is checked (1) against hand counts and (2)
against the same work written as ungrouped convolutions on channel slices, counted by PyTorch's own
``FlopCounterMode`` (whose formula is right without groups).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from torchscan_lsp import measure_flops
from torchscan_lsp.engine.operator_formulas import CORRECTIONS, DEFAULT_FORMULAS

BACKWARD = "aten.convolution_backward"


def _ours(module: nn.Module, x: torch.Tensor) -> int:
    """Our count of ``convolution_backward`` for one backward pass of ``module`` on ``x``."""
    x = x.clone().requires_grad_()
    y = module(x)
    return measure_flops(lambda: y.sum().backward())["by_operator"][BACKWARD]


def _pytorch_on_slices(module: nn.Module, x: torch.Tensor) -> int:
    """The same convolution as ``groups`` ungrouped ones on channel slices, each with its own input
    and weight leaves, counted by stock ``FlopCounterMode`` (no custom formulas)."""
    groups, transposed = module.groups, isinstance(module, nn.modules.conv._ConvTransposeNd)
    dims = x.dim() - 2
    conv = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d) if transposed else (F.conv1d, F.conv2d, F.conv3d)
    weight = module.weight.detach()
    in_per, w_per = x.shape[1] // groups, weight.shape[0] // groups
    outputs = []
    for g in range(groups):
        xs = x[:, g * in_per:(g + 1) * in_per].detach().clone().requires_grad_()
        ws = weight[g * w_per:(g + 1) * w_per].clone().requires_grad_()
        outputs.append(conv[dims - 1](xs, ws, None, module.stride, module.padding, *(
            (module.output_padding, 1, module.dilation) if transposed else (module.dilation,))))
    loss = sum(out.sum() for out in outputs)
    with FlopCounterMode(display=False) as counter:
        loss.backward()
    return int(counter.get_flop_counts()["Global"][torch.ops.aten.convolution_backward])


def test_our_formula_replaces_pytorchs():
    assert torch.ops.aten.convolution_backward in CORRECTIONS
    assert torch.ops.aten.convolution_backward in DEFAULT_FORMULAS


@pytest.mark.parametrize("groups, expected", [(1, 18_432), (2, 9_216), (4, 4_608)])
def test_grouped_conv2d_backward_is_twice_the_forward(groups, expected):
    # Conv2d(4, 4, 3, groups=g) on (2, 4, 6, 6): output (2, 4, 4, 4). Forward MACs =
    # B * Cout * (Cin/g) * k*k * out positions = 2 * 4 * (4/g) * 9 * 16 = 4608/g, FLOPs 9216/g.
    # Backward: grad_input and grad_weight each make one product per forward product: 2 x 9216/g
    # (PyTorch's formula: 13,824 for g=2 and 11,520 for g=4, its grad-weight term ignoring g).
    torch.manual_seed(0)
    module = nn.Conv2d(4, 4, 3, groups=groups)
    x = torch.rand(2, 4, 6, 6)
    assert _ours(module, x) == expected
    assert _pytorch_on_slices(module, x) == expected


@pytest.mark.parametrize("groups, expected", [(1, 41_472), (2, 20_736), (4, 10_368)])
def test_grouped_conv_transpose2d_backward_is_twice_the_forward(groups, expected):
    # ConvTranspose2d(4, 4, 3, groups=g) on (2, 4, 6, 6): each input position is scattered over the
    # kernel, so forward MACs = B * in positions * Cin * (Cout/g) * k*k = 2 * 36 * 4 * (4/g) * 9
    # = 10368/g, FLOPs 20736/g; backward twice that.
    torch.manual_seed(0)
    module = nn.ConvTranspose2d(4, 4, 3, groups=groups)
    x = torch.rand(2, 4, 6, 6)
    assert _ours(module, x) == expected
    assert _pytorch_on_slices(module, x) == expected


@pytest.mark.parametrize(
    "module, shape",
    [
        (nn.Conv1d(6, 9, 3, stride=2, padding=1, groups=3), (2, 6, 11)),
        (nn.Conv3d(4, 8, 2, dilation=2, groups=2), (1, 4, 5, 5, 5)),
        (nn.ConvTranspose1d(6, 4, 3, stride=2, groups=2), (2, 6, 7)),
        (nn.ConvTranspose3d(4, 6, 2, stride=2, groups=2, output_padding=1), (1, 4, 3, 3, 3)),
    ],
    ids=["conv1d", "conv3d-dilated", "conv_transpose1d", "conv_transpose3d"],
)
def test_grouped_backward_matches_channel_slices(module, shape):
    torch.manual_seed(0)
    x = torch.rand(*shape)
    assert _ours(module, x) == _pytorch_on_slices(module, x)


def test_only_the_requested_gradients_are_counted():
    # input without requires_grad: grad_input is not computed, only grad_weight (= forward FLOPs).
    # Conv2d(4, 4, 3, groups=2) on (2, 4, 6, 6): forward 9216/2 = 4608 FLOPs
    module = nn.Conv2d(4, 4, 3, groups=2)
    y = module(torch.rand(2, 4, 6, 6))
    assert measure_flops(lambda: y.sum().backward())["by_operator"][BACKWARD] == 4_608

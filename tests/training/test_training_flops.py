"""Training FLOPs by phase, per module and in total, derived by hand from the matrix products.

Convention (PyTorch's ``FlopCounterMode``): a product of an (m x k) and a (k x n) matrix is
``2 m k n`` FLOPs; a sum of ``n`` elements is ``n - 1`` additions; views, ``ones_like`` and the
expansion of the loss gradient do no arithmetic.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchscan_lsp.engine.training import estimate_training_memory, measure_training_memory


def _flops(result, *path):
    node = result["flops"]
    for key in path:
        node = node[key]
    assert node["status"] == "complete", node
    return node["value"]


def mlp():
    return nn.Sequential(nn.Linear(8, 16, bias=False), nn.Linear(16, 4, bias=False))


# batch 2: layer 0 is (2 x 8) @ (8 x 16), layer 1 is (2 x 16) @ (16 x 4)
FORWARD_0 = 2 * 2 * 8 * 16  # 512
FORWARD_1 = 2 * 2 * 16 * 4  # 256
LOSS = 2 * 4 - 1  # the sum of the (2, 4) output: 7 additions
# Backward of layer 1, whose input (layer 0's output) requires grad: the input gradient
# (2 x 4) @ (4 x 16) and the weight gradient (4 x 2) @ (2 x 16), each as many FLOPs as the forward.
BACKWARD_1 = 2 * 2 * 4 * 16 + 2 * 4 * 2 * 16  # 512 = 2 x FORWARD_1
# Backward of layer 0, whose input is data (no gradient): the weight gradient (16 x 2) @ (2 x 8) only.
BACKWARD_0 = 2 * 16 * 2 * 8  # 512 = 1 x FORWARD_0


@pytest.mark.parametrize("run", ["estimated", "measured"])
def test_linear_backward_is_twice_the_forward(run):
    options = {"train": {"optimizer": "sgd", "batch": 2}, "input_shape": (8,)}
    if run == "estimated":
        result = estimate_training_memory(mlp, **options)
    else:
        result = measure_training_memory(mlp, **options, count_flops=True)
    assert BACKWARD_1 == 2 * FORWARD_1 and BACKWARD_0 == FORWARD_0
    assert _flops(result, "by_module", "1", "forward_flops") == FORWARD_1
    assert _flops(result, "by_module", "1", "backward_flops") == BACKWARD_1
    assert _flops(result, "by_module", "0", "forward_flops") == FORWARD_0
    assert _flops(result, "by_module", "0", "backward_flops") == BACKWARD_0
    assert _flops(result, "by_module", "", "training_flops") == FORWARD_0 + FORWARD_1 + BACKWARD_0 + BACKWARD_1
    # the loss is forward work outside every module
    assert _flops(result, "totals", "forward_flops") == FORWARD_0 + FORWARD_1 + LOSS
    assert _flops(result, "totals", "backward_flops") == BACKWARD_0 + BACKWARD_1
    assert _flops(result, "totals", "training_flops") == FORWARD_0 + FORWARD_1 + LOSS + BACKWARD_0 + BACKWARD_1
    assert result["flops"]["diagnostics"] == []
    # the optimizer step is not counted: its element-wise update is outside training FLOPs
    assert set(result["flops"]["phases"]) == {"forward", "backward"}


# Conv2d(4, 4, 3, groups=g) on (2, 4, 6, 6): output (2, 4, 4, 4), each output element a dot product
# of (4 / g) x 3 x 3 terms: forward 2 x 128 x 36 / g FLOPs. Its backward (input requiring grad)
# computes the input and the weight gradients, each as many FLOPs as the forward.
@pytest.mark.parametrize(("groups", "forward", "backward"), [(2, 4608, 9216), (4, 2304, 4608)])
def test_grouped_convolution_backward(groups, forward, backward):
    def build():
        torch.manual_seed(0)
        return nn.Conv2d(4, 4, 3, groups=groups), (torch.rand(2, 4, 6, 6, requires_grad=True),)

    result = estimate_training_memory(build, train={"optimizer": "sgd"})
    assert 2 * 2 * 4 * 4 * 4 * (4 // groups) * 9 == forward and backward == 2 * forward
    assert _flops(result, "by_module", "", "forward_flops") == forward
    assert _flops(result, "by_module", "", "backward_flops") == backward


def test_uncounted_operator_makes_the_module_and_the_phase_partial():
    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            y = self.fc(x)
            return y + torch.special.zeta(y.detach() + 2, 2.0)  # no FLOP formula for zeta

    result = estimate_training_memory(Odd, train={"optimizer": "sgd"}, input_shape=(4,))
    flops = result["flops"]
    assert flops["totals"]["forward_flops"]["status"] == "partial"
    assert flops["totals"]["training_flops"]["status"] == "partial"
    assert flops["by_module"][""]["forward_flops"]["status"] == "partial"
    # the Linear ran only counted operators: (1 x 4) @ (4 x 4), 2 x 16 FLOPs (PyTorch's addmm
    # formula counts the product, not the bias addition)
    assert flops["by_module"]["fc"]["forward_flops"]["status"] == "complete"
    assert flops["by_module"]["fc"]["forward_flops"]["value"] == 32
    # zeta ran on a detached branch: the backward is complete
    assert flops["totals"]["backward_flops"]["status"] == "complete"
    codes = {(d["code"], d["metric"], d["operator"]) for d in flops["diagnostics"]}
    assert codes == {("uncounted_operator", "forward_flops", "aten.special_zeta")}

"""Activations and softmax: per-element counts from the PyTorch documentation's formulas."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from opformula_models import op_flops
from torch import nn

X = torch.randn(2, 5)  # 10 elements


@pytest.mark.parametrize(
    ("module", "op", "per_element"),
    [
        (nn.ReLU(), "aten.relu", 1),  # max(0, x)
        (nn.ReLU(inplace=True), "aten.relu_", 1),
        (nn.ReLU6(), "aten.hardtanh", 2),  # min(max(0, x), 6)
        (nn.Hardtanh(), "aten.hardtanh", 2),
        (nn.LeakyReLU(0.1), "aten.leaky_relu", 4),  # max(0,x) + s*min(0,x)
        (nn.ELU(), "aten.elu", 6),  # max(0,x) + min(0, a(exp(x)-1))
        (nn.SELU(), "aten.elu", 7),  # scale * ELU
        (nn.CELU(), "aten.celu", 7),  # max(0,x) + min(0, a(exp(x/a)-1))
        (nn.Sigmoid(), "aten.sigmoid", 4),  # 1/(1+exp(-x))
        (nn.Tanh(), "aten.tanh", 6),  # (e^x - e^-x)/(e^x + e^-x)
        (nn.SiLU(), "aten.silu", 5),  # x * sigmoid(x)
        (nn.GELU(), "aten.gelu", 5),  # x * 0.5 * (1 + erf(x / sqrt 2))
        (nn.GELU(approximate="tanh"), "aten.gelu", 13),  # pow, mul, add, mul, Tanh(6), add, mul, mul
        (nn.Mish(), "aten.mish", 10),  # x * Tanh(softplus(x)): 1 + 6 + 3
        (nn.Softplus(), "aten.softplus", 3),  # log(1 + exp(x))
        (nn.Softplus(beta=2.0), "aten.softplus", 5),  # 1/b log(1 + exp(b x))
        (nn.Hardswish(), "aten.hardswish", 5),  # x * ReLU6(x + 3) / 6
        (nn.Hardsigmoid(), "aten.hardsigmoid", 4),  # ReLU6(x + 3) / 6
        (nn.PReLU(), "aten._prelu_kernel", 4),  # as LeakyReLU
        (nn.Hardshrink(), "aten.hardshrink", 2),
        (nn.Softshrink(), "aten.softshrink", 3),
        (nn.Threshold(0.1, 0.0), "aten.threshold", 1),
        (nn.LogSigmoid(), "aten.log_sigmoid_forward", 5),
    ],
)
def test_activation_per_element(module, op, per_element):
    counted = op_flops(lambda: module(X.clone()))
    # PReLU creates nothing, ELU-family dispatch elu; everything else is one op over 10 elements
    assert counted == {op: per_element * 10}


def test_rrelu_eval_and_glu():
    # evaluation RReLU is LeakyReLU with the mean slope: 4 per element
    assert op_flops(lambda: F.rrelu(X, training=False)) == {"aten.rrelu_with_noise": 40}
    # GLU over dim 1 of (2, 4): output (2, 2) = 4 elements x (sigmoid 4 + multiply 1)
    assert op_flops(lambda: F.glu(torch.randn(2, 4), 1)) == {"aten.glu": 20}


def test_gelu_tanh_matches_its_decomposition():
    """GPT-2's hand-written gelu_new: 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))) over N elements is
    pow N + mul N + add N + mul N + tanh 6N + add N + mul N + mul N = 13N, the fused gelu count."""
    x = torch.randn(3, 4)
    manual = op_flops(lambda: 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * torch.pow(x, 3.0)))))
    assert sum(manual.values()) == 13 * 12
    assert op_flops(lambda: F.gelu(x, approximate="tanh")) == {"aten.gelu": 13 * 12}


def test_softmax_family():
    x = torch.randn(2, 3, 4)  # N = 24
    # softmax over the last dim: R = 6 rows; 3N - R = 72 - 6 = 66
    assert op_flops(lambda: x.softmax(-1)) == {"aten._softmax": 66}
    # over dim 1 (size 3): R = 8 rows; 72 - 8 = 64
    assert op_flops(lambda: F.softmax(x, dim=1)) == {"aten._softmax": 64}
    # log-softmax adds one log per element: 4N - R = 96 - 6 = 90
    assert op_flops(lambda: x.log_softmax(-1)) == {"aten._log_softmax": 90}
    # the reference's attention softmax term B*H*T*(3S - 1): B=1, H=2, T=3, S=5 -> 6 rows * 14 = 84
    scores = torch.randn(1, 2, 3, 5)
    assert op_flops(lambda: scores.softmax(-1)) == {"aten._softmax": 84}


def test_safe_softmax():
    x = torch.randn(1, 2, 3, 5)
    assert op_flops(lambda: torch.ops.aten._safe_softmax(x, -1)) == {"aten._safe_softmax": 84}

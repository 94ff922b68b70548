"""Activation and softmax formulas on small shapes; per-element costs from the table in
``activation.py``'s docstring, multiplied out by hand."""

import pytest
import torch
from torch import nn

POINTWISE = (1.0, 1.0, 0.0)

# x of shape (2, 3): Nx = Ny = 6. (module, FLOPs, DMAs)
CASES = [
    (nn.ReLU(), 6 * 1, 6 + 6),  # reference: Nx; Nx + Ny
    (nn.ReLU(inplace=True), 6, 6),  # in-place: no separate write
    (nn.ELU(), 6 * 6, 6 + 1 + 6),  # reference: 6·Nx; Nx + 1 + Ny
    (nn.LeakyReLU(), 6 * 4, 6 + 1 + 6),
    (nn.ReLU6(), 6 * 2, 6 + 6),  # ReLU6 is a Hardtanh subclass but keeps the reference rule
    (nn.Hardtanh(), 6 * 2, 6 + 2 + 6),  # min_val, max_val read
    (nn.Tanh(), 6 * 6, 2 * 6 + 6),  # reference DMAs 2·Nx + Ny
    (nn.Sigmoid(), 6 * 4, 6 + 6),
    (nn.GELU(), 6 * 5, 12),
    (nn.GELU(approximate="tanh"), 6 * 13, 12),  # pow, ·0.044715, +x, ·√(2/π), tanh 6, +1, ·x, ·0.5
    (nn.SiLU(), 6 * 5, 12),
    (nn.SiLU(inplace=True), 6 * 5, 6),
    (nn.Mish(), 6 * 10, 12),
    (nn.Hardswish(), 6 * 5, 12),
    (nn.Hardsigmoid(), 6 * 4, 12),
    (nn.Softplus(), 6 * 6, 6 + 2 + 6),  # β and threshold read
    (nn.PReLU(), 6 * 4, 6 + 1 + 6),  # one learned slope
    (nn.PReLU(3), 6 * 4, 6 + 3 + 6),  # one slope per channel
    (nn.SELU(), 6 * 7, 12),
    (nn.CELU(), 6 * 7, 6 + 1 + 6),
    (nn.LogSigmoid(), 6 * 5, 12),
    (nn.Softsign(), 6 * 3, 12),
    (nn.Tanhshrink(), 6 * 7, 12),
    (nn.Threshold(0.1, 0.0), 6 * 1, 6 + 2 + 6),
]


@pytest.mark.parametrize(("module", "flops", "dmas"), CASES, ids=lambda v: repr(v) if isinstance(v, nn.Module) else "")
def test_elementwise_activation(module, flops, dmas, measure):
    got = measure(module, torch.randn(2, 3))
    assert (got.flops, got.macs, got.dmas, got.rf) == (flops, 0, dmas, POINTWISE)
    assert got.warnings == []


def test_contract_relu(measure):
    # docs/report-schema.md: ReLU on (1, 4, 8, 8): 256 FLOPs, 0 MACs, 512 DMAs
    got = measure(nn.ReLU(), torch.randn(1, 4, 8, 8))
    assert (got.flops, got.macs, got.dmas) == (256, 0, 512)


def test_glu(measure):
    # GLU on (2, 4) → (2, 2): 5 per output element = 20 FLOPs; DMAs 8 + 4 = 12
    got = measure(nn.GLU(), torch.randn(2, 4))
    assert (got.flops, got.macs, got.dmas, got.rf) == (20, 0, 12, POINTWISE)


@pytest.mark.parametrize(
    ("module", "shape", "flops", "dmas"),
    [
        # (2, 3) over dim 1: R = 2 rows of S = 3: Softmax 2·(9 − 1) = 16; DMAs 6 + 6 + 2·2 = 16
        (nn.Softmax(dim=1), (2, 3), 16, 16),
        (nn.LogSoftmax(dim=1), (2, 3), 2 * 9, 16),  # R·3S = 18
        (nn.Softmin(dim=1), (2, 3), 2 * 11, 16),  # R·(4S − 1) = 22
        (nn.Softmax(dim=-1), (2, 3), 16, 16),
        # Softmax2d on (1, 3, 2, 2): over channels, S = 3, R = 4: 4·8 = 32; DMAs 12 + 12 + 8 = 32
        (nn.Softmax2d(), (1, 3, 2, 2), 32, 32),
        # implicit dim (legacy): rank 2 → dim 1 (S = 3, R = 2); rank 3 → dim 0 (S = 2, R = 12)
        (nn.Softmax(), (2, 3), 16, 16),
        (nn.Softmax(), (2, 3, 4), 12 * 5, 24 + 24 + 24),
    ],
)
@pytest.mark.filterwarnings("ignore:Implicit dimension choice")
def test_softmax_family(module, shape, flops, dmas, measure):
    got = measure(module, torch.randn(*shape))
    assert (got.flops, got.macs, got.dmas, got.rf) == (flops, 0, dmas, POINTWISE)
    assert got.warnings == []

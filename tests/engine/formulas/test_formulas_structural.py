"""Identity, Flatten, Unflatten and padding modules."""

import torch
from torch import nn


def test_identity_and_flatten_reference_values(measure):
    # docs/formulas.md: Identity DMAs Nx, Flatten 2·Nx; docs/report-schema.md Flatten on (1, 4, 4, 4) → 128
    got = measure(nn.Identity(), torch.randn(2, 3))
    assert (got.flops, got.macs, got.dmas, got.rf) == (0, 0, 6, (1.0, 1.0, 0.0))
    got = measure(nn.Flatten(), torch.randn(1, 4, 4, 4))
    assert (got.flops, got.macs, got.dmas, got.rf) == (0, 0, 128, (1.0, 1.0, 0.0))
    got = measure(nn.Unflatten(1, (2, 3)), torch.randn(2, 6))
    assert got.dmas == 24


def test_padding_modules(measure):
    # ZeroPad2d((1, 1, 2, 2)) on (1, 1, 3, 3) → (1, 1, 7, 5), Ny = 35: DMAs 9 + 35 = 44;
    # RF along height: 2 elements before
    got = measure(nn.ZeroPad2d((1, 1, 2, 2)), torch.randn(1, 1, 3, 3))
    assert (got.flops, got.macs, got.dmas, got.rf) == (0, 0, 44, (1, 1, 2))
    # ReflectionPad1d(2) on (1, 2, 4) → (1, 2, 8): every output copied from an input, 2·16 = 32
    got = measure(nn.ReflectionPad1d(2), torch.randn(1, 2, 4))
    assert (got.dmas, got.rf) == (32, (1, 1, 2))

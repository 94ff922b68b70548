"""Dropout formulas (docs/formulas.md): the identity in evaluation, the reference values in training."""

import pytest
import torch
from torch import nn

VARIANTS = [
    (nn.Dropout(0.5), (2, 3, 4)),
    (nn.Dropout1d(0.5), (2, 3, 4)),
    (nn.Dropout2d(0.5), (2, 3, 4, 4)),
    (nn.Dropout3d(0.5), (2, 3, 2, 2, 2)),
    (nn.AlphaDropout(0.5), (2, 3, 4)),
    (nn.FeatureAlphaDropout(0.5), (2, 3, 4, 4)),
]


@pytest.mark.parametrize(
    ("module", "shape"), VARIANTS, ids=lambda v: type(v).__name__ if isinstance(v, nn.Module) else ""
)
def test_evaluation_dropout_is_an_elided_identity(module, shape, measure):
    # F.dropout(x, training=False) returns x itself: nothing computed, read or written
    got = measure(module, torch.randn(*shape))
    assert (got.flops, got.macs, got.dmas, got.rf) == (0, 0, 0, (1.0, 1.0, 0.0))
    assert got.warnings == []


def test_evaluation_dropout_returns_its_input():
    # the fact the elided-identity convention rests on
    x = torch.randn(3)
    assert nn.Dropout(0.5).eval()(x) is x


def test_training_dropout_reference_values(measure):
    # nn.Dropout(0.5) training on (2, 3): FLOPs Nx = 6; DMAs Nx + 1 + Ny = 13
    got = measure(nn.Dropout(0.5), torch.randn(2, 3), train=True)
    assert (got.flops, got.macs, got.dmas) == (6, 0, 13)
    # in place: no separate write → 7
    got = measure(nn.Dropout(0.5, inplace=True), torch.randn(2, 3), train=True)
    assert got.dmas == 7


def test_training_channel_and_alpha_dropout(measure):
    # Dropout2d training on (1, 2, 3, 3): every element multiplied, Nx = 18
    assert measure(nn.Dropout2d(0.5), torch.randn(1, 2, 3, 3), train=True).flops == 18
    # AlphaDropout training on (2, 3): multiply and add per element = 12
    assert measure(nn.AlphaDropout(0.5), torch.randn(2, 3), train=True).flops == 12


def test_training_dropout_with_zero_probability_is_the_identity(measure):
    # p = 0 returns the input in training too
    got = measure(nn.Dropout(0.0), torch.randn(2, 3), train=True)
    assert (got.flops, got.macs, got.dmas) == (0, 0, 0)

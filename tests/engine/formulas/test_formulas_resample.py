"""Upsample and pixel (un)shuffle formulas; expected values derived by hand."""

import pytest
import torch
from torch import nn


def test_upsample_nearest(measure):
    # ×2 nearest on (1, 2, 3, 3) → (1, 2, 6, 6), Ny = 72: index copy, 0 FLOPs / MACs;
    # DMAs 1·72 + 72 = 144; RF (1 tap, stride 1/2, padding 0)
    got = measure(nn.Upsample(scale_factor=2, mode="nearest"), torch.randn(1, 2, 3, 3))
    assert (got.flops, got.macs, got.dmas, got.rf) == (0, 0, 144, (1, 0.5, 0.0))
    assert got.warnings == []


def test_upsample_bilinear(measure):
    # ×2 bilinear: 4 taps per output, Ny = 72: FLOPs 72·(2·4 − 1) = 504; MACs 72·4 = 288;
    # DMAs 4·72 + 72 = 360; RF (2, 0.5, 0.5 − 0.5·0.5 = 0.25)
    got = measure(nn.Upsample(scale_factor=2, mode="bilinear"), torch.randn(1, 2, 3, 3))
    assert (got.flops, got.macs, got.dmas, got.rf) == (504, 288, 360, (2, 0.5, 0.25))


def test_upsample_bicubic(measure):
    # 16 taps: FLOPs 72·31 = 2232; MACs 72·16 = 1152; DMAs 17·72 = 1224; padding 1.5 − 0.25
    got = measure(nn.Upsample(scale_factor=2, mode="bicubic"), torch.randn(1, 2, 3, 3))
    assert (got.flops, got.macs, got.dmas, got.rf) == (2232, 1152, 1224, (4, 0.5, 1.25))


def test_upsample_linear_and_trilinear(measure):
    # linear ×2 on (1, 2, 4) → Ny = 16, 2 taps: FLOPs 16·3 = 48, MACs 32, DMAs 48
    got = measure(nn.Upsample(scale_factor=2, mode="linear"), torch.randn(1, 2, 4))
    assert (got.flops, got.macs, got.dmas, got.rf) == (48, 32, 48, (2, 0.5, 0.25))
    # trilinear ×2 on (1, 1, 2, 2, 2) → Ny = 64, 8 taps: FLOPs 64·15 = 960, MACs 512, DMAs 576
    got = measure(nn.Upsample(scale_factor=2, mode="trilinear"), torch.randn(1, 1, 2, 2, 2))
    assert (got.flops, got.macs, got.dmas) == (960, 512, 576)


def test_upsample_align_corners_and_size(measure):
    # UpsamplingBilinear2d uses align_corners=True: 3 → 6 samples (3 − 1)/(6 − 1) = 0.4 apart
    got = measure(nn.UpsamplingBilinear2d(scale_factor=2), torch.randn(1, 1, 3, 3))
    assert got.rf == (2, pytest.approx(0.4), 0.0)
    # size instead of scale: in/out = 3/6 = 0.5
    got = measure(nn.Upsample(size=(6, 6), mode="bilinear"), torch.randn(1, 1, 3, 3))
    assert got.rf == (2, 0.5, 0.25)
    # nearest-exact samples at half-pixel centres: padding 0.5 − 0.25
    got = measure(nn.Upsample(scale_factor=2, mode="nearest-exact"), torch.randn(1, 1, 3, 3))
    assert (got.flops, got.rf) == (0, (1, 0.5, 0.25))


def test_upsample_area_is_adaptive_average_pooling(measure):
    # area to 3 on (1, 1, 7): windows [0,3) [2,5) [4,7) = 9 elements; FLOPs 9 − 3 + 3 = 9;
    # DMAs 9 + 3 = 12; RF (3, 7/3, 0)
    got = measure(nn.Upsample(size=3, mode="area"), torch.randn(1, 1, 7))
    assert (got.flops, got.macs, got.dmas) == (9, 9, 12)
    assert got.rf == (3, pytest.approx(7 / 3), 0)


def test_pixel_shuffle_and_unshuffle(measure):
    # PixelShuffle(2): (1, 8, 3, 3) → (1, 2, 6, 6); data movement only: DMAs 72 + 72 = 144
    got = measure(nn.PixelShuffle(2), torch.randn(1, 8, 3, 3))
    assert (got.flops, got.macs, got.dmas, got.rf) == (0, 0, 144, (1, 0.5, 0.0))
    # PixelUnshuffle(2): (1, 2, 6, 6) → (1, 8, 3, 3); each output position gathers a 2×2 block
    got = measure(nn.PixelUnshuffle(2), torch.randn(1, 2, 6, 6))
    assert (got.flops, got.macs, got.dmas, got.rf) == (0, 0, 144, (2, 2, 0))

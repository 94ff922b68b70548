"""Pooling formulas; expected values derived by hand."""

import pytest
import torch
from torch import nn


def test_int_kernel_max_pool_uses_the_window_volume(measure):
    # docs/formulas.md: MaxPool2d(2) on (1, 4, 8, 8) → (1, 4, 4, 4), Ny = 64, k = 2² = 4 for all three
    # FLOPs = 64·(4 − 1) = 192 comparisons, no multiply-accumulate (case P11: "max-pool has no
    # MACs"); DMAs = 4·64 + 64 = 320 (the reference had 64/64/320)
    got = measure(nn.MaxPool2d(2), torch.randn(1, 4, 8, 8))
    assert (got.flops, got.macs, got.dmas, got.rf) == (192, 0, 320, (2, 2, 0))
    assert got.warnings == []


def test_tuple_kernel_gives_the_same_as_int(measure):
    got = measure(nn.MaxPool2d((2, 2)), torch.randn(1, 4, 8, 8))
    assert (got.flops, got.macs, got.dmas) == (192, 0, 320)


def test_max_pool_1d_and_dilation(measure):
    # MaxPool1d(3, stride=2) on (1, 2, 9): out (9 − 3)//2 + 1 = 4 → Ny = 8
    # FLOPs = 8·2 = 16, MACs 0; DMAs = 3·8 + 8 = 32
    got = measure(nn.MaxPool1d(3, stride=2), torch.randn(1, 2, 9))
    assert (got.flops, got.macs, got.dmas, got.rf) == (16, 0, 32, (3, 2, 0))
    # dilation 2 widens the window to 2·(3 − 1) + 1 = 5
    got = measure(nn.MaxPool2d(3, stride=1, padding=1, dilation=2), torch.randn(1, 1, 9, 9))
    assert got.rf == (5, 1, 1)


def test_avg_pool(measure):
    # AvgPool2d(2) on (1, 4, 8, 8): Ny = 64, k = 4, nd = 2: FLOPs = MACs = 64·(3 + 2) = 320
    # DMAs 4·64 + 64 = 320; RF (2, 2, 0) (docs/formulas.md)
    got = measure(nn.AvgPool2d(2), torch.randn(1, 4, 8, 8))
    assert (got.flops, got.macs, got.dmas, got.rf) == (320, 320, 320, (2, 2, 0))
    # AvgPool3d(2) on (1, 1, 4, 4, 4): Ny = 8, k = 8, nd = 3: FLOPs 8·(7 + 3) = 80; DMAs 72
    got = measure(nn.AvgPool3d(2), torch.randn(1, 1, 4, 4, 4))
    assert (got.flops, got.dmas) == (80, 72)


def test_adaptive_pool_divisible_equals_reference(measure):
    # AdaptiveAvgPool2d(1) on (1, 4, 7, 7): every window 7×7; reference Ny·(49 − 1 + 2) = 4·50 = 200
    # DMAs 49·4 + 4 = 200; RF: one 7-wide window → (7, 7, 0)
    got = measure(nn.AdaptiveAvgPool2d(1), torch.randn(1, 4, 7, 7))
    assert (got.flops, got.macs, got.dmas, got.rf) == (200, 200, 200, (7, 7, 0))
    # AdaptiveMaxPool2d(2) on (1, 1, 4, 4): windows 2×2; FLOPs 4·3 = 12, MACs 0; DMAs 16 + 4 = 20
    got = measure(nn.AdaptiveMaxPool2d(2), torch.randn(1, 1, 4, 4))
    assert (got.flops, got.macs, got.dmas, got.rf) == (12, 0, 20, (2, 2, 0))


def test_adaptive_pool_non_divisible_uses_exact_windows(measure):
    # AdaptiveAvgPool1d(3) on (1, 1, 7): windows [0,3) [2,5) [4,7) → 3 + 3 + 3 = 9 elements
    # FLOPs = MACs = 9 − 3 + 1·3 = 9; DMAs = 9 + 3 = 12; RF (3, 7/3, 0)
    got = measure(nn.AdaptiveAvgPool1d(3), torch.randn(1, 1, 7))
    assert (got.flops, got.macs, got.dmas) == (9, 9, 12)
    assert got.rf == (3, pytest.approx(7 / 3), 0)
    # AdaptiveMaxPool1d(3) on (1, 1, 2) (enlarging): windows [0,1) [0,2) [1,2) → 1 + 2 + 1 = 4
    # FLOPs 4 − 3 = 1; DMAs 7; RF (2, 2/3, 0)
    got = measure(nn.AdaptiveMaxPool1d(3), torch.randn(1, 1, 2))
    assert (got.flops, got.dmas) == (1, 7)
    assert got.rf == (2, pytest.approx(2 / 3), 0)


def test_adaptive_pool_2d_mixed_axes(measure):
    # AdaptiveAvgPool2d((2, 3)) on (2, 3, 4, 7): height windows 2 + 2 = 4, width 3 + 3 + 3 = 9
    # W = batch·channels·4·9 = 6·36 = 216; Ny = 6·6 = 36
    # FLOPs = 216 − 36 + 2·36 = 252; DMAs = 216 + 36 = 252; RF along height (2, 2, 0)
    got = measure(nn.AdaptiveAvgPool2d((2, 3)), torch.randn(2, 3, 4, 7))
    assert (got.flops, got.dmas, got.rf) == (252, 252, (2, 2, 0))

"""Normalisation formulas; expected values derived by hand."""

import pytest
import torch
from torch import nn

POINTWISE = (1.0, 1.0, 0.0)


def test_contract_batchnorm_eval(measure):
    # docs/report-schema.md: BatchNorm2d(4) eval on (1, 4, 8, 8), Nx = 256, C = 4
    # FLOPs 2·4 + 2·256 + 2·256 = 1032; MACs 256·2 = 512
    # DMAs 256 + (1 + 4 + 4 + 4 + 4 + 1) + 256 = 530
    got = measure(nn.BatchNorm2d(4), torch.randn(1, 4, 8, 8))
    assert (got.flops, got.macs, got.dmas, got.rf) == (1032, 512, 530, POINTWISE)
    assert got.warnings == []


def test_batchnorm_training_tracks_statistics(measure):
    # BatchNorm2d(4) in training on (2, 4, 3, 3): Nx = 72, C = 4, B·S = 18
    # FLOPs 8 + 144 + 144 + (0 + 72 + 216 + 24) = 608
    # MACs 144 + 4·17 + 4·35 + 16 = 368
    # DMAs 72 + (1 + 8 + 8 + 1 + (1 + 8)) + 72 = 171
    got = measure(nn.BatchNorm2d(4), torch.randn(2, 4, 3, 3), train=True)
    assert (got.flops, got.macs, got.dmas) == (608, 368, 171)


def test_contract_layernorm(measure):
    # docs/report-schema.md: LayerNorm(64) on (1, 64): 6·64 + 2·1 + 64 + 64 = 514 FLOPs
    # MACs 0 (no contraction); DMAs 64 + 128 + 64 + 4·1 = 260
    got = measure(nn.LayerNorm(64), torch.randn(1, 64))
    assert (got.flops, got.macs, got.dmas, got.rf) == (514, 0, 260, POINTWISE)
    assert got.warnings == []


def test_layernorm_case_p16_has_no_macs(measure):
    # case P16: LayerNorm(256) on (1, 256) has no matmul work
    assert measure(nn.LayerNorm(256), torch.randn(1, 256)).macs == 0


def test_layernorm_without_bias(measure):
    # LayerNorm(4, bias=False) on (2, 3, 4): N = 24, R = 6: 144 + 12 + 24 = 180
    # DMAs 24 + 4 + 24 + 24 = 76
    got = measure(nn.LayerNorm(4, bias=False), torch.randn(2, 3, 4))
    assert (got.flops, got.dmas) == (180, 76)


def test_groupnorm(measure):
    # GroupNorm(2, 4) on (2, 4, 3, 3): N = 72, R = 2·2 = 4
    # FLOPs 6·72 + 2·4 + 2·72 = 584; DMAs 72 + 8 + 72 + 16 = 168
    got = measure(nn.GroupNorm(2, 4), torch.randn(2, 4, 3, 3))
    assert (got.flops, got.macs, got.dmas, got.rf) == (584, 0, 168, POINTWISE)


def test_instancenorm_instance_statistics(measure):
    # InstanceNorm2d(3) on (2, 3, 4, 4): N = 96, R = 6, no affine
    # FLOPs 576 + 12 = 588; DMAs 96 + 0 + 96 + 24 = 216
    got = measure(nn.InstanceNorm2d(3), torch.randn(2, 3, 4, 4))
    assert (got.flops, got.macs, got.dmas) == (588, 0, 216)


def test_instancenorm_running_statistics_unbatched(measure):
    # InstanceNorm1d(3, affine, track_running_stats) eval, unbatched (3, 5): running stats
    # FLOPs 2·3 + 2·15 + 2·15 = 66; DMAs 15 + 6 + 15 + 2·3 = 42
    got = measure(nn.InstanceNorm1d(3, affine=True, track_running_stats=True), torch.randn(3, 5))
    assert (got.flops, got.dmas) == (66, 42)


def test_instancenorm_training_update(measure):
    # InstanceNorm1d(2, track_running_stats) training on (3, 2, 4): N = 24, R = 6, C = 2
    # FLOPs 6·24 + 12 + (2·6 + 6·2) = 180; DMAs 24 + 24 + 4·6 + 4·2 = 80
    got = measure(nn.InstanceNorm1d(2, track_running_stats=True), torch.randn(3, 2, 4), train=True)
    assert (got.flops, got.dmas) == (180, 80)


@pytest.mark.skipif(not hasattr(nn, "RMSNorm"), reason="nn.RMSNorm needs torch >= 2.4")
def test_rmsnorm(measure):
    # RMSNorm(8) on (2, 8): N = 16, R = 2: pow 16 + mean 16 + ε add 2 + rsqrt 2·2 (sqrt, reciprocal)
    # + ·rsqrt 16 + ·weight 16 = 3·16 + 3·2 + 16 = 70; DMAs 16 + 8 + 16 + 4 = 44
    got = measure(nn.RMSNorm(8), torch.randn(2, 8))
    assert (got.flops, got.macs, got.dmas, got.rf) == (70, 0, 44, POINTWISE)


def test_local_response_norm(measure):
    # LocalResponseNorm(3) on (1, 4, 2, 2): N = 16: 16·(3 + 5) = 128; DMAs 3·16 + 16 = 64
    got = measure(nn.LocalResponseNorm(3), torch.randn(1, 4, 2, 2))
    assert (got.flops, got.macs, got.dmas, got.rf) == (128, 0, 64, POINTWISE)

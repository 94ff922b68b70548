"""Normalisation operators: batch, instance, layer, group and RMS norms."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from opformula_models import op_flops
from torch import nn

X = torch.randn(2, 3, 4, 4)  # N = 96, C = 3


def test_batch_norm_eval():
    # 2C (eps add + sqrt per channel) + 2N (subtract, divide) + 2N affine = 6 + 192 + 192 = 390
    # = TorchScan's BatchNorm module formula 2C + 2Nx + 2Nx
    bn = nn.BatchNorm2d(3).eval()
    assert op_flops(lambda: bn(X)) == {"aten.native_batch_norm": 390}
    plain = nn.BatchNorm2d(3, affine=False).eval()
    assert op_flops(lambda: plain(X)) == {"aten.native_batch_norm": 6 + 192}


def test_batch_norm_train():
    bn = nn.BatchNorm2d(3).train()
    # eval part 390 + batch statistics 4N = 384 + running-stat update 6C = 18 -> 792;
    # plus num_batches_tracked += 1 (aten.add_ on a 0-d tensor: 1)
    assert op_flops(lambda: bn(X)) == {"aten.native_batch_norm": 792, "aten.add_": 1}
    no_track = nn.BatchNorm2d(3, track_running_stats=False)
    # no running buffers: 390 + 384 = 774
    assert op_flops(lambda: no_track(X)) == {"aten.native_batch_norm": 774}


def test_instance_norm_runs_as_batch_norm():
    # InstanceNorm2d(3, affine) reshapes to (1, B*C = 6, 4, 4) and runs batch norm with batch stats:
    # C' = 6, N = 96: 2*6 + 2*96 + 2*96 (affine) + 4*96 (statistics) = 12 + 192 + 192 + 384 = 780
    inorm = nn.InstanceNorm2d(3, affine=True)
    assert op_flops(lambda: inorm(X)) == {"aten.native_batch_norm": 780}


def test_layer_norm():
    # LayerNorm over the last dim (4): N = 96, R = 24 rows: 6N + 2R + N (weight) + N (bias)
    # = 576 + 48 + 96 + 96 = 816 (TorchScan's LayerNorm formula)
    ln = nn.LayerNorm(4)
    assert op_flops(lambda: ln(X)) == {"aten.native_layer_norm": 816}
    # over the last two dims without affine: R = 6: 576 + 12 = 588
    assert op_flops(lambda: F.layer_norm(X, (4, 4))) == {"aten.native_layer_norm": 588}


def test_group_norm():
    # GroupNorm(1 group of 3 channels... use 3 groups): R = B*G = 6: 6N + 2R + 2N = 576 + 12 + 192 = 780
    gn = nn.GroupNorm(3, 3)
    assert op_flops(lambda: gn(X)) == {"aten.native_group_norm": 780}


def test_rms_norm_functional_and_module():
    # F.rms_norm decomposes on CPU into pow, mean, add, rsqrt, mul, mul:
    # pow N=96, mean N=96 (R=24 rows of 4), add eps R=24, rsqrt 2R=48, mul N, mul (weight) N
    rms = nn.RMSNorm(4)
    counted = op_flops(lambda: rms(X))
    assert counted == {"aten.pow": 96, "aten.mean": 96, "aten.add_": 24, "aten.rsqrt": 48, "aten.mul": 192}
    # the fused operator, when dispatched whole, counts its decomposition: 3N + 3R + N = 288 + 72 + 96 = 456
    formula = torch.utils.flop_counter.shape_wrapper(
        __import__("torchscan_lsp.engine.operator_formulas", fromlist=["DEFAULT_FORMULAS"])
        .DEFAULT_FORMULAS[torch.ops.aten._fused_rms_norm])
    assert formula(X, [4], torch.ones(4), 1e-6, out_val=(X, X)) == 456 == sum(counted.values())


def test_rms_norm_operator_and_decomposition_agree():
    """3N + 3R + N (fused) and the decomposition pow N + mean N + add R + rsqrt 2R + mul N + mul N
    are the same 4N + 3R."""
    from torchscan_lsp.engine.operator_formulas.normalization import rms_norm_flops

    n, rows = 96, 24
    assert rms_norm_flops(n, rows, True) == n + n + rows + 2 * rows + n + n == 456


def test_weight_norm():
    lin = torch.nn.utils.parametrizations.weight_norm(nn.Linear(3, 2))
    counted = op_flops(lambda: lin(torch.randn(1, 3)))
    # parametrization computes _weight_norm_interface(v (2x3), g): 4 * 6 = 24, then addmm 2*1*3*2 = 12
    assert counted.get("aten._weight_norm_interface") == 24
    assert counted.get("aten.addmm") == 12

"""Pooling, reductions, scans and sorting."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from opformula_models import op_flops
from torch import nn

X = torch.randn(1, 2, 6, 6)


def test_max_pool():
    # k=2 (int) expands to 2x2: K = 4, output (1,2,3,3) = 18 elements, 3 comparisons each = 54
    assert op_flops(lambda: nn.MaxPool2d(2)(X)) == {"aten.max_pool2d_with_indices": 54}
    # kernel 3, stride 2, padding 1: output (1,2,3,3); K = 9 -> 18 * 8 = 144 (padding ignored)
    assert op_flops(lambda: F.max_pool2d(X, 3, 2, 1)) == {"aten.max_pool2d_with_indices": 144}
    # 1-D pooling runs as 2-D with kernel (1, 2): output (2, 6, 1, 3)... = 36 outputs * 1 = 36
    assert op_flops(lambda: F.max_pool1d(X[0], 2)) == {"aten.max_pool2d_with_indices": 36}
    # 3-D: input (1,1,2,6,6), k=2 -> output (1,1,1,3,3) = 9 outputs, K = 8: 9 * 7 = 63
    assert op_flops(lambda: F.max_pool3d(X[:, :1].unsqueeze(2).expand(1, 1, 2, 6, 6), 2)) == {
        "aten.max_pool3d_with_indices": 63}
    # return_indices does not change the count
    assert op_flops(lambda: F.max_pool2d(X, 2, return_indices=True)) == {"aten.max_pool2d_with_indices": 54}


def test_avg_pool():
    # K = 4: 3 adds + 1 divide per output, 18 outputs -> 72
    assert op_flops(lambda: nn.AvgPool2d(2)(X)) == {"aten.avg_pool2d": 72}
    # (3, 3) window stride 3: output (1,2,2,2) = 8 outputs * 9 = 72
    assert op_flops(lambda: F.avg_pool2d(X, (3, 3))) == {"aten.avg_pool2d": 72}
    x3 = torch.randn(1, 1, 4, 4, 4)
    # k=2 -> K=8, output 2x2x2 = 8 outputs * 8 = 64
    assert op_flops(lambda: F.avg_pool3d(x3, 2)) == {"aten.avg_pool3d": 64}


def test_adaptive_pools():
    # global average pooling dispatches as mean over (H, W): N = 72 (71 - 1 adds... = N FLOPs)
    assert op_flops(lambda: nn.AdaptiveAvgPool2d(1)(X)) == {"aten.mean": 72}
    # 6 -> 3 per dim: windows of 2, summed window length per dim 6, lead 2: 2 * 6 * 6 = 72
    assert op_flops(lambda: F.adaptive_avg_pool2d(X, 3)) == {"aten._adaptive_avg_pool2d": 72}
    # 6 -> 4: windows [0,2) [1,3) [3,5) [4,6): lengths 2+2+2+2 = 8 per dim; 2 * 8 * 8 = 128
    assert op_flops(lambda: F.adaptive_avg_pool2d(X, 4)) == {"aten._adaptive_avg_pool2d": 128}
    # max: window elements - outputs = 128 - 2*4*4 = 96
    assert op_flops(lambda: F.adaptive_max_pool2d(X, 4)) == {"aten.adaptive_max_pool2d": 96}
    # 5 -> 3: windows [0,2) [1,4) [3,5): 2 + 3 + 2 = 7 (not divisible: exact windows)
    x = torch.randn(1, 1, 5, 5)
    assert op_flops(lambda: F.adaptive_avg_pool2d(x, 3)) == {"aten._adaptive_avg_pool2d": 49}


def test_sum_mean_max():
    x = torch.randn(3, 4)  # N = 12
    assert op_flops(lambda: x.sum()) == {"aten.sum": 11}  # 11 additions
    assert op_flops(lambda: x.sum(1)) == {"aten.sum": 9}  # 3 rows of 4: 3 * 3 adds
    assert op_flops(lambda: x.mean(0)) == {"aten.mean": 12}  # 8 adds + 4 divides
    assert op_flops(lambda: x.amax(1)) == {"aten.amax": 9}
    assert op_flops(lambda: x.max(1)) == {"aten.max": 9}  # values and indices
    assert op_flops(lambda: x.max()) == {"aten.max": 11}
    assert op_flops(lambda: x.argmax(1)) == {"aten.argmax": 9}
    assert op_flops(lambda: x.prod(1)) == {"aten.prod": 9}
    assert op_flops(lambda: (x > 0).all()) == {"aten.gt": 12, "aten.all": 11}


def test_statistics():
    x = torch.randn(3, 4)  # N = 12, M = 3 along dim 1
    # var: mean N + (subtract, square) 2N + sum N - M + divide M = 4N = 48
    assert op_flops(lambda: x.var(1)) == {"aten.var": 48}
    assert op_flops(lambda: x.std(1)) == {"aten.std": 51}  # + 3 square roots
    assert op_flops(lambda: torch.var_mean(x, 1)) == {"aten.var_mean": 48}
    assert op_flops(lambda: torch.std_mean(x, 1)) == {"aten.std_mean": 51}
    # logsumexp: N exps + N - M adds + M logs = 2N = 24
    assert op_flops(lambda: torch.logsumexp(x, 1)) == {"aten.logsumexp": 24}


def test_norms():
    x = torch.randn(3, 4)
    # 2-norm over dim 1: square 12 + adds 9 + sqrt 3 = 24
    assert op_flops(lambda: x.norm(dim=1)) == {"aten.linalg_vector_norm": 24}
    # 1-norm: |x| 12 + adds 9 = 21
    assert op_flops(lambda: torch.linalg.vector_norm(x, 1, dim=1)) == {"aten.linalg_vector_norm": 21}
    # 3-norm: |x| 12 + pow 12 + adds 9 + root 3 = 36
    assert op_flops(lambda: torch.linalg.vector_norm(x, 3, dim=1)) == {"aten.linalg_vector_norm": 36}
    # F.normalize: the norm (24), clamp_min (3), expand (view) and divide (12)
    assert op_flops(lambda: F.normalize(x, dim=1)) == {"aten.linalg_vector_norm": 24, "aten.clamp_min": 3,
                                                       "aten.div": 12}


def test_scans_and_sorting():
    x = torch.randn(2, 8)  # N = 16, L = 8 along dim 1
    # cumsum: 7 additions per row of 8 -> 14
    assert op_flops(lambda: x.cumsum(1)) == {"aten.cumsum": 14}
    # sort: N * ceil(log2 8) = 16 * 3 = 48
    assert op_flops(lambda: x.sort(1)) == {"aten.sort": 48}
    assert op_flops(lambda: x.argsort(1)) == {"aten.sort": 48}
    # topk k=4: N * ceil(log2 4) = 32
    assert op_flops(lambda: x.topk(4, 1)) == {"aten.topk": 32}
    assert op_flops(lambda: x.topk(1, 1)) == {"aten.topk": 16}


def test_scatter_accumulate():
    dest = torch.zeros(5)
    src = torch.ones(3)
    idx = torch.tensor([0, 2, 2])
    # one addition per source element
    assert op_flops(lambda: dest.index_add(0, idx, src)) == {"aten.index_add": 3}
    assert op_flops(lambda: dest.scatter_add(0, idx, src)) == {"aten.scatter_add": 3}
    assert op_flops(lambda: dest.index_put((idx,), src, accumulate=True)) == {"aten.index_put": 3}
    assert op_flops(lambda: dest.index_put((idx,), src)) == {"aten.index_put": 0}


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
def test_scatter_with_and_without_reduce():
    dest = torch.zeros(5)
    idx = torch.tensor([0, 2, 2])
    src = torch.ones(3)
    assert op_flops(lambda: dest.scatter(0, idx, src)) == {"aten.scatter": 0}
    # one addition per scattered element
    assert op_flops(lambda: dest.scatter(0, idx, src, reduce="add")) == {"aten.scatter": 3}

"""Backward operators (forward-and-backward workloads): hand-derived values and model coverage."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from opformula_models import CNN_BUILDERS, TRANSFORMERS_BUILDERS, count, uncovered
from torch import nn


def backward_flops(loss_fn) -> dict[str, int]:
    flops, _ = count(lambda: loss_fn().backward())
    return {k: v for k, v in flops.items() if "backward" in k}


X = torch.randn(2, 5, requires_grad=True)  # N = 10, R = 2 rows


def test_elementwise_activation_gradients():
    assert backward_flops(lambda: torch.relu(X).sum()) == {"aten.threshold_backward": 20}  # compare, select
    assert backward_flops(lambda: torch.tanh(X).sum()) == {"aten.tanh_backward": 30}  # 1 - y^2, times grad
    assert backward_flops(lambda: torch.sigmoid(X).sum()) == {"aten.sigmoid_backward": 30}  # y (1 - y) grad
    assert backward_flops(lambda: F.gelu(X).sum()) == {"aten.gelu_backward": 110}  # Phi 4 + phi 4 + 3
    assert backward_flops(lambda: F.silu(X).sum()) == {"aten.silu_backward": 90}  # sigmoid 4 + 5


def test_softmax_and_norm_gradients():
    # y (g - sum(g y)): 4N - R = 38
    assert backward_flops(lambda: X.softmax(-1).sum()) == {"aten._softmax_backward_data": 38}
    # LayerNorm(5): grad_input 9N + N (weight), grad_weight 2N, grad_bias N = 13N = 130
    ln = nn.LayerNorm(5)
    assert backward_flops(lambda: ln(X).sum()) == {"aten.native_layer_norm_backward": 130}
    # training BatchNorm1d(5): the same 13N
    bn = nn.BatchNorm1d(5)
    assert backward_flops(lambda: bn(X).sum()) == {"aten.native_batch_norm_backward": 130}


def test_lookup_and_pooling_gradients():
    emb = nn.Embedding(10, 4)
    ids = torch.tensor([[1, 2, 3]])
    # 3 rows of 4 accumulated into the weight gradient
    assert backward_flops(lambda: emb(ids).sum()) == {"aten.embedding_dense_backward": 12}
    xp = torch.randn(1, 1, 4, 4, requires_grad=True)
    # 4 output gradients, each added to its maximum's position
    assert backward_flops(lambda: F.max_pool2d(xp, 2).sum()) == {"aten.max_pool2d_with_indices_backward": 4}
    # 4 output gradients, each divided (1) and spread over K = 4 inputs (4): 20
    assert backward_flops(lambda: F.avg_pool2d(xp, 2).sum()) == {"aten.avg_pool2d_backward": 20}


def test_loss_gradients():
    target = torch.tensor([0, 1])
    # cross entropy: log-softmax backward 4N - R = 38, NLL backward per target negate + mean divide = 4
    assert backward_flops(lambda: F.cross_entropy(X, target)) == {
        "aten._log_softmax_backward_data": 38, "aten.nll_loss_backward": 4}


def test_fused_kernel_gradients():
    q = torch.randn(1, 2, 4, 8, requires_grad=True)
    # BH = 2, L = S = 4, D = Dv = 8: scores 32; products 2*32*(3*8 + 2*8) = 2560 (PyTorch's count);
    # recompute P 3*32, rowsum(dO*O) 2*BH*L*Dv = 128, dS 2*32, scaling 32 -> 320; total 2880
    assert backward_flops(lambda: F.scaled_dot_product_attention(q, q, q).sum()) == {
        "aten._scaled_dot_product_flash_attention_for_cpu_backward": 2880}
    assert torch.utils.flop_counter.sdpa_backward_flop_count((1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8)) == 2560
    # LSTM(5, 5), T=3: products twice the forward's 1200 = 2400, cell backward 30 * 15 = 450
    lstm = nn.LSTM(5, 5)
    x = torch.randn(3, 1, 5)
    assert backward_flops(lambda: lstm(x)[0].sum()) == {"aten.mkldnn_rnn_layer_backward": 2850}


@pytest.mark.parametrize("name", sorted(CNN_BUILDERS) + sorted(TRANSFORMERS_BUILDERS))
def test_training_step_fully_covered(name):
    if name in TRANSFORMERS_BUILDERS:
        pytest.importorskip("transformers")
    builders = {**CNN_BUILDERS, **TRANSFORMERS_BUILDERS}
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, args, kwargs = builders[name]()
        model.train()

        def step():
            out = model(*args, **kwargs)
            if isinstance(out, tuple):
                out = out[0]
            if not isinstance(out, torch.Tensor):
                out = out.logits if hasattr(out, "logits") else out.last_hidden_state
            out.float().sum().backward()

        flops, calls = count(step)
    assert uncovered(calls) == {}
    assert any("backward" in op for op in flops)

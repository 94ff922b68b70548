"""Formulas for kernels this CPU-only test run never dispatches (CUDA/cuDNN/MIOpen paths, other
batch-norm entry points), called the way FlopCounterMode calls them, with arguments laid out as in
each operator's schema. Values derived by hand."""

from __future__ import annotations

import torch
from torch.utils.flop_counter import shape_wrapper

from torchscan_lsp.engine.operator_formulas import DEFAULT_FORMULAS

aten = torch.ops.aten


def call(packet, *args, out=None, **kwargs):
    return shape_wrapper(DEFAULT_FORMULAS[packet])(*args, out_val=out, **kwargs)


def t(*shape):
    return torch.empty(shape, device="meta")


def test_schemas_match_installed_torch():
    assert "Tensor[] weight, int weight_stride0, Tensor? weight_buf, Tensor hx, Tensor? cx, int mode, " \
           "SymInt hidden_size, SymInt proj_size, int num_layers" in str(aten._cudnn_rnn.default._schema)
    assert str(aten._thnn_fused_lstm_cell.default._schema).startswith(
        "aten::_thnn_fused_lstm_cell(Tensor input_gates, Tensor hidden_gates, Tensor cx, Tensor? input_bias=None")
    assert "Tensor weight0, Tensor weight1, Tensor weight2, Tensor weight3, Tensor hx_, Tensor cx_, bool reverse, " \
           "int[] batch_sizes, int mode, int hidden_size" in str(aten.mkldnn_rnn_layer.default._schema)


def test_cudnn_lstm_single_layer_matches_p10():
    # LSTM(5, 5), T=3, B=1: 2*3*20*10 = 1200 products + 32*15 = 480 cell -> 1680 (as oneDNN)
    weights = [t(20, 5), t(20, 5), t(20), t(20)]
    flops = call(aten._cudnn_rnn, t(3, 1, 5), weights, 4, None, t(1, 1, 5), t(1, 1, 5), 2, 5, 0, 1,
                 False, 0.0, False, False, [], None, out=(t(3, 1, 5),))
    assert flops == 1680


def test_cudnn_bidirectional_projected_lstm():
    # I=3, H=6, P=4, 2 layers, bidirectional, T=5, B=2 -> 10 positions.
    # layer 1, per direction: 2*10*24*(3 + 4) = 3360, projection 2*10*6*4 = 480, cell 32*60 = 1920 -> 5760
    # layer 2 (input 2P = 8), per direction: 2*10*24*(8 + 4) = 5760 + 480 + 1920 = 8160
    # total 2*5760 + 2*8160 = 27840
    group1 = [t(24, 3), t(24, 4), t(24), t(24), t(4, 6)]
    group2 = [t(24, 8), t(24, 4), t(24), t(24), t(4, 6)]
    weights = group1 + group1 + group2 + group2
    flops = call(aten._cudnn_rnn, t(2, 5, 3), weights, 5, None, t(4, 2, 4), t(4, 2, 6), 2, 6, 4, 2,
                 True, 0.0, False, True, [], None)
    assert flops == 27840


def test_cudnn_gru_and_rnn_modes():
    # GRU(4, 3), T=2, B=1: products 2*2*9*(4 + 3) = 252, cell 21*6 = 126 -> 378
    gru = [t(9, 4), t(9, 3), t(9), t(9)]
    assert call(aten._cudnn_rnn, t(2, 1, 4), gru, 4, None, t(1, 1, 3), None, 3, 3, 0, 1,
                False, 0.0, False, False, [], None) == 378
    # RNN tanh (mode 1) / relu (mode 0), I=4, H=3, T=2, B=1: products 2*2*3*7 = 84; cell 7*6 / 2*6
    rnn = [t(3, 4), t(3, 3), t(3), t(3)]
    assert call(aten._cudnn_rnn, t(2, 1, 4), rnn, 4, None, t(1, 1, 3), None, 1, 3, 0, 1,
                False, 0.0, False, False, [], None) == 84 + 42
    assert call(aten._cudnn_rnn, t(2, 1, 4), rnn, 4, None, t(1, 1, 3), None, 0, 3, 0, 1,
                False, 0.0, False, False, [], None) == 84 + 12


def test_miopen_rnn():
    weights = [t(20, 5), t(20, 5), t(20), t(20)]
    assert call(aten.miopen_rnn, t(3, 1, 5), weights, 4, t(1, 1, 5), t(1, 1, 5), 2, 5, 1,
                False, 0.0, False, False, [], None) == 1680


def test_fused_cuda_cells():
    # LSTM cell, B=2, H=3: gates (2, 12) -> 6 units * (32 + 8 bias adds) = 240; without biases 192
    assert call(aten._thnn_fused_lstm_cell, t(2, 12), t(2, 12), t(2, 3), t(12), t(12)) == 240
    assert call(aten._thnn_fused_lstm_cell, t(2, 12), t(2, 12), t(2, 3)) == 192
    # GRU cell, B=2, H=3: 6 units * (21 + 6) = 162
    assert call(aten._thnn_fused_gru_cell, t(2, 9), t(2, 9), t(2, 3), t(9), t(9)) == 162


def test_other_batch_norm_entry_points():
    x, c = t(2, 3, 4, 4), t(3)  # N = 96, C = 3
    # evaluation: 2C + 2N + 2N = 390
    assert call(aten._native_batch_norm_legit_no_training, x, c, c, c, c, 0.1, 1e-5) == 390
    assert call(aten._batch_norm_no_update, x, c, c, c, c, 0.1, 1e-5) == 390
    assert call(aten.cudnn_batch_norm, x, c, c, c, c, False, 0.1, 1e-5) == 390
    # training with running stats: + 4N + 6C = 390 + 384 + 18 = 792
    assert call(aten._batch_norm_with_update, x, c, c, c, c, 0.1, 1e-5) == 792
    assert call(aten._native_batch_norm_legit, x, c, c, c, c, True, 0.1, 1e-5) == 792
    # no_stats overload (input, weight, bias, training, momentum, eps): 390 + 384 = 774
    assert call(aten._native_batch_norm_legit, x, c, c, True, 0.1, 1e-5) == 774
    # running buffers given but evaluation: 390
    assert call(aten.native_batch_norm, x, None, None, c, c, False, 0.1, 1e-5) == 6 + 192


def test_fused_attention_overrideable_and_addmm_activation():
    q = t(1, 2, 16, 8)
    # as the CPU flash kernel: 16384 + 512 scaling + 1504 softmax; + 512 with an attention bias
    assert call(aten._scaled_dot_product_fused_attention_overrideable, q, q, q) == 18400
    assert call(aten._scaled_dot_product_fused_attention_overrideable, q, q, q, t(16, 16)) == 18912
    # (4 x 8)(8 x 5) + bias, ReLU epilogue: 2*4*5*8 = 320 + 20 = 340; GELU (tanh) 320 + 13*20 = 580
    assert call(aten._addmm_activation, t(5), t(4, 8), t(8, 5)) == 340
    assert call(aten._addmm_activation, t(5), t(4, 8), t(8, 5), use_gelu=True) == 580

"""Fused recurrent kernels: oneDNN (``mkldnn_rnn_layer``), cuDNN/MIOpen whole-RNN kernels and the
fused LSTM/GRU cells.

For one layer and direction over T time steps, batch B, input size I, hidden size H, recurrent
input size Hr (H, or the projection size P) and G gates (LSTM 4, GRU 3, RNN 1):

* gate products: 2*T*B*G*H*(I + Hr) — the input and recurrent matrix products (PyTorch's dense
  convention, biases folded into the products as in ``addmm``); with a projection, + 2*T*B*H*P;
* element-wise gate work per hidden unit and step, as PyTorch's own cell code does it
  (``aten/src/ATen/native/RNN.cpp``), with Sigmoid = 4 and Tanh = 6:

  - LSTM 32: add the two gate products (4), sigmoid of i, f, o (12), tanh of g (6),
    c' = f*c + i*g (3), h' = o * tanh(c') (7);
  - GRU 21: r and z pre-activations (2), their sigmoids (8), r * h_n (1), i_n + (.) (1), tanh (6),
    h' = n + z * (h - n) (3);
  - RNN: add the two products (1) and tanh (6) or ReLU (1).

These are exactly the counts of the decomposed cells PyTorch runs elsewhere (meta device, GRU/RNN on
CPU), so an LSTM counts the same on its fused oneDNN path and on the meta device.
"""

from __future__ import annotations

import math
from typing import Any

from ._base import arg, is_shape, numel, register
from .activation import SIGMOID, TANH

LSTM_CELL = 4 + 3 * SIGMOID + TANH + 3 + TANH + 1  # 32
GRU_CELL = 2 + 2 * SIGMOID + 1 + 1 + TANH + 3  # 21
RNN_TANH_CELL = 1 + TANH  # 7
RNN_RELU_CELL = 1 + 1  # 2

# cuDNN / oneDNN mode numbers (torch.backends.cudnn.rnn: RNN_RELU 0, RNN_TANH 1, LSTM 2, GRU 3)
_MODE_CELL = {0: RNN_RELU_CELL, 1: RNN_TANH_CELL, 2: LSTM_CELL, 3: GRU_CELL}
_GATES_CELL = {4: LSTM_CELL, 3: GRU_CELL, 1: RNN_TANH_CELL}


def cell_flops(gates: int, mode: Any = None) -> int:
    """Element-wise FLOPs per hidden unit and step for a cell with ``gates`` gates (mode decides
    between the tanh and ReLU RNN)."""
    if isinstance(mode, int) and mode in _MODE_CELL and gates == (4 if mode == 2 else 3 if mode == 3 else 1):
        return _MODE_CELL[mode]
    return _GATES_CELL.get(gates, 0)


def rnn_layer_breakdown(tokens: int, gates: int, hidden: int, input_size: int, recurrent_size: int,
                        proj_size: int = 0, mode: Any = None) -> dict[str, int]:
    """Parts of one layer and direction over ``tokens`` = T*B (time steps x batch) positions."""
    matmul = 2 * tokens * gates * hidden * (input_size + recurrent_size)
    if proj_size:
        matmul += 2 * tokens * hidden * proj_size
    return {"matmul": matmul, "elementwise": tokens * hidden * cell_flops(gates, mode)}


@register("mkldnn_rnn_layer", family="recurrent")
def mkldnn_rnn_layer_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``mkldnn_rnn_layer(input, weight0, weight1, weight2, weight3, hx, cx, reverse, batch_sizes, mode,
    hidden_size, num_layers, has_biases, bidirectional, batch_first, train)``: one layer and one
    direction of ``nn.LSTM`` on CPU (oneDNN).

    weight0 = W_ih (G*H x I), weight1 = W_hh (G*H x H); the input arrives time-major (T, B, I)
    whatever ``batch_first`` says, so T*B = prod(input.shape[:-1]). FLOPs = 2*T*B*G*H*(I + H) gate
    products + 32*T*B*H element-wise LSTM cell work (G = 4). Source: derived from PyTorch's LSTM cell
    (RNN.cpp) — equal to the count of the same LSTM decomposed on the meta device.
    """
    x = args[0] if args else None
    w_ih = arg(args, kwargs, 1, "weight0")
    w_hh = arg(args, kwargs, 2, "weight1")
    if not (is_shape(x) and is_shape(w_ih) and is_shape(w_hh)):
        return 0
    hidden = int(arg(args, kwargs, 10, "hidden_size", 0) or 0)
    gate_rows = int(w_ih[0])
    if not hidden:
        hidden = gate_rows // 4
    gates = gate_rows // hidden if hidden else 0
    mode = arg(args, kwargs, 9, "mode")
    tokens = math.prod(x[:-1])
    parts = rnn_layer_breakdown(tokens, gates, hidden, int(w_ih[1]), int(w_hh[1]), mode=mode)
    return sum(parts.values())


def _whole_rnn(x: Any, weights: Any, mode: Any, hidden: int, proj_size: int, num_layers: int,
               bidirectional: bool) -> int:
    if not is_shape(x) or not isinstance(weights, (list, tuple)) or not weights or not hidden:
        return 0
    tokens = math.prod(x[:-1])
    groups = num_layers * (2 if bidirectional else 1)
    if groups <= 0 or len(weights) % groups:
        return 0
    per_group = len(weights) // groups
    total = 0
    for g in range(groups):
        group = weights[g * per_group:(g + 1) * per_group]
        w_ih, w_hh = group[0], group[1]
        if not (is_shape(w_ih) and is_shape(w_hh)):
            return 0
        gates = int(w_ih[0]) // hidden
        parts = rnn_layer_breakdown(tokens, gates, hidden, int(w_ih[1]), int(w_hh[1]),
                                    proj_size=proj_size, mode=mode)
        total += sum(parts.values())
    return total


@register("_cudnn_rnn", family="recurrent")
def cudnn_rnn_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``_cudnn_rnn(input, weight[], weight_stride0, weight_buf, hx, cx, mode, hidden_size, proj_size,
    num_layers, batch_first, dropout, train, bidirectional, batch_sizes, dropout_state)``: a whole
    multi-layer RNN/LSTM/GRU on cuDNN.

    Per layer and direction (weights [W_ih, W_hh, (b_ih, b_hh), (W_hr)]): 2*T*B*G*H*(I_l + Hr) gate
    products, + 2*T*B*H*P with a projection, + the cell's element-wise work per unit and step
    (LSTM 32, GRU 21, RNN tanh 7 / ReLU 2). Source: derived from PyTorch's cell definitions (RNN.cpp).
    """
    x = args[0] if args else None
    weights = arg(args, kwargs, 1, "weight")
    mode = arg(args, kwargs, 6, "mode")
    hidden = int(arg(args, kwargs, 7, "hidden_size", 0) or 0)
    proj = int(arg(args, kwargs, 8, "proj_size", 0) or 0)
    layers = int(arg(args, kwargs, 9, "num_layers", 1) or 1)
    bidirectional = bool(arg(args, kwargs, 13, "bidirectional", False))
    return _whole_rnn(x, weights, mode, hidden, proj, layers, bidirectional)


@register("miopen_rnn", family="recurrent")
def miopen_rnn_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``miopen_rnn(input, weight[], weight_stride0, hx, cx, mode, hidden_size, num_layers, batch_first,
    dropout, train, bidirectional, batch_sizes, dropout_state)``: as ``_cudnn_rnn`` (no projections)."""
    x = args[0] if args else None
    weights = arg(args, kwargs, 1, "weight")
    mode = arg(args, kwargs, 5, "mode")
    hidden = int(arg(args, kwargs, 6, "hidden_size", 0) or 0)
    layers = int(arg(args, kwargs, 7, "num_layers", 1) or 1)
    bidirectional = bool(arg(args, kwargs, 11, "bidirectional", False))
    return _whole_rnn(x, weights, mode, hidden, 0, layers, bidirectional)


@register("_thnn_fused_lstm_cell", family="recurrent")
def fused_lstm_cell_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``_thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias, hidden_bias)`` (CUDA):
    32 FLOPs per hidden unit (the LSTM cell above) + 8 when the two biases are added here
    (the gate products were counted by ``mm`` without them). B*H = input_gates.numel() / 4."""
    gates = args[0] if args else None
    units = numel(gates) // 4 if is_shape(gates) else 0
    biases = arg(args, kwargs, 3, "input_bias") is not None
    return units * (LSTM_CELL + (8 if biases else 0))


@register("_thnn_fused_gru_cell", family="recurrent")
def fused_gru_cell_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``_thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias, hidden_bias)`` (CUDA):
    21 FLOPs per hidden unit (the GRU cell above) + 6 for the two bias additions when given.
    B*H = input_gates.numel() / 3."""
    gates = args[0] if args else None
    units = numel(gates) // 3 if is_shape(gates) else 0
    biases = arg(args, kwargs, 3, "input_bias") is not None
    return units * (GRU_CELL + (6 if biases else 0))

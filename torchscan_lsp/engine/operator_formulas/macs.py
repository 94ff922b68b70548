"""Multiply-accumulates of the matrix, convolution, attention and recurrent operators.

``MAC_FORMULAS`` maps operator packets to formulas with the FLOP formulas' contract (shapes
positionally, ``out_shape=`` by keyword; ``_get_raw`` formulas get the real values and ``out_val=``).
A MAC is one multiply-add of a matrix or convolution product, so each formula counts the products
only, from the operator's matrix dimensions: bias additions (``addmm``'s ``self``, folded into the
accumulation), scaling, masks, softmax, activations, gate non-linearities and norms are element-wise
work with no MACs, whatever the FLOP formula of the same operator counts beside them.

Every other operator with a FLOP formula has 0 MACs (element-wise, reductions, pooling, norms, the
fused LSTM/GRU cells whose gate products ran as ``mm``). ``MAC_CLASS`` names the operators that do
have products: one of them without a formula here gives an unknown MAC count, never a silent 0.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.utils import flop_counter as _fc

from ._base import arg, is_shape, numel
from .matmul import trilinear_macs as _trilinear_macs
from .attention import _ENCODER_NAMES, _mha_args, encoder_layer_breakdown, native_mha_breakdown, sequence_lengths
from .recurrent import rnn_layer_breakdown

__all__ = ["MAC_FORMULAS", "MAC_CLASS"]

aten = torch.ops.aten
MAC_FORMULAS: dict[Any, Any] = {}


def _register(*names: str):
    def deco(fn):
        for name in names:
            packet = getattr(aten, name, None)
            if packet is not None:
                MAC_FORMULAS[packet] = fn
        return fn

    return deco


def _product(a: Any, b: Any) -> int:
    """(..., M, K) @ (..., K, N): prod(batch) * M * K * N, from the two operands' shapes."""
    if not (is_shape(a) and is_shape(b)) or len(a) < 2 or len(b) < 2:
        return 0
    return math.prod(a[:-2]) * a[-2] * a[-1] * b[-1]


@_register("mm", "_scaled_mm", "_int_mm", "bmm")
def mm_macs(a: Any, b: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``mm``/``_int_mm``/``_scaled_mm`` (M x K)(K x N): M*K*N; ``bmm`` (B, M, K)(B, K, N): B*M*K*N."""
    return _product(a, b)


@_register("addmm", "baddbmm", "_addmm_activation")
def addmm_macs(_self: Any, a: Any, b: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``addmm``/``_addmm_activation``: M*K*N; ``baddbmm``: B*M*K*N (the added ``self`` is none)."""
    return _product(a, b)


@_register("addbmm")
def addbmm_macs(_self: Any, b1: Any, b2: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """B*M*K*N: the B products summed into one matrix (the sum is the accumulation)."""
    return _product(b1, b2)


@_register("_trilinear")
def trilinear_macs(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """The two sum-products of ``nn.Bilinear``'s operator (:func:`.matmul.trilinear_macs`)."""
    return _trilinear_macs(*args, **kwargs)


@_register("mv", "addmv")
def mv_macs(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """M*N for an (M x N) matrix times an N-vector."""
    mat = args[1] if len(args) > 2 and is_shape(args[1]) and len(args[1]) == 2 else (args[0] if args else None)
    return numel(mat) if is_shape(mat) else 0


@_register("dot", "vdot")
def dot_macs(a: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """N for two N-vectors."""
    return numel(a) if is_shape(a) else 0


@_register("addr")
def addr_macs(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """M*N: each output element is ``self + a_i * b_j``, one multiply-add."""
    return numel(out_shape)


@_register("linear", "mkldnn_linear")
def linear_macs(x: Any, w: Any = None, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """T * in * out for T = prod(input.shape[:-1]) rows."""
    if not (is_shape(x) and is_shape(w)):
        return 0
    return math.prod(x[:-1]) * x[-1] * (w[0] if len(w) == 2 else 1)


def _conv(x: Any, w: Any, out: Any, transposed: Any) -> int:
    """Half of PyTorch's ``conv_flop_count``, which is 2 * batch * prod(weight) * prod(spatial) with
    the output's spatial size (the input's for a transposed convolution): one product per MAC.
    The weight's shape (Cout, Cin / groups, k...) already holds the groups."""
    if not (is_shape(x) and is_shape(w) and is_shape(out)):
        return 0
    return _fc.conv_flop_count(list(x), list(w), list(out), bool(transposed)) // 2


@_register("convolution", "_convolution", "convolution_overrideable")
def convolution_macs(x: Any, w: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``convolution(input, weight, bias, stride, padding, dilation, transposed, ...)``:
    B * Cout * Cin/groups * prod(k) * prod(output spatial) (input spatial when transposed)."""
    return _conv(x, w, out_shape, arg(args, kwargs, 4, "transposed", False))


@_register("cudnn_convolution", "_slow_conv2d_forward")
def direct_convolution_macs(x: Any, w: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """Direct (not transposed) convolution kernels: as ``convolution``."""
    return _conv(x, w, out_shape, False)


@_register("convolution_backward")
def convolution_backward_macs(grad_out: Any, x: Any, w: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask)``: grad_input and grad_weight each repeat the
    forward's products once (PyTorch's derivation in ``conv_backward_flop``), so each requested one
    is the forward's B * Cout * Cin/groups * prod(k) * prod(spatial) MACs; the bias gradient is a sum."""
    transposed = arg(args, kwargs, 4, "transposed", False)
    mask = arg(args, kwargs, 7, "output_mask", (True, True, True)) or (True, True, True)
    forward = _conv(x, w, grad_out, transposed)
    return forward * (int(bool(mask[0])) + int(bool(mask[1])))


def _half(formula: Any):
    def macs(*args: Any, **kwargs: Any) -> int:
        return int(formula(*args, **kwargs)) // 2

    macs.__doc__ = (
        f"Half of PyTorch's ``{getattr(formula, '__name__', formula)}``, which counts the attention "
        "products only (``sdpa_flop_count``: Q K^T and P V, 2 FLOPs per multiply-add), nothing element-wise."
    )
    return macs


for _name in (
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_cudnn_attention", "_efficient_attention_forward", "_flash_attention_forward",
    "_scaled_dot_product_efficient_attention_backward", "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_cudnn_attention_backward", "_efficient_attention_backward", "_flash_attention_backward",
):  # fmt: skip
    _packet = getattr(aten, _name, None)
    if _packet is not None and _packet in _fc.flop_registry:
        MAC_FORMULAS[_packet] = _half(_fc.flop_registry[_packet])


@_register("_scaled_dot_product_flash_attention_for_cpu")
def sdpa_cpu_macs(q: Any, k: Any, v: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """B*H*L*S*D for Q K^T plus B*H*L*S*Dv for P V (dense convention: masks and ``is_causal`` do not
    change it); grouped-query heads broadcast to the query's H."""
    if not all(is_shape(s) for s in (q, k, v)):
        return 0
    return math.prod(q[:-2]) * q[-2] * k[-2] * (q[-1] + v[-1])


@_register("_scaled_dot_product_fused_attention_overrideable")
def sdpa_overrideable_macs(q: Any, k: Any, v: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """As the CPU flash kernel."""
    return sdpa_cpu_macs(q, k, v)


@_register("_scaled_dot_product_flash_attention_for_cpu_backward")
def sdpa_cpu_backward_macs(grad_out: Any, q: Any, k: Any, v: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """B*H*L*S*(3D + 2Dv): recomputed Q K^T, dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q."""
    if not all(is_shape(s) for s in (q, k, v)):
        return 0
    return math.prod(q[:-2]) * q[-2] * k[-2] * (3 * q[-1] + 2 * v[-1])


def native_mha_macs(*args: Any, out_val: Any = None, **kwargs: Any) -> int:
    """``_native_multi_head_attention``: per sequence, projections L*E^2 + 2*S*E^2 + L*E^2 and
    scores plus weighted sum 2*L*S*E (half of ``native_mha_breakdown``'s ``matmul``)."""
    a = _mha_args(args, kwargs)
    parts = native_mha_breakdown(sequence_lengths(a["query"]), sequence_lengths(a["key"]), int(a["embed_dim"]),
                                 int(a["num_head"]), mask=a["mask"] is not None, need_weights=bool(a["need_weights"]),
                                 average_weights=bool(a["average_attn_weights"]))  # fmt: skip
    return parts["matmul"] // 2


def encoder_layer_macs(*args: Any, out_val: Any = None, **kwargs: Any) -> int:
    """``_transformer_encoder_layer_fwd``: self-attention's products plus the feed-forward 2*T*E*F
    (half of ``encoder_layer_breakdown``'s ``matmul``; norms, residuals and the activation have none)."""
    a = {name: arg(args, kwargs, i, name) for i, name in enumerate(_ENCODER_NAMES)}
    ffn = a["ffn_weight_1"]
    parts = encoder_layer_breakdown(sequence_lengths(a["src"]), int(a["embed_dim"]), int(a["num_heads"]),
                                    int(ffn.shape[0]) if ffn is not None else 0, use_gelu=bool(a["use_gelu"]),
                                    mask=a["mask"] is not None)  # fmt: skip
    return parts["matmul"] // 2


for _fn, _name in ((native_mha_macs, "_native_multi_head_attention"), (encoder_layer_macs, "_transformer_encoder_layer_fwd")):
    _fn._get_raw = True  # type: ignore[attr-defined]
    _register(_name)(_fn)


def _rnn_products(x: Any, w_ih: Any, w_hh: Any, hidden: int, proj: int = 0) -> int:
    if not (is_shape(x) and is_shape(w_ih) and is_shape(w_hh)) or not hidden:
        return 0
    gates = int(w_ih[0]) // hidden
    parts = rnn_layer_breakdown(math.prod(x[:-1]), gates, hidden, int(w_ih[1]), int(w_hh[1]), proj_size=proj)
    return parts["matmul"] // 2


@_register("mkldnn_rnn_layer")
def mkldnn_rnn_layer_macs(x: Any, w_ih: Any = None, w_hh: Any = None, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """One layer and direction: T*B*G*H*(I + H) gate products (LSTM: G = 4)."""
    hidden = int(arg(args, kwargs, 7, "hidden_size", 0) or 0) or (int(w_hh[1]) if is_shape(w_hh) else 0)
    return _rnn_products(x, w_ih, w_hh, hidden)


@_register("mkldnn_rnn_layer_backward")
def mkldnn_rnn_layer_backward_macs(x: Any, w_ih: Any = None, w_hh: Any = None, *args: Any, out_shape: Any = None,
                                   **kwargs: Any) -> int:  # fmt: skip
    """Twice the forward's gate products (the gradients of the inputs and hidden states, and of the weights)."""
    hidden = int(w_hh[1]) if is_shape(w_hh) else 0
    return 2 * _rnn_products(x, w_ih, w_hh, hidden)


def _whole_rnn_macs(x: Any, weights: Any, hidden: int, proj: int, layers: int, bidirectional: bool) -> int:
    groups = layers * (2 if bidirectional else 1)
    if not isinstance(weights, (list, tuple)) or not weights or groups <= 0 or len(weights) % groups:
        return 0
    per_group = len(weights) // groups
    return sum(
        _rnn_products(x, weights[g * per_group], weights[g * per_group + 1], hidden, proj) for g in range(groups)
    )


@_register("_cudnn_rnn")
def cudnn_rnn_macs(x: Any, weights: Any = None, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """A whole multi-layer RNN: per layer and direction T*B*G*H*(I_l + Hr), + T*B*H*P with a projection."""
    hidden = int(arg(args, kwargs, 5, "hidden_size", 0) or 0)
    proj = int(arg(args, kwargs, 6, "proj_size", 0) or 0)
    layers = int(arg(args, kwargs, 7, "num_layers", 1) or 1)
    return _whole_rnn_macs(x, weights, hidden, proj, layers, bool(arg(args, kwargs, 11, "bidirectional", False)))


@_register("miopen_rnn")
def miopen_rnn_macs(x: Any, weights: Any = None, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """As ``_cudnn_rnn`` (no projections)."""
    hidden = int(arg(args, kwargs, 4, "hidden_size", 0) or 0)
    layers = int(arg(args, kwargs, 5, "num_layers", 1) or 1)
    return _whole_rnn_macs(x, weights, hidden, 0, layers, bool(arg(args, kwargs, 9, "bidirectional", False)))


def _mac_class() -> frozenset[str]:
    from ._base import FAMILY

    zero = {"aten._thnn_fused_lstm_cell", "aten._thnn_fused_gru_cell"}  # element-wise only: gates ran as mm
    families = {name for name, family in FAMILY.items() if family in ("matmul", "attention", "recurrent")}
    return frozenset(({str(packet) for packet in _fc.flop_registry} | families | {str(p) for p in MAC_FORMULAS}) - zero)


#: Operators that do matrix, convolution or attention products (MACs), by name.
MAC_CLASS: frozenset[str] = _mac_class()

"""Fused attention and Transformer kernels that PyTorch's counter treats as free on CPU.

The matrix products follow PyTorch's dense convention (``sdpa_flop_count``): scores Q K^T are
2*B*H*L*S*D FLOPs and the weighted sum P V is 2*B*H*L*S*Dv, whatever the mask or ``is_causal``
(masked positions are computed, then discarded). Projection biases are folded into the products as
in PyTorch's ``addmm`` formula. The element-wise work uses the element-wise conventions of this
library: scaling 1 per scaled element, an additive/boolean mask 1 per score, softmax 3N - R,
residual additions 1 per element, LayerNorm 6N + 2R + 2N, ReLU 1 and GELU 5 per element.

With these conventions each fused kernel counts exactly what its decomposition on the meta device
counts, except for where the attention scaling is applied: the CPU flash kernel multiplies the
B*H*L*S scores (``_mul_reduce_max_fusion_kernel``), the math decomposition multiplies q and k by
sqrt(scale) (B*H*(L + S)*D), and the native MHA kernel's weights path rescales q (B*L*E).

``_native_multi_head_attention`` and ``_transformer_encoder_layer_fwd`` receive their real
arguments (``_get_raw``): their input may be a nested tensor whose sequences have different lengths,
and the count is then exact per sequence.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ._base import arg, is_shape, register
from .activation import GELU_ERF, RELU, softmax_flops
from .normalization import layer_norm_flops


def attention_core(bh: int, length_q: int, length_kv: int, dim: int, dim_v: int, *,
                   scale_elements: int, mask: bool, dropout: bool) -> dict[str, int]:
    """FLOPs of softmax(scale * Q K^T + mask) V for ``bh`` (batch x heads) independent heads.

    Returns the parts: ``matmul`` (2*BH*L*S*D + 2*BH*L*S*Dv), ``scale`` (``scale_elements``),
    ``mask`` (BH*L*S when a mask is added), ``softmax`` (3*BH*L*S - BH*L) and ``dropout``
    (BH*L*S when attention dropout is active).
    """
    scores = bh * length_q * length_kv
    return {
        "matmul": 2 * scores * dim + 2 * scores * dim_v,
        "scale": scale_elements,
        "mask": scores if mask else 0,
        "softmax": softmax_flops(scores, bh * length_q),
        "dropout": scores if dropout else 0,
    }


def sdpa_cpu_breakdown(q: Any, k: Any, v: Any, *, mask: bool, dropout: bool) -> dict[str, int]:
    """Parts of ``_scaled_dot_product_flash_attention_for_cpu`` for shapes q (..., H, L, D),
    k (..., Hkv, S, D), v (..., Hkv, S, Dv). Grouped-query attention broadcasts the Hkv heads to the
    H query heads, so every count uses the query's heads. The kernel scales the B*H*L*S scores."""
    bh = math.prod(q[:-2])
    length_q, dim = q[-2], q[-1]
    length_kv = k[-2]
    dim_v = v[-1]
    return attention_core(bh, length_q, length_kv, dim, dim_v,
                          scale_elements=bh * length_q * length_kv, mask=mask, dropout=dropout)


@register("_scaled_dot_product_flash_attention_for_cpu", family="attention")
def sdpa_flash_cpu_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``_scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout_p, is_causal, *, attn_mask, scale)``.

    4*B*H*L*S*D (dense convention, D = Dv) for Q K^T and P V, plus B*H*L*S for the scaling, B*H*L*S
    for an ``attn_mask``, softmax 3*B*H*L*S - B*H*L and B*H*L*S for dropout when dropout_p > 0.
    ``is_causal`` does not change the count (dense convention, as PyTorch's ``sdpa_flop_count``).
    Source: PyTorch's FlashAttentionKernel.cpp (scores scaled, masked, exponentiated, summed,
    divided) and torch.utils.flop_counter.sdpa_flop_count.
    """
    q, k, v = args[0], args[1], args[2]
    dropout_p = arg(args, kwargs, 3, "dropout_p", 0.0) or 0.0
    mask = kwargs.get("attn_mask") is not None
    return sum(sdpa_cpu_breakdown(q, k, v, mask=mask, dropout=dropout_p > 0).values())


@register("_scaled_dot_product_fused_attention_overrideable", family="attention")
def sdpa_overrideable_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``_scaled_dot_product_fused_attention_overrideable(q, k, v, attn_bias, dropout_p, ...)``
    (out-of-tree backends): the same count as the CPU flash kernel."""
    q, k, v = args[0], args[1], args[2]
    bias = arg(args, kwargs, 3, "attn_bias")
    dropout_p = arg(args, kwargs, 4, "dropout_p", 0.0) or 0.0
    return sum(sdpa_cpu_breakdown(q, k, v, mask=bias is not None, dropout=dropout_p > 0).values())


# --- raw-argument kernels (nested tensors allowed) --------------------------------------------


def sequence_lengths(t: Any) -> list[int]:
    """Per-sequence lengths of a (B, L, E) tensor, a nested (B, j, E) tensor, a shape or an (L, E)
    unbatched tensor."""
    if isinstance(t, torch.Tensor) and t.is_nested:
        sizes = t._nested_tensor_size()
        return [int(row[0]) for row in sizes.tolist()]
    shape = t if is_shape(t) else getattr(t, "shape", None)
    if shape is None:
        return []
    if len(shape) == 3:
        return [int(shape[1])] * int(shape[0])
    if len(shape) == 2:
        return [int(shape[0])]
    return []


def native_mha_breakdown(lengths_q: list[int], lengths_kv: list[int], embed_dim: int, num_heads: int, *,
                         mask: bool, need_weights: bool, average_weights: bool) -> dict[str, int]:
    """Parts of ``_native_multi_head_attention`` for the given sequence lengths.

    * ``matmul``: q projection 2*L*E^2, k and v projections 2*2*S*E^2, scores and weighted sum
      4*H*L*S*d (= 4*L*S*E), output projection 2*L*E^2, per sequence (biases folded in);
    * ``scale``: without a mask and without weights the kernel runs fused SDPA, which scales the
      H*L*S scores; otherwise ``_transform_bias_rescale_qkv`` scales q (L*E);
    * ``mask``: H*L*S per sequence with a mask; ``softmax``: 3*H*L*S - H*L;
    * ``average``: H*L*S (H - 1 additions over heads, one division) when averaged weights are returned.
    """
    e, h = embed_dim, num_heads
    d = e // h if h else 0
    parts = {"matmul": 0, "scale": 0, "mask": 0, "softmax": 0, "dropout": 0, "average": 0}
    sdpa_path = not need_weights and not mask
    for length_q, length_kv in zip(lengths_q, lengths_kv):
        scale = h * length_q * length_kv if sdpa_path else length_q * e
        core = attention_core(h, length_q, length_kv, d, d, scale_elements=scale, mask=mask, dropout=False)
        for key, value in core.items():
            parts[key] += value
        parts["matmul"] += 2 * length_q * e * e + 4 * length_kv * e * e + 2 * length_q * e * e
        if need_weights and average_weights:
            parts["average"] += h * length_q * length_kv
    return parts


def _mha_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    names = ("query", "key", "value", "embed_dim", "num_head", "qkv_weight", "qkv_bias", "proj_weight",
             "proj_bias", "mask", "need_weights", "average_attn_weights", "mask_type")
    defaults = {"mask": None, "need_weights": True, "average_attn_weights": True, "mask_type": None}
    return {name: arg(args, kwargs, i, name, defaults.get(name)) for i, name in enumerate(names)}


def native_mha_flop(*args: Any, out_val: Any = None, **kwargs: Any) -> int:
    """``_native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
    proj_weight, proj_bias, mask, need_weights, average_attn_weights, mask_type)``: the fused
    ``nn.MultiheadAttention`` fast path.

    Per sequence of query length L and key length S, E = embed_dim, H heads:
    projections 2*L*E^2 + 4*S*E^2 + output 2*L*E^2; scores and weighted sum 4*L*S*E; scaling
    (H*L*S on the fused-SDPA path used without mask and weights, else L*E); mask H*L*S; softmax
    3*H*L*S - H*L; averaged weights H*L*S. Source: PyTorch's attention.cpp
    (``native_multi_head_attention_cpu``), derived term by term.
    """
    a = _mha_args(args, kwargs)
    lengths_q = sequence_lengths(a["query"])
    lengths_kv = sequence_lengths(a["key"])
    parts = native_mha_breakdown(lengths_q, lengths_kv, int(a["embed_dim"]), int(a["num_head"]),
                                 mask=a["mask"] is not None, need_weights=bool(a["need_weights"]),
                                 average_weights=bool(a["average_attn_weights"]))
    return sum(parts.values())


native_mha_flop._get_raw = True  # type: ignore[attr-defined]
register("_native_multi_head_attention", family="attention")(native_mha_flop)


_ENCODER_NAMES = ("src", "embed_dim", "num_heads", "qkv_weight", "qkv_bias", "proj_weight", "proj_bias",
                  "use_gelu", "norm_first", "eps", "norm_weight_1", "norm_bias_1", "norm_weight_2",
                  "norm_bias_2", "ffn_weight_1", "ffn_bias_1", "ffn_weight_2", "ffn_bias_2", "mask",
                  "mask_type")


def encoder_layer_breakdown(lengths: list[int], embed_dim: int, num_heads: int, ffn_dim: int, *,
                            use_gelu: bool, mask: bool, norm_affine: tuple[bool, bool, bool, bool] = (True,) * 4
                            ) -> dict[str, int]:
    """Parts of ``_transformer_encoder_layer_fwd`` (one ``nn.TransformerEncoderLayer`` on its fast
    path) for the given sequence lengths: self-attention as ``native_mha_breakdown`` with
    ``need_weights=False``; two residual additions (T*E each); two LayerNorms (6N + 2T + affine,
    N = T*E); the feed-forward products 2*T*E*F twice and the activation on T*F elements (ReLU 1,
    GELU 5); T = total tokens."""
    parts = native_mha_breakdown(lengths, lengths, embed_dim, num_heads, mask=mask, need_weights=False,
                                 average_weights=False)
    tokens = sum(lengths)
    n = tokens * embed_dim
    w1, b1, w2, b2 = norm_affine
    parts["residual"] = 2 * n
    parts["layer_norm"] = layer_norm_flops(n, tokens, w1, b1) + layer_norm_flops(n, tokens, w2, b2)
    parts["matmul"] += 2 * 2 * tokens * embed_dim * ffn_dim
    parts["activation"] = (GELU_ERF if use_gelu else RELU) * tokens * ffn_dim
    return parts


def transformer_encoder_layer_flop(*args: Any, out_val: Any = None, **kwargs: Any) -> int:
    """``_transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
    proj_bias, use_gelu, norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2,
    ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask, mask_type)``: a whole
    ``nn.TransformerEncoderLayer`` on its fused fast path.

    For T tokens (summed over the sequences of a nested input), E = embed_dim, F = feed-forward width:
    self-attention (``_native_multi_head_attention`` with need_weights=False), 2 residual additions
    2*T*E, two LayerNorms 2*(8*T*E + 2*T), feed-forward 4*T*E*F and the activation T*F (ReLU) or
    5*T*F (GELU). ``norm_first`` only reorders the same work. Source: PyTorch's transformer.cpp
    (``transformer_encoder_layer_forward``), derived term by term.
    """
    a = {name: arg(args, kwargs, i, name) for i, name in enumerate(_ENCODER_NAMES)}
    lengths = sequence_lengths(a["src"])
    ffn_weight = a["ffn_weight_1"]
    ffn_dim = int(ffn_weight.shape[0]) if ffn_weight is not None else 0
    affine = tuple(a[name] is not None for name in ("norm_weight_1", "norm_bias_1", "norm_weight_2", "norm_bias_2"))
    parts = encoder_layer_breakdown(lengths, int(a["embed_dim"]), int(a["num_heads"]), ffn_dim,
                                    use_gelu=bool(a["use_gelu"]), mask=a["mask"] is not None,
                                    norm_affine=affine)  # type: ignore[arg-type]
    return sum(parts.values())


transformer_encoder_layer_flop._get_raw = True  # type: ignore[attr-defined]
register("_transformer_encoder_layer_fwd", family="attention")(transformer_encoder_layer_flop)

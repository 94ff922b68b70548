"""``nn.MultiheadAttention``.

The call's ordered inputs are ``(query, key, value, key_padding_mask, need_weights, attn_mask,
average_attn_weights, is_causal)``. Layout: ``batch_first`` → ``(B, L, E)``, else ``(L, B, E)``;
an unbatched ``(L, E)`` call has ``B = 1``. ``T`` query length, ``S`` key length, ``E = embed_dim``,
``H`` heads, ``hd = E / H``, ``Ek``/``Ev`` key/value widths (``kdim``/``vdim``), ``pb`` = 1 when the
input projection has a bias. ``add_bias_kv`` and ``add_zero_attn`` each append one key/value
position after the projections: the attention stages then use ``S' = S + [bias_k] + [zero_attn]``
(the reference refused these; we count them).

FLOPs (the reference contract's, unchanged for what it supports; docs/formulas.md):
input projections ``Σ_{q,k,v} tokens·E·(2·width − 1 + pb)``; query scaling ``1 + B·H·T·hd``;
scores ``B·H·T·S'·(2·hd − 1)``; each mask present (key padding, attention) ``B·H·T·S'``; softmax
``B·H·T·(3·S' − 1)``; dropout in training ``B·H·T·S'``; weighted values ``B·H·T·hd·(2·S' − 1)``;
output projection (the Linear formula on ``B·T`` tokens); averaged attention weights ``B·H·T·S'``
when weights are returned averaged. Whether weights are returned is read from the whole output
(``out[1]`` a 3-D tensor, as the reference does) or, when ``out`` is a tensor, from the
``need_weights``/``average_attn_weights`` inputs.

MACs, from the matrix dimensions (not FLOPs/2): ``B·T·E·E`` (query projection, ``E`` wide),
``B·S·E·Ek`` and ``B·S·E·Ev`` (key and value projections), ``B·H·T·S'·hd`` twice (scores and
weighted sum, i.e. ``B·T·S'·E`` each) and ``B·T·E·E`` (output projection). Scaling, masks, softmax
and the weight averaging are element-wise, not MACs. Masks do not reduce the count (the dense work
is done; ``is_causal`` is only a hint to the kernel). For ``E = 16, H = 2``, self-attention on
``(1, 10, 16)``: 3·2560 + 1600 + 1600 + 2560 = 13440 (case P04), and ``FlopCounterMode`` counts
``2·MACs`` on the meta device, where the module decomposes into ``addmm`` and ``bmm``.

DMAs, a staged logical algorithm (each stage reads its operands and writes its result once; stages
are not fused):

1. projections: for each of q, k, v read the input and its weight slice (and bias), write the
   projected tensor (``B·T·E`` / ``B·S·E``) — three reads of the input in self-attention, since
   each projection is its own stage;
2. ``add_bias_kv`` reads ``bias_k``/``bias_v`` (2E) and writes ``2·B·E``; ``add_zero_attn`` writes
   ``2·B·E``;
3. scores: read Q (``B·T·E``) and K (``B·S'·E``) and the masks given (their element counts), write
   ``B·H·T·S'`` (the scaling is folded into this stage);
4. softmax: read and write ``B·H·T·S'`` and write/read one sum per row (``2·B·H·T``);
5. dropout in training: read and write ``B·H·T·S'``;
6. weighted sum: read the probabilities ``B·H·T·S'`` and V (``B·S'·E``), write ``B·T·E``;
7. output projection: read ``B·T·E``, the weight and bias, write ``B·T·E``;
8. averaged weights returned: read ``B·H·T·S'``, write ``B·T·S'`` (per-head weights are the
   probabilities already written).

``module_macs``/``module_dmas`` receive only the query tensor: pass ``inputs=`` (the ordered tuple)
for cross-attention, masks and ``need_weights``. Without it the call is taken to be the default
self-attention call ``mha(x, x, x)`` (key and value shaped like the query, no masks, averaged
weights returned).

Receptive field: not defined (every query attends to every key); the formula warns and the crawler
reports it unavailable — token dependencies describe attention instead (docs/report-schema.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ._common import ShapeOnly, arg, as_inputs, numel, rf_undefined, shape
from ._registry import Family
from .linear import dmas_linear, flops_linear, macs_linear

__all__ = [
    "AttentionCall",
    "attention_call",
    "dmas_mha",
    "flops_mha",
    "macs_mha",
    "rf_mha",
]


@dataclass(frozen=True)
class AttentionCall:
    """The shapes and flags of one MultiheadAttention call."""

    batch: int
    tgt_len: int
    src_len: int  # S: key length before bias_k / zero-attention positions
    extra_kv: int  # appended key/value positions (add_bias_kv, add_zero_attn)
    q_width: int
    k_width: int
    v_width: int
    mask_elements: tuple[int, ...]  # element count of each mask given
    return_weights: bool  # weights returned at all
    average_weights: bool  # returned averaged over heads
    training_dropout: bool

    @property
    def keys(self) -> int:
        return self.src_len + self.extra_kv


def _layout(module: nn.MultiheadAttention, t, what: str) -> tuple[int, int, int]:
    """(batch, length, width) of a query/key/value tensor."""
    dims = shape(t)
    if len(dims) == 3:
        if module.batch_first:
            return dims[0], dims[1], dims[2]
        return dims[1], dims[0], dims[2]
    if len(dims) == 2:
        return 1, dims[0], dims[1]
    raise NotImplementedError(
        f"MultiheadAttention formulas support 2-D (unbatched) or 3-D inputs; {what} is {len(dims)}-D."
    )


def _mask_elements(value) -> int | None:
    return numel(value) if isinstance(value, (torch.Tensor, ShapeOnly)) else None


def attention_call(module: nn.MultiheadAttention, inputs, out=None) -> AttentionCall:
    """Read an ordered MultiheadAttention call (see the module docstring for the defaults)."""
    inputs = as_inputs(inputs)
    query = arg(inputs, 0)
    if query is None or not hasattr(query, "shape"):
        raise ValueError("MultiheadAttention formulas need the query tensor.")
    key = arg(inputs, 1)
    key = query if key is None else key
    value = arg(inputs, 2)
    value = key if value is None else value
    batch, tgt_len, q_width = _layout(module, query, "query")
    _, src_len, k_width = _layout(module, key, "key")
    _, _, v_width = _layout(module, value, "value")
    masks = tuple(m for m in (_mask_elements(arg(inputs, 3)), _mask_elements(arg(inputs, 5))) if m is not None)
    if isinstance(out, (tuple, list)):
        weights = out[1] if len(out) > 1 else None
        return_weights = isinstance(weights, (torch.Tensor, ShapeOnly))
        # averaged weights have the query's rank; per-head weights have one more axis
        average = return_weights and len(shape(weights)) == len(shape(query))
    else:
        return_weights = bool(arg(inputs, 4, True))
        average = return_weights and bool(arg(inputs, 6, True))
    extra_kv = (module.bias_k is not None) + bool(module.add_zero_attn)
    return AttentionCall(
        batch=batch,
        tgt_len=tgt_len,
        src_len=src_len,
        extra_kv=extra_kv,
        q_width=q_width,
        k_width=k_width,
        v_width=v_width,
        mask_elements=masks,
        return_weights=return_weights,
        average_weights=average,
        training_dropout=bool(module.training and module.dropout > 0),
    )


def _out_proj_shapes(module, call: AttentionCall):
    tokens = call.batch * call.tgt_len
    return ShapeOnly((tokens, module.embed_dim)), ShapeOnly((tokens, module.embed_dim))


def flops_mha(module: nn.MultiheadAttention, inputs, out=None) -> int:
    """The reference contract's terms (see the module docstring)."""
    call = attention_call(module, inputs, out)
    b, t, s, e, h = call.batch, call.tgt_len, call.keys, module.embed_dim, module.num_heads
    hd = module.head_dim
    pb = int(module.in_proj_bias is not None)
    flops = 0
    for length, width in ((t, call.q_width), (call.src_len, call.k_width), (call.src_len, call.v_width)):
        flops += b * length * e * (2 * width - 1 + pb)
    flops += 1 + b * h * t * hd  # scaling
    flops += b * h * t * s * (2 * hd - 1)  # scores
    flops += len(call.mask_elements) * b * h * t * s  # masks
    flops += b * h * t * (3 * s - 1)  # softmax
    if call.training_dropout:
        flops += b * h * t * s
    flops += b * h * t * hd * (2 * s - 1)  # weighted values
    flops += flops_linear(module.out_proj, (ShapeOnly((b * t, e)),))
    if call.average_weights:
        flops += b * h * t * s
    return flops


def _macs(module: nn.MultiheadAttention, call: AttentionCall) -> int:
    b, t, e = call.batch, call.tgt_len, module.embed_dim
    projections = b * t * e * call.q_width + b * call.src_len * e * (call.k_width + call.v_width)
    attention = 2 * b * t * call.keys * e
    x, y = _out_proj_shapes(module, call)
    return projections + attention + macs_linear(module.out_proj, x, y)


def _tensor_inputs(x, inputs) -> tuple:
    return as_inputs(inputs) if inputs is not None else (x,)


def macs_mha(module: nn.MultiheadAttention, x, y=None, *, inputs=None) -> int:
    """Matrix-dimension MACs (see the module docstring)."""
    return _macs(module, attention_call(module, _tensor_inputs(x, inputs)))


def _dmas(module: nn.MultiheadAttention, call: AttentionCall) -> int:
    b, t, s, e, h = call.batch, call.tgt_len, call.keys, module.embed_dim, module.num_heads
    pb = e if module.in_proj_bias is not None else 0
    scores = b * h * t * s
    # 1. projections
    dmas = b * t * call.q_width + e * call.q_width + pb + b * t * e
    dmas += b * call.src_len * call.k_width + e * call.k_width + pb + b * call.src_len * e
    dmas += b * call.src_len * call.v_width + e * call.v_width + pb + b * call.src_len * e
    # 2. appended key/value positions
    if module.bias_k is not None:
        dmas += numel(module.bias_k) + numel(module.bias_v) + 2 * b * e
    if module.add_zero_attn:
        dmas += 2 * b * e
    # 3. scores (+ masks)
    dmas += b * t * e + b * s * e + sum(call.mask_elements) + scores
    # 4. softmax (+ row sums)
    dmas += 2 * scores + 2 * b * h * t
    # 5. dropout
    if call.training_dropout:
        dmas += 2 * scores
    # 6. weighted sum
    dmas += scores + b * s * e + b * t * e
    # 7. output projection
    dmas += dmas_linear(module.out_proj, *_out_proj_shapes(module, call))
    # 8. averaged weights
    if call.average_weights:
        dmas += scores + b * t * s
    return dmas


def dmas_mha(module: nn.MultiheadAttention, x, y=None, *, inputs=None) -> int:
    """Staged logical DMAs (see the module docstring)."""
    return _dmas(module, attention_call(module, _tensor_inputs(x, inputs)))


def rf_mha(module: nn.MultiheadAttention, x=None, y=None):
    """Not defined (warns)."""
    return rf_undefined(module, "every query attends to every key; see token dependencies.")


FAMILIES = [Family("multihead_attention", (nn.MultiheadAttention,), flops_mha, macs_mha, dmas_mha, rf_mha)]

"""Native Transformer modules: ``TransformerEncoderLayer``, ``TransformerDecoderLayer``, the stacks
``TransformerEncoder``/``TransformerDecoder`` and ``nn.Transformer``.

Each layer is priced as the sum of its stages, composed from the other families' formulas on shapes:

* encoder layer (``x`` = src, ``n = Nx``): self-attention on ``(x, x, x)`` with the source masks and
  no returned weights, ``dropout1``, residual add, ``norm1``, feed-forward, ``dropout2``, residual
  add, ``norm2``;
* decoder layer (``x`` = tgt, ``m`` = memory): self-attention with the target masks, ``dropout1``,
  residual, ``norm1``, cross-attention on ``(x, m, m)`` with the memory masks, ``dropout2``,
  residual, ``norm2``, feed-forward, ``dropout3``, residual, ``norm3``;
* feed-forward: ``linear1`` (tokens × ``dim_feedforward``), the activation, ``dropout``, ``linear2``;
* stacks: the sum of their layers plus the final ``norm`` when present; ``nn.Transformer``: the
  encoder stack on src, then the decoder stack on tgt with a memory shaped like src.

``norm_first`` only reorders stages, so it does not change any count; masks are counted as the
attention formulas count them and never reduce the dense work (nor does ``is_causal``, nor the
nested-tensor fast path that skips padded tokens in evaluation).

FLOPs (the reference contract's; docs/formulas.md): attention by ``flops_mha``, each residual add ``n``, each norm by
``flops_layernorm``, each dropout by ``flops_dropout`` (0 in evaluation), the two linears by
``flops_linear``, the activation ``H`` for ReLU (``H = tokens·dim_feedforward``). Verified: for
``d_model=4, nhead=2, dim_feedforward=8, dropout=0`` on src ``(1, 3, 4)``/tgt ``(1, 2, 4)`` the
encoder layer is 1195, the decoder layer 1270, the whole ``nn.Transformer`` 2635 and 2711 with all
six masks. Beyond the reference (which accepted only ``F.relu``), the activation may be ``F.gelu``
(5 per element) or any element-wise activation module of ``activation.py``; anything else raises.

MACs, from matrix dimensions: the attention MACs of ``macs_mha`` plus ``linear1`` and ``linear2``
(norms, residuals, activations and dropout have none). ``TransformerEncoderLayer(32, 4, 64)`` on
``(1, 8, 32)``: 24576 + 4096 + 8192 + 2·16384 = 69632 (case P05).

DMAs, the staged logical algorithm: the attention stages of ``dmas_mha``; each residual add reads two
tensors and writes one (``3n``); each norm by ``dmas_layernorm``; the feed-forward as ``linear1``,
activation (read and write ``H``), dropout, ``linear2``; evaluation-mode dropout is elided (0).

Inputs. ``module_flops`` receives the ordered inputs. For ``module_macs``/``module_dmas`` pass
``inputs=`` as well: the decoder layer and decoder stack need the memory (input 1) and raise without
it; encoder modules and ``nn.Transformer`` work from ``x`` (src) and ``y`` (the output, shaped like
tgt) alone, with no masks assumed.

Receptive field: not defined (attention mixes every token); the formula warns and the crawler
reports it unavailable.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from ._common import ShapeOnly, arg, as_inputs, input_tensor, numel, rf_undefined, shape
from ._registry import Family
from .activation import ELEMENTWISE_COSTS, dmas_activation, elementwise_cost
from .attention import dmas_mha, flops_mha, macs_mha
from .dropout import dmas_dropout, flops_dropout
from .linear import dmas_linear, flops_linear, macs_linear
from .norm import dmas_layernorm, flops_layernorm

__all__ = [
    "dmas_transformer",
    "dmas_transformer_decoder",
    "dmas_transformer_decoderlayer",
    "dmas_transformer_encoder",
    "dmas_transformer_encoderlayer",
    "flops_transformer",
    "flops_transformer_decoder",
    "flops_transformer_decoderlayer",
    "flops_transformer_encoder",
    "flops_transformer_encoderlayer",
    "flops_transformer_feedforward",
    "macs_transformer",
    "macs_transformer_decoder",
    "macs_transformer_decoderlayer",
    "macs_transformer_encoder",
    "macs_transformer_encoderlayer",
    "rf_transformer",
]

_ACTIVATION_MODULES = tuple(row[0] for row in ELEMENTWISE_COSTS)


def _activation_cost(layer: nn.Module) -> int:
    """FLOPs per element of a layer's feed-forward activation."""
    act = layer.activation
    if act is F.relu:
        return 1
    if act is F.gelu:
        return 5
    if isinstance(act, _ACTIVATION_MODULES):
        return elementwise_cost(act)
    name = getattr(act, "__name__", type(act).__name__)
    raise NotImplementedError(
        f"Transformer formulas support the relu and gelu activations and element-wise activation modules; got {name}."
    )


def _hidden(layer: nn.Module, x) -> ShapeOnly:
    return ShapeOnly((*shape(x)[:-1], layer.linear1.out_features))


def _residual_dmas(x) -> int:
    return 3 * numel(x)


def _memory(inputs, index: int, what: str):
    memory = arg(as_inputs(inputs) if inputs is not None else (), index)
    if memory is None or not hasattr(memory, "shape"):
        raise ValueError(f"{what} formulas need the memory tensor: pass inputs=(tgt, memory, ...).")
    return memory


# ---------------------------------------------------------------- feed-forward


def flops_transformer_feedforward(layer: nn.Module, x) -> int:
    """``linear1 + act·H + dropout + linear2`` with ``H = tokens·dim_feedforward``."""
    hidden = _hidden(layer, x)
    flops = flops_linear(layer.linear1, (x,))
    flops += _activation_cost(layer) * numel(hidden)
    flops += flops_dropout(layer.dropout, (hidden,))
    return flops + flops_linear(layer.linear2, (hidden,))


def _ff_macs(layer: nn.Module, x) -> int:
    hidden = _hidden(layer, x)
    return macs_linear(layer.linear1, x, hidden) + macs_linear(layer.linear2, hidden, x)


def _ff_dmas(layer: nn.Module, x) -> int:
    hidden = _hidden(layer, x)
    _activation_cost(layer)  # same support check as FLOPs
    act = layer.activation
    act_dmas = dmas_activation(act, hidden, hidden) if isinstance(act, nn.Module) else 2 * numel(hidden)
    return (
        dmas_linear(layer.linear1, x, hidden)
        + act_dmas
        + dmas_dropout(layer.dropout, hidden, hidden)
        + dmas_linear(layer.linear2, hidden, x)
    )


# ---------------------------------------------------------------- encoder layer


def _encoder_args(inputs, x=None):
    inputs = as_inputs(inputs) if inputs is not None else (x,)
    src = input_tensor(inputs)
    return src, arg(inputs, 1), arg(inputs, 2)


def flops_transformer_encoderlayer(layer: nn.TransformerEncoderLayer, inputs, out=None) -> int:
    """Encoder layer FLOPs; ``inputs = (src, src_mask, src_key_padding_mask, ...)``."""
    x, mask, padding = _encoder_args(inputs)
    n = numel(x)
    flops = flops_mha(layer.self_attn, (x, x, x, padding, False, mask))
    flops += flops_dropout(layer.dropout1, (x,)) + n + flops_layernorm(layer.norm1, (x,))
    flops += flops_transformer_feedforward(layer, x)
    flops += flops_dropout(layer.dropout2, (x,)) + n + flops_layernorm(layer.norm2, (x,))
    return flops


def macs_transformer_encoderlayer(layer: nn.TransformerEncoderLayer, x, y=None, *, inputs=None) -> int:
    """Self-attention MACs + feed-forward MACs."""
    x, mask, padding = _encoder_args(inputs, x)
    return macs_mha(layer.self_attn, x, inputs=(x, x, x, padding, False, mask)) + _ff_macs(layer, x)


def dmas_transformer_encoderlayer(layer: nn.TransformerEncoderLayer, x, y=None, *, inputs=None) -> int:
    """Staged DMAs of the encoder layer."""
    x, mask, padding = _encoder_args(inputs, x)
    dmas = dmas_mha(layer.self_attn, x, inputs=(x, x, x, padding, False, mask))
    dmas += dmas_dropout(layer.dropout1, x, x) + _residual_dmas(x) + dmas_layernorm(layer.norm1, x, x)
    dmas += _ff_dmas(layer, x)
    dmas += dmas_dropout(layer.dropout2, x, x) + _residual_dmas(x) + dmas_layernorm(layer.norm2, x, x)
    return dmas


# ---------------------------------------------------------------- decoder layer


def _decoder_args(inputs, x=None, what="TransformerDecoderLayer"):
    memory = _memory(inputs, 1, what)
    inputs = as_inputs(inputs)
    tgt = input_tensor(inputs)
    # (tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask)
    return tgt, memory, arg(inputs, 2), arg(inputs, 3), arg(inputs, 4), arg(inputs, 5)


def flops_transformer_decoderlayer(layer: nn.TransformerDecoderLayer, inputs, out=None) -> int:
    """Decoder layer FLOPs; ``inputs = (tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
    memory_key_padding_mask, ...)``."""
    x, m, tgt_mask, mem_mask, tgt_pad, mem_pad = _decoder_args(inputs)
    n = numel(x)
    flops = flops_mha(layer.self_attn, (x, x, x, tgt_pad, False, tgt_mask))
    flops += flops_dropout(layer.dropout1, (x,)) + n + flops_layernorm(layer.norm1, (x,))
    flops += flops_mha(layer.multihead_attn, (x, m, m, mem_pad, False, mem_mask))
    flops += flops_dropout(layer.dropout2, (x,)) + n + flops_layernorm(layer.norm2, (x,))
    flops += flops_transformer_feedforward(layer, x)
    flops += flops_dropout(layer.dropout3, (x,)) + n + flops_layernorm(layer.norm3, (x,))
    return flops


def macs_transformer_decoderlayer(layer: nn.TransformerDecoderLayer, x, y=None, *, inputs=None) -> int:
    """Self-attention + cross-attention + feed-forward MACs (needs ``inputs=`` for the memory)."""
    x, m, tgt_mask, mem_mask, tgt_pad, mem_pad = _decoder_args(inputs, x)
    macs = macs_mha(layer.self_attn, x, inputs=(x, x, x, tgt_pad, False, tgt_mask))
    macs += macs_mha(layer.multihead_attn, x, inputs=(x, m, m, mem_pad, False, mem_mask))
    return macs + _ff_macs(layer, x)


def dmas_transformer_decoderlayer(layer: nn.TransformerDecoderLayer, x, y=None, *, inputs=None) -> int:
    """Staged DMAs of the decoder layer (needs ``inputs=`` for the memory)."""
    x, m, tgt_mask, mem_mask, tgt_pad, mem_pad = _decoder_args(inputs, x)
    dmas = dmas_mha(layer.self_attn, x, inputs=(x, x, x, tgt_pad, False, tgt_mask))
    dmas += dmas_dropout(layer.dropout1, x, x) + _residual_dmas(x) + dmas_layernorm(layer.norm1, x, x)
    dmas += dmas_mha(layer.multihead_attn, x, inputs=(x, m, m, mem_pad, False, mem_mask))
    dmas += dmas_dropout(layer.dropout2, x, x) + _residual_dmas(x) + dmas_layernorm(layer.norm2, x, x)
    dmas += _ff_dmas(layer, x)
    dmas += dmas_dropout(layer.dropout3, x, x) + _residual_dmas(x) + dmas_layernorm(layer.norm3, x, x)
    return dmas


# ---------------------------------------------------------------- stacks


def _native_layers(stack: nn.Module, cls: type) -> list:
    layers = list(stack.layers)
    for layer in layers:
        if not isinstance(layer, cls):
            raise NotImplementedError(
                f"{type(stack).__name__} formulas only support stacks of native {cls.__name__} layers; "
                f"got {type(layer).__name__}."
            )
    return layers


def _final_norm(metric: str, stack: nn.Module, x) -> int:
    norm = getattr(stack, "norm", None)
    if norm is None:
        return 0
    if metric == "flops":
        return flops_layernorm(norm, (x,))
    if metric == "dmas":
        return dmas_layernorm(norm, x, x)
    return 0


def _encoder_stack(metric: str, stack: nn.TransformerEncoder, src, mask, padding) -> int:
    total = 0
    for layer in _native_layers(stack, nn.TransformerEncoderLayer):
        call = (src, mask, padding)
        if metric == "flops":
            total += flops_transformer_encoderlayer(layer, call)
        elif metric == "macs":
            total += macs_transformer_encoderlayer(layer, src, inputs=call)
        else:
            total += dmas_transformer_encoderlayer(layer, src, inputs=call)
    return total + _final_norm(metric, stack, src)


def _decoder_stack(metric: str, stack: nn.TransformerDecoder, tgt, memory, masks: tuple) -> int:
    total = 0
    for layer in _native_layers(stack, nn.TransformerDecoderLayer):
        call = (tgt, memory, *masks)
        if metric == "flops":
            total += flops_transformer_decoderlayer(layer, call)
        elif metric == "macs":
            total += macs_transformer_decoderlayer(layer, tgt, inputs=call)
        else:
            total += dmas_transformer_decoderlayer(layer, tgt, inputs=call)
    return total + _final_norm(metric, stack, tgt)


def _encoder_call(metric, stack, inputs, x=None) -> int:
    src, mask, padding = _encoder_args(inputs, x)
    return _encoder_stack(metric, stack, src, mask, padding)


def flops_transformer_encoder(stack: nn.TransformerEncoder, inputs, out=None) -> int:
    """Σ encoder layers + final norm; ``inputs = (src, mask, src_key_padding_mask, ...)``."""
    return _encoder_call("flops", stack, inputs)


def macs_transformer_encoder(stack: nn.TransformerEncoder, x, y=None, *, inputs=None) -> int:
    """Σ encoder layer MACs."""
    return _encoder_call("macs", stack, inputs, x)


def dmas_transformer_encoder(stack: nn.TransformerEncoder, x, y=None, *, inputs=None) -> int:
    """Σ encoder layer DMAs + final norm."""
    return _encoder_call("dmas", stack, inputs, x)


def _decoder_call(metric, stack, inputs, x=None) -> int:
    tgt, memory, *masks = _decoder_args(inputs, x, "TransformerDecoder")
    return _decoder_stack(metric, stack, tgt, memory, tuple(masks))


def flops_transformer_decoder(stack: nn.TransformerDecoder, inputs, out=None) -> int:
    """Σ decoder layers + final norm; ``inputs = (tgt, memory, tgt_mask, memory_mask,
    tgt_key_padding_mask, memory_key_padding_mask, ...)``."""
    return _decoder_call("flops", stack, inputs)


def macs_transformer_decoder(stack: nn.TransformerDecoder, x, y=None, *, inputs=None) -> int:
    """Σ decoder layer MACs (needs ``inputs=`` for the memory)."""
    return _decoder_call("macs", stack, inputs, x)


def dmas_transformer_decoder(stack: nn.TransformerDecoder, x, y=None, *, inputs=None) -> int:
    """Σ decoder layer DMAs + final norm (needs ``inputs=`` for the memory)."""
    return _decoder_call("dmas", stack, inputs, x)


# ---------------------------------------------------------------- nn.Transformer


def _transformer(metric: str, module: nn.Transformer, inputs, x=None, y=None) -> int:
    if not isinstance(module.encoder, nn.TransformerEncoder) or not isinstance(module.decoder, nn.TransformerDecoder):
        raise NotImplementedError("Transformer FLOPs only support the native encoder and decoder stacks.")
    if inputs is None:
        if x is None or y is None:
            raise ValueError("Transformer formulas need src and tgt: pass inputs=(src, tgt, ...).")
        inputs = (x, y)  # the output is shaped like tgt
    inputs = as_inputs(inputs)
    src, tgt = arg(inputs, 0), arg(inputs, 1)
    if src is None or tgt is None:
        raise ValueError("Transformer formulas need src and tgt: pass inputs=(src, tgt, ...).")
    src_mask, tgt_mask, memory_mask = arg(inputs, 2), arg(inputs, 3), arg(inputs, 4)
    src_pad, tgt_pad, memory_pad = arg(inputs, 5), arg(inputs, 6), arg(inputs, 7)
    total = _encoder_stack(metric, module.encoder, src, src_mask, src_pad)
    memory = ShapeOnly(shape(src))  # the encoder output has src's shape
    total += _decoder_stack(metric, module.decoder, tgt, memory, (tgt_mask, memory_mask, tgt_pad, memory_pad))
    return total


def flops_transformer(module: nn.Transformer, inputs, out=None) -> int:
    """Encoder stack on src + decoder stack on tgt (memory shaped like src); ``inputs = (src, tgt,
    src_mask, tgt_mask, memory_mask, src_key_padding_mask, tgt_key_padding_mask,
    memory_key_padding_mask, ...)``."""
    return _transformer("flops", module, inputs)


def macs_transformer(module: nn.Transformer, x, y=None, *, inputs=None) -> int:
    """Encoder + decoder MACs (from ``x`` = src and ``y`` shaped like tgt when ``inputs`` is None)."""
    return _transformer("macs", module, inputs, x, y)


def dmas_transformer(module: nn.Transformer, x, y=None, *, inputs=None) -> int:
    """Encoder + decoder staged DMAs."""
    return _transformer("dmas", module, inputs, x, y)


def rf_transformer(module: nn.Module, x=None, y=None):
    """Not defined (warns)."""
    return rf_undefined(module, "attention mixes every token; see token dependencies.")


FAMILIES = [
    Family("transformer", (nn.Transformer,), flops_transformer, macs_transformer, dmas_transformer, rf_transformer),
    Family("transformer_encoder", (nn.TransformerEncoder,), flops_transformer_encoder, macs_transformer_encoder,
           dmas_transformer_encoder, rf_transformer),
    Family("transformer_decoder", (nn.TransformerDecoder,), flops_transformer_decoder, macs_transformer_decoder,
           dmas_transformer_decoder, rf_transformer),
    Family("transformer_encoder_layer", (nn.TransformerEncoderLayer,), flops_transformer_encoderlayer,
           macs_transformer_encoderlayer, dmas_transformer_encoderlayer, rf_transformer),
    Family("transformer_decoder_layer", (nn.TransformerDecoderLayer,), flops_transformer_decoderlayer,
           macs_transformer_decoderlayer, dmas_transformer_decoderlayer, rf_transformer),
]

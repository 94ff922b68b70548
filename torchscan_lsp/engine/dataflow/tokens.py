"""Token dependencies: which query/target positions of an attention call depend on which key-value/source
positions (docs/report-schema.md, `token_dependencies`), recorded instead of a spatial receptive field.

A record (layer key ``token_dependencies``, documented in docs/report-schema.md)::

    {"dependencies": [{"stage": "self_attention",
                       "query_axis": {"role": "src", "dim": 1, "length": 8},
                       "key_axis": {"role": "src", "dim": 1, "length": 8},
                       "relation": "causal",
                       "reason": "src_mask is causal (key j visible to query i iff j <= i)"}]}

Relations: ``all_tokens`` (every query position sees every key position), ``causal`` (query ``i``
sees keys ``j <= i``: ``is_causal`` or a mask of that pattern), ``token_local`` (normalisation and
feed-forward: each position depends only on itself) and ``unknown`` (a mask that is neither
all-visible nor causal — a padding mask, a band, a block pattern — or mask values that cannot be
read, as on the meta device); ``unknown`` always comes with a reason, which the crawler turns into a
``token_dependencies_unknown`` diagnostic.

Mask conventions are PyTorch's: a boolean mask is ``True`` where attention is *not* allowed; a
float mask is added to the scores, so ``-inf`` (or a value at or below half the dtype's most
negative finite value, as libraries use for ``-inf``) blocks a pair and any other value is a bias that
leaves it visible.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn

from torchscan_lsp.engine.recording.tensor_shapes import component_shapes, regular_shape, unreadable_values

__all__ = ["KINDS_BY_CLASS", "token_dependencies", "mask_relation", "token_kind"]

ALL, CAUSAL, LOCAL, UNKNOWN = "all_tokens", "causal", "token_local", "unknown"


def _blocked(mask: torch.Tensor) -> torch.Tensor:
    """Boolean tensor: True where ``mask`` forbids attention."""
    if mask.dtype == torch.bool:
        return mask
    return mask <= torch.finfo(mask.dtype).min / 2


def mask_relation(
    name: str, mask: torch.Tensor | None, padding: torch.Tensor | None, is_causal: Any, q_len: int, k_len: int
) -> tuple[str, str]:
    """``(relation, reason)`` of one attention stage.

    Args:
        name: the mask argument's name (``attn_mask``, ``src_mask``, ...), for the reason.
        mask: an ``(L, S)`` mask or a stack of them (``(N·H, L, S)``, ``(N, H, L, S)``), or None.
        padding: a key padding mask ``(N, S)`` or ``(S,)``, or None.
        is_causal: the call's ``is_causal`` flag (a hint that the mask is causal).
        q_len, k_len: lengths of the query and key axes.
    """
    tensors = [t for t in (mask, padding) if isinstance(t, torch.Tensor)]
    unreadable = next((reason for reason in map(unreadable_values, tensors) if reason is not None), None)
    if unreadable is not None:
        if is_causal and padding is None:
            return CAUSAL, "is_causal=True"
        return UNKNOWN, unreadable
    if padding is not None:
        hidden = int(_blocked(padding).reshape(-1, padding.shape[-1]).any(dim=0).sum())
        if hidden:
            return UNKNOWN, f"the key padding mask hides {hidden} of {k_len} key positions"
    if is_causal:
        return CAUSAL, "is_causal=True"
    if mask is None:
        return ALL, "no attention mask"
    blocked = _blocked(mask).reshape(-1, mask.shape[-2], mask.shape[-1])
    if not bool(blocked.any()):
        biased = mask.dtype != torch.bool and bool(mask.ne(0).any())
        return ALL, f"{name} blocks no query/key pair" + (" (an additive bias only)" if biased else "")
    if mask.shape[-2] == mask.shape[-1] == q_len == k_len:
        future = torch.ones(q_len, k_len, dtype=torch.bool, device=mask.device).triu(1)
        if bool((blocked == future).all()):
            return CAUSAL, f"{name} is causal (key j visible to query i iff j <= i)"
    pairs = blocked.shape[-2] * blocked.shape[-1]
    count = int(blocked.sum()) // blocked.shape[0]
    return UNKNOWN, f"{name} blocks {count} of {pairs} query/key pairs in a pattern that is neither all-visible nor causal"


def _compose(outer: str, inner: str) -> str:
    """Relation of ``a <- c`` through ``a <- b`` (outer) and ``b <- c`` (inner) on aligned axes."""
    if UNKNOWN in (outer, inner):
        return UNKNOWN
    if outer == CAUSAL and inner == CAUSAL:
        return CAUSAL
    return ALL


_SIGNATURES: dict[type, inspect.Signature] = {}


def _bind(module: nn.Module, args: tuple, kwargs: dict) -> dict[str, Any]:
    cls = type(module)
    signature = _SIGNATURES.get(cls)
    if signature is None:
        signature = _SIGNATURES[cls] = inspect.signature(cls.forward)
    bound = signature.bind(module, *args, **kwargs)
    bound.apply_defaults()
    return bound.arguments


def _axis(role: str, tensor: Any, batch_first: bool) -> dict[str, Any]:
    """The token axis of ``tensor``: its dim and length. A nested tensor (a padded batch packed by
    ``TransformerEncoder``) has no single length: ``length`` is None and ``lengths`` lists each
    sequence's (dim 0 is the nesting axis, so component dim ``dim - 1``)."""
    if not isinstance(tensor, torch.Tensor):
        return {"role": role, "dim": None, "length": None}
    dim = 1 if batch_first and tensor.dim() == 3 else 0
    shape = regular_shape(tensor)
    if shape is not None:
        return {"role": role, "dim": dim, "length": int(shape[dim])}
    axis: dict[str, Any] = {"role": role, "dim": dim, "length": None}
    components = component_shapes(tensor)
    if components is not None and dim >= 1:
        axis["lengths"] = [int(sizes[dim - 1]) for sizes in components]
    return axis


def _stage(stage: str, query: dict, key: dict, relation: tuple[str, str]) -> dict[str, Any]:
    return {"stage": stage, "query_axis": query, "key_axis": key, "relation": relation[0], "reason": relation[1]}


def _batch_first(module: nn.Module) -> bool:
    if hasattr(module, "batch_first"):
        return bool(module.batch_first)
    for sub in module.modules():
        if isinstance(sub, nn.MultiheadAttention):
            return bool(sub.batch_first)
    return False


def _attention(a: dict, bf: bool, q: str, k: str, mask: str, pad: str, causal: str, stage: str) -> dict[str, Any]:
    query, key = _axis(q, a[q], bf), _axis(k, a[k], bf)
    return _stage(stage, query, key, mask_relation(mask, a[mask], a[pad], a[causal], query["length"], key["length"]))


def _mha(module: nn.Module, a: dict) -> list[dict[str, Any]]:
    bf = module.batch_first
    return [_attention(a, bf, "query", "key", "attn_mask", "key_padding_mask", "is_causal", "attention")]


def _encoder(module: nn.Module, a: dict) -> list[dict[str, Any]]:
    mask = "src_mask" if "src_mask" in a else "mask"
    return [_attention(a, _batch_first(module), "src", "src", mask, "src_key_padding_mask", "is_causal", "self_attention")]


def _decoder(module: nn.Module, a: dict) -> list[dict[str, Any]]:
    bf = _batch_first(module)
    return [
        _attention(a, bf, "tgt", "tgt", "tgt_mask", "tgt_key_padding_mask", "tgt_is_causal", "self_attention"),
        _attention(a, bf, "tgt", "memory", "memory_mask", "memory_key_padding_mask", "memory_is_causal", "cross_attention"),
    ]


def _transformer(module: nn.Module, a: dict) -> list[dict[str, Any]]:
    bf = module.batch_first
    encoder = _attention(a, bf, "src", "src", "src_mask", "src_key_padding_mask", "src_is_causal", "encoder_self_attention")
    decoder = _attention(a, bf, "tgt", "tgt", "tgt_mask", "tgt_key_padding_mask", "tgt_is_causal", "decoder_self_attention")
    memory = _attention(a, bf, "tgt", "src", "memory_mask", "memory_key_padding_mask", "memory_is_causal", "cross_attention")
    relation = _compose(memory["relation"], encoder["relation"])
    memory["relation"] = relation
    memory["reason"] = f"through the memory: cross-attention {memory['reason']}; encoder {encoder['reason']}"
    return [encoder, decoder, memory]


_LOCAL_REASONS = {
    "norm": "normalises each position over its own features",
    "linear": "transforms each position's features independently",
}


def _local(module: nn.Module, a: dict) -> list[dict[str, Any]]:
    axis = {"role": "tokens", "dim": None, "length": None}
    reason = _LOCAL_REASONS["linear" if isinstance(module, nn.Linear) else "norm"]
    return [_stage("token_local", axis, dict(axis), (LOCAL, f"{type(module).__name__} {reason}"))]


_RMSNorm = getattr(nn, "RMSNorm", ())
_KINDS: tuple[tuple[Any, Any], ...] = (
    (nn.Transformer, _transformer),
    ((nn.TransformerDecoder, nn.TransformerDecoderLayer), _decoder),
    ((nn.TransformerEncoder, nn.TransformerEncoderLayer), _encoder),
    (nn.MultiheadAttention, _mha),
    ((nn.LayerNorm, nn.Linear) + ((_RMSNorm,) if _RMSNorm else ()), _local),
)
#: class -> record builder or None, filled by :func:`token_kind` (read directly on the hot path).
KINDS_BY_CLASS: dict[type, Any] = {}


def token_kind(module: nn.Module) -> Any:
    """The record builder for ``module``'s class, or None (cached per class)."""
    cls = type(module)
    try:
        return KINDS_BY_CLASS[cls]
    except KeyError:
        pass
    found = next((fn for types, fn in _KINDS if issubclass(cls, types)), None)
    KINDS_BY_CLASS[cls] = found
    return found


def token_dependencies(module: nn.Module, args: tuple, kwargs: dict) -> dict[str, Any] | None:
    """The ``token_dependencies`` record of one call of ``module``, or None when it has none.

    Normalisation and ``Linear`` layers get a ``token_local`` record only for sequence-shaped inputs
    (three or more dimensions). Raises what binding the call raises (``TypeError``) for calls that
    do not match ``forward``'s signature.
    """
    builder = token_kind(module)
    if builder is None:
        return None
    if builder is _local:
        first = args[0] if args else next(iter(kwargs.values()), None)
        if not isinstance(first, torch.Tensor) or first.dim() < 3:
            return None
        return {"dependencies": _local(module, {})}
    return {"dependencies": builder(module, _bind(module, args, kwargs))}

"""Two parts of a training step's counted FLOPs that the usual estimates treat apart.

* **Attention calls** (:func:`attention_call`): each fused scaled-dot-product attention operator the
  forward dispatched, with its batch, heads, query and key lengths, head dimension and whether it
  was causal -- what the ``12·L·H·Q·T`` term of PaLM's FLOPs per token (Chowdhery et al. 2022,
  appendix B) is made of, read from the call itself rather than from a configuration.
* **Recomputation** (:class:`RecomputeCounter`): FLOPs of module forwards that run again during
  the backward (activation checkpointing, ``torch.utils.checkpoint``): hardware FLOPs, which model
  FLOPs utilisation leaves out and hardware FLOPs utilisation keeps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["ATTENTION_OPERATORS", "attention_call", "is_attention", "RecomputeCounter"]

#: The fused attention operators whose query is ``(batch, heads, length, head_dim)``.
ATTENTION_OPERATORS = frozenset({
    "aten._scaled_dot_product_flash_attention_for_cpu",
    "aten._scaled_dot_product_flash_attention",
    "aten._scaled_dot_product_efficient_attention",
    "aten._scaled_dot_product_cudnn_attention",
    "aten._scaled_dot_product_fused_attention_overrideable",
})


def is_attention(name: str) -> bool:
    """Whether the operator ``name`` (``"aten.<packet>"``) is a fused attention operator or its backward."""
    return name.removesuffix("_backward") in ATTENTION_OPERATORS


def _bound(func: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The call's arguments by their schema names."""
    names = [argument.name for argument in func._schema.arguments]
    bound = {name: value for name, value in zip(names, args)}
    bound.update(kwargs)
    for argument in func._schema.arguments:
        if argument.name not in bound and argument.has_default_value():
            bound[argument.name] = argument.default_value
    return bound


def attention_call(func: Any, args: tuple, kwargs: dict) -> dict[str, Any] | None:
    """``{"operator", "batch", "heads", "query_length", "key_length", "head_dim", "causal"}`` of a
    fused attention call (:data:`ATTENTION_OPERATORS`), or ``None`` for any other operator or a
    query that is not 4-d."""
    name = str(func._overloadpacket)
    if name not in ATTENTION_OPERATORS:
        return None
    bound = _bound(func, args, kwargs)
    query, key = bound.get("query"), bound.get("key")
    if not isinstance(query, torch.Tensor) or not isinstance(key, torch.Tensor) or query.dim() != 4:
        return None
    batch, heads, length, head_dim = (int(size) for size in query.shape)
    return {"operator": name, "batch": batch, "heads": heads, "query_length": length,
            "key_length": int(key.shape[-2]), "head_dim": head_dim, "causal": bool(bound.get("is_causal", False))}


class RecomputeCounter:
    """Counts the FLOPs of module forwards that run during the backward phase.

    ``total`` returns the operator counter's running FLOP total; while :meth:`watch` is on, PyTorch's
    global module hooks note the total when the outermost recomputed forward starts and add what it
    grew by when that forward ends (a module inside a recomputed one is counted once, with it). The
    end hook is ``always_call``: a non-reentrant checkpoint stops its recomputation by raising once
    the tensors it needs exist, and that forward still ends.
    """

    def __init__(self, total: Callable[[], int]) -> None:
        self._total = total
        self._depth = 0
        self._start = 0
        self._handles: list[Any] = []
        self.flops = 0
        self.calls = 0

    def watch(self, on: bool) -> None:
        """Start (``on``) or stop watching module forwards."""
        if on and not self._handles:
            self._handles = [torch.nn.modules.module.register_module_forward_pre_hook(self._pre),
                             torch.nn.modules.module.register_module_forward_hook(self._post, always_call=True)]
        elif not on:
            for handle in self._handles:
                handle.remove()
            self._handles = []
            self._depth = 0

    def _pre(self, module: Any, args: Any) -> None:
        if self._depth == 0:
            self._start = self._total()
            self.calls += 1
        self._depth += 1

    def _post(self, module: Any, args: Any, output: Any) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.flops += self._total() - self._start

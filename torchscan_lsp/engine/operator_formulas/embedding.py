"""Embedding lookups and bags."""

from __future__ import annotations

from typing import Any

from ._base import arg, first_shape, is_shape, numel, register


@register("embedding", family="embedding")
def embedding_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """0 FLOPs: an embedding is a row lookup (gather) — no arithmetic, only data movement.

    Its cost is memory traffic (DMAs), which the module formulas report. It has a formula (rather
    than sitting on the ignore list) so that a model's embedding shows as counted with 0 FLOPs.
    Source: ``torch.nn.Embedding`` documentation, out[i] = weight[ids[i]].
    """
    return 0


@register("embedding_bag", "_embedding_bag", "_embedding_bag_forward_only", family="embedding")
def embedding_bag_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """The bag reduction over D-dimensional rows, for I looked-up indices in B bags:

    * mode 0 (sum): (I - B) * D additions, plus I * D multiplies with ``per_sample_weights``;
    * mode 1 (mean): (I - B) * D additions + B * D divisions = I * D;
    * mode 2 (max): (I - B) * D comparisons.

    The lookups themselves are data movement (0). Source: ``torch.nn.EmbeddingBag`` documentation.
    """
    weight = args[0] if args else None
    indices = arg(args, kwargs, 1, "indices")
    mode = arg(args, kwargs, 4, "mode", 0)
    per_sample = arg(args, kwargs, 6, "per_sample_weights")
    out = first_shape(out_shape)
    dim = weight[-1] if is_shape(weight) and len(weight) else 0
    looked_up = numel(indices) if is_shape(indices) else 0
    bags = out[0] if out is not None and len(out) else 0
    flops = max(looked_up - bags, 0) * dim
    if mode == 1:
        flops += bags * dim
    if mode == 0 and per_sample is not None:
        flops += looked_up * dim
    return flops

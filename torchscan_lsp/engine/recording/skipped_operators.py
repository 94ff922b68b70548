"""The operators a counting mode never counts, records or observes: size and metadata queries."""

from __future__ import annotations

import torch

__all__ = ["SKIPPED_OPERATORS"]

_aten = torch.ops.aten
#: Size and metadata queries: never counted, never recorded, never observed.
SKIPPED_OPERATORS = frozenset(
    op
    for op in (
        getattr(getattr(_aten, name, None), overload, None)
        for name, overload in (
            ("sym_is_contiguous", "default"), ("is_contiguous", "default"), ("is_contiguous", "memory_format"),
            ("is_strides_like_format", "default"), ("is_non_overlapping_and_dense", "default"),
            ("size", "default"), ("sym_size", "default"), ("stride", "default"), ("sym_stride", "default"),
            ("storage_offset", "default"), ("sym_storage_offset", "default"), ("numel", "default"),
            ("sym_numel", "default"), ("dim", "default"),
        )
    )
    if op is not None
    # prim.device reaches a mode only from a subclass that answers .device in Python (FakeTensor)
) | frozenset([torch.ops.prim.layout.default, torch.ops.prim.device.default])

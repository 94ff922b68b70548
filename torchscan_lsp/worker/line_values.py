"""What a line's values are read from and how their shapes are summed up, for :mod:`.line_runs`:
the names a line stores (from its code's bytecode), a hashable key of a value's shapes, and the
distinct shapes a line's runs gave with their range."""

from __future__ import annotations

import dis
import types
from typing import Any

import torch

from torchscan_lsp.engine.recording.inputs import value_meta

__all__ = ["ShapeStats", "stored_names", "shape_key", "live_key"]

_STORES = frozenset({"STORE_FAST", "STORE_NAME", "STORE_DEREF", "STORE_GLOBAL"})
_MAX_DISTINCT = 64
"""Distinct shapes remembered per line: enough to say "vary" and give their range."""


def stored_names(code: types.CodeType) -> dict[int, tuple[tuple[str, ...], int]]:
    """Line -> (the names its instructions store, left to right; the offset of its last store)."""
    found: dict[int, list[tuple[int, str, int]]] = {}
    for instruction in dis.get_instructions(code):
        positions = instruction.positions
        if instruction.opname in _STORES and positions is not None and positions.lineno \
                and not str(instruction.argval).startswith("."):
            found.setdefault(positions.lineno, []).append((positions.col_offset or 0, instruction.argval, instruction.offset))
    return {line: (tuple(dict.fromkeys(name for _, name, _ in sorted(stores))), max(offset for *_, offset in stores))
            for line, stores in found.items()}


def shape_key(meta: Any) -> Any:
    """A hashable summary of a value's metadata (:func:`~torchscan_lsp.engine.recording.inputs.
    value_meta`) that differs when its shapes do: a tensor's shape tuple, a tuple or list of those."""
    if not isinstance(meta, dict):
        return None
    kind = meta.get("kind")
    if kind == "tensor":
        return tuple(meta.get("shape") or ())
    if kind in ("tuple", "list"):
        return kind, tuple(shape_key(item) for item in meta.get("items", ()))
    return kind


def live_key(value: Any) -> Any:
    """:func:`shape_key` of a live value, without building its metadata when it is a tensor."""
    if type(value) is torch.Tensor:
        return tuple(value.shape)
    return shape_key(value_meta(value))


class ShapeStats:
    """The distinct shapes a line's (or a name's) runs produced, and, for tensors of one rank, the
    smallest and largest size of each dimension."""

    __slots__ = ("distinct", "low", "high", "ranks")

    def __init__(self) -> None:
        self.distinct: set[Any] = set()
        self.low: list[int] | None = None
        self.high: list[int] | None = None
        self.ranks: set[int] = set()

    def add(self, key: Any) -> None:
        """Count one run's :func:`shape_key` (None: the run gave nothing to compare)."""
        if key is None or (len(self.distinct) >= _MAX_DISTINCT and key not in self.distinct):
            return
        self.distinct.add(key)
        if isinstance(key, tuple) and all(type(d) is int for d in key):
            self.ranks.add(len(key))
            if self.low is None:
                self.low, self.high = list(key), list(key)
            elif len(key) == len(self.low):
                self.low = [min(a, b) for a, b in zip(self.low, key)]
                self.high = [max(a, b) for a, b in zip(self.high, key)]  # type: ignore[arg-type]

    def range(self) -> dict[str, Any] | None:
        """``{"distinct": n, "min": [...], "max": [...]}`` when the runs' shapes differ (``min`` and
        ``max`` per dimension only when every run gave a tensor of one rank), else None."""
        if len(self.distinct) < 2:
            return None
        same_rank = len(self.ranks) == 1 and all(isinstance(k, tuple) and all(type(d) is int for d in k)
                                                 for k in self.distinct)
        return {"distinct": len(self.distinct), "min": self.low if same_rank else None,
                "max": self.high if same_rank else None}

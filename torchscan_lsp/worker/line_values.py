"""What a line's values are read from and how their shapes are summed up, for :mod:`.line_runs`:
the names a line stores and the lines that return several values (from its code's bytecode), the
trace function that reads what such a line returned, a hashable key of a value's shapes, and the
distinct shapes a line's runs gave with their range.

**Returned values.** The last operator a line dispatched is what it computed, except on a line that
returns a display of several values: ``return self.proj(y), weights`` dispatched ``proj`` last,
but returns a pair, and ``return q.transpose(1, 2), q.sum()`` dispatched the sum last. What such a
line returned is read where it is known for free, from the module call's output when the frame is
the call's ``forward``, and otherwise from the frame's ``return`` event (:class:`ReturnWatch`).
"""

from __future__ import annotations

import dis
import types
from typing import Any, Callable, Collection

import torch

from torchscan_lsp.engine.recording.inputs import value_meta

__all__ = ["Display", "ShapeStats", "ReturnWatch", "stored_names", "display_returns", "fits", "shape_key", "live_key"]

_STORES = frozenset({"STORE_FAST", "STORE_NAME", "STORE_DEREF", "STORE_GLOBAL"})
_MAX_DISTINCT = 64
"""Distinct shapes remembered per line: enough to say "vary" and give their range."""
_DISPLAYS: dict[str, type] = {"BUILD_TUPLE": tuple, "BUILD_LIST": list, "LIST_TO_TUPLE": tuple, "BUILD_MAP": dict,
                              "BUILD_CONST_KEY_MAP": dict}
Display = tuple[type, "int | None"]
"""What a display a line returns builds: its type (tuple, list or dict) and length (None: starred)."""


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


def display_returns(code: types.CodeType) -> dict[int, Display]:
    """The lines of ``code`` that return a display of several values (``return out, weights``,
    ``return [a, b]``, ``return {"logits": x}``), each with what its display builds: a
    ``RETURN_VALUE`` right after the instruction that builds the tuple, list or dict, on the line of
    that ``RETURN_VALUE``."""
    found: dict[int, Display] = {}
    previous = None
    for instruction in dis.get_instructions(code):
        positions = instruction.positions
        if instruction.opname == "RETURN_VALUE" and previous is not None and previous.opname in _DISPLAYS \
                and positions is not None and positions.lineno:
            count = None if previous.opname == "LIST_TO_TUPLE" else previous.arg
            found[positions.lineno] = (_DISPLAYS[previous.opname], count)
        previous = instruction
    return found


def fits(value: Any, display: Display) -> bool:
    """Whether ``value`` could be what ``display`` built: of its type and length."""
    kind, count = display
    return isinstance(value, kind) and (count is None or len(value) == count)


class ReturnWatch:
    """The trace function (:attr:`trace`) of one frame whose code has lines of
    :func:`display_returns`: when the frame returns, ``returned(frame, value, watch)`` is called with
    the value it returned from one of those ``lines`` (None when it returned from another line or
    raised). A trace function that was on the frame before (a direct ``forward`` call's watcher)
    still gets every event; line events are turned off unless it had them on."""

    __slots__ = ("lines", "trace", "_previous", "_returned")

    def __init__(self, frame: types.FrameType, lines: Collection[int],
                 returned: Callable[[types.FrameType, Any, "ReturnWatch"], None]) -> None:
        self.lines = lines
        self._previous = frame.f_trace
        self._returned = returned
        self.trace = self._event
        if self._previous is None:
            frame.f_trace_lines = False
        frame.f_trace = self.trace

    def _event(self, frame: types.FrameType, event: str, arg: Any) -> Any:
        if self._previous is not None:
            self._previous = self._previous(frame, event, arg)
        if event == "return":
            self._returned(frame, arg if frame.f_lineno in self.lines else None, self)
        return self.trace


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

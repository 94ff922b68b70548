"""What a line's values are read from and how their shapes are summed up, for :mod:`.line_runs`:
the names a line stores and the lines that return several values (from its code's bytecode), the
trace function that reads what such a line returned, a hashable key of a value's shapes, the
distinct shapes a line's runs gave with their range, and the record of a line's runs.

**Returned values.** The last operator a line dispatched is what it computed, except on a line that
returns a display of several values: ``return self.proj(y), weights`` dispatched ``proj`` last,
but returns a pair, and ``return q.transpose(1, 2), q.sum()`` dispatched the sum last. What such a
line returned is read where it is known for free, from the module call's output when the frame is
the call's ``forward``, and otherwise from the frame's ``return`` event (:class:`ReturnWatch`).
"""

from __future__ import annotations

import bisect
import dis
import types
from typing import Any, Callable, Collection

import torch

from torchscan_lsp.engine.recording.inputs import value_meta
from torchscan_lsp.worker.line_clock import JUMPS

__all__ = ["CodeFacts", "Display", "ShapeStats", "ReturnWatch", "SiteRun", "SiteRecord", "fits",
           "shape_key", "live_key"]

_STORES = frozenset({"STORE_FAST", "STORE_NAME", "STORE_DEREF", "STORE_GLOBAL"})
_MAX_DISTINCT = 64
"""Distinct shapes remembered per line: enough to say "vary" and give their range."""
_DISPLAYS: dict[str, type] = {"BUILD_TUPLE": tuple, "BUILD_LIST": list, "LIST_TO_TUPLE": tuple, "BUILD_MAP": dict,
                              "BUILD_CONST_KEY_MAP": dict}
#: Python 3.11 compiles ``[f(x) for x in xs]`` to a function it calls on the iterator:
#: ``GET_ITER, PRECALL, CALL`` (3.12 inlines list and dict comprehensions; their lines keep the last
#: operator's value).
_COMPREHENSIONS: dict[str, type] = {"<listcomp>": list, "<dictcomp>": dict}
_COMPREHENSION_CALL = ("GET_ITER", "PRECALL", "CALL")
Display = tuple[type, "int | None"]
"""What a display a line returns builds: its type (tuple, list or dict) and length (None: starred)."""


class CodeFacts:
    """What line runs need to know of one code object, read from its bytecode in one pass.

    Attributes:
        stores: line -> (the names its instructions store, left to right; the offset of its last
            store).
        returns: the lines that return a display of several values (``return out, weights``,
            ``return [a, b]``, ``return {"logits": x}``), each with what its display builds: a
            ``RETURN_VALUE`` right after the instruction that builds the tuple, list or dict, on the
            line of that ``RETURN_VALUE``, or right after the call of a list or dict comprehension
            made on that line (``return [h(x) for h in self.heads]``).
        certain: the lines of ``stores`` whose last store runs whenever the line runs, with its
            offset: no jump of the line before it lands past it (``out = h if out is None else
            torch.cat([out, h])`` jumps only within itself; ``if c: out = x`` can skip its store).
    """

    __slots__ = ("stores", "returns", "certain", "_offsets", "_lines", "_jumps")

    def __init__(self, code: types.CodeType) -> None:
        found: dict[int, list[tuple[int, str, int]]] = {}
        self.returns: dict[int, Display] = {}
        self._jumps: list[int] = []
        jumps: dict[int, list[tuple[int, int]]] = {}  # line -> (offset, target) of its jumps
        previous = None
        comprehension: tuple[int, type] | None = None  # the line and type of the last comprehension made
        recent: tuple[str, ...] = ()
        for instruction in dis.get_instructions(code):
            positions, name = instruction.positions, instruction.opname
            recent = (*recent[-3:], name)
            if name == "LOAD_CONST" and isinstance(instruction.argval, types.CodeType) and positions is not None:
                kind = _COMPREHENSIONS.get(instruction.argval.co_name)
                comprehension = (positions.lineno, kind) if kind is not None else None
            elif name == "RETURN_VALUE" and recent[:-1] == _COMPREHENSION_CALL and comprehension is not None \
                    and positions is not None and comprehension[0] == positions.lineno:
                self.returns[positions.lineno] = (comprehension[1], None)  # return [h(x) for h in self.heads]
            if name in _STORES and positions is not None and positions.lineno and not str(instruction.argval).startswith("."):
                found.setdefault(positions.lineno, []).append((positions.col_offset or 0, instruction.argval, instruction.offset))
            elif name == "RETURN_VALUE" and previous is not None and previous.opname in _DISPLAYS \
                    and positions is not None and positions.lineno:
                count = None if previous.opname == "LIST_TO_TUPLE" else previous.arg
                self.returns[positions.lineno] = (_DISPLAYS[previous.opname], count)
            if instruction.opcode in JUMPS:
                self._jumps.append(instruction.offset)
                if positions is not None and positions.lineno and isinstance(instruction.argval, int):
                    jumps.setdefault(positions.lineno, []).append((instruction.offset, instruction.argval))
            previous = instruction
        self.stores = {line: (tuple(dict.fromkeys(name for _, name, _ in sorted(stores))), max(offset for *_, offset in stores))
                       for line, stores in found.items()}
        self.certain = {line: offset for line, (_, offset) in self.stores.items()
                        if all(target <= offset for at, target in jumps.get(line, ()) if at < offset)}
        pairs = sorted((offset, line) for line, (_, offset) in self.stores.items())
        self._offsets = [offset for offset, _ in pairs]
        self._lines = [line for _, line in pairs]

    def passed(self, start: int, end: int) -> list[int]:
        """The lines whose last store lies after instruction offset ``start`` and before ``end``
        with no jump from ``start`` on before it: lines that ran, in order, in a frame seen at
        ``start`` and then at ``end`` in one pass (a jump could have gone round a store), though
        no event came from them (``sequence_output = outputs[0]``, ``skip = skips.pop()``)."""
        index = bisect.bisect_right(self._jumps, start)
        stop = min(end, self._jumps[index]) if index < len(self._jumps) else end
        return self._lines[bisect.bisect_right(self._offsets, start):bisect.bisect_left(self._offsets, stop)]


def fits(value: Any, display: Display) -> bool:
    """Whether ``value`` could be what ``display`` built: of its type and length."""
    kind, count = display
    return isinstance(value, kind) and (count is None or len(value) == count)


class ReturnWatch:
    """The trace function (:attr:`trace`) of one frame whose code has lines of
    :attr:`CodeFacts.returns`: when the frame returns, ``returned(frame, value, watch)`` is called with
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


class SiteRun:
    """One run of a line: the call whose ``forward`` ran it (``owner``, a layer index), the last
    thing it did (``operator`` and its output metadata ``value``, or ``operator`` None and ``value``
    the layer index of a module call it made) with its :func:`shape_key`, and the values of the names
    it assigned (``targets``: ``(name, metadata, key)``; None before they were read); for a line that
    returns a display of several values, what it returned (``returned``: ``(metadata, key)``)."""

    __slots__ = ("owner", "operator", "value", "key", "targets", "returned")

    def __init__(self, owner: int | None) -> None:
        self.owner = owner
        self.operator: str | None = None
        self.value: Any = None
        self.key: Any = None
        self.targets: list[tuple[str, Any, Any]] | None = None
        self.returned: tuple[Any, Any] | None = None


class SiteRecord:
    """Every run of one line: the first (what the editor shows), the one in progress, how many, and
    the shapes they gave; ``returns``: the line returns a display of several values, so its runs'
    value is what they returned (none when that could not be read), not their last operator's."""

    __slots__ = ("first", "current", "token", "runs", "shapes", "target_shapes", "returns")

    def __init__(self) -> None:
        self.first: SiteRun | None = None
        self.current: SiteRun | None = None
        self.token: int | None = None
        self.runs = 0
        self.shapes = ShapeStats()
        self.target_shapes: dict[str, ShapeStats] = {}
        self.returns = False

    def start(self, token: int, owner: int | None) -> SiteRun:
        """A new run of the line begins (its pass through its frame's code is ``token``)."""
        self.close()
        run = self.current = SiteRun(owner)
        self.token = token
        self.runs += 1
        if self.first is None:
            self.first = run
        return run

    def close(self) -> None:
        """The run in progress is over: count its shapes."""
        run = self.current
        if run is None:
            return
        key = run.returned[1] if run.returned is not None else run.key
        if key is None and run.value is None and run.targets is not None and len(run.targets) == 1:
            key = run.targets[0][2]  # a run without an event (``out = h``): its value is what it stored
        self.shapes.add(key)
        for name, _, key in run.targets or ():
            stats = self.target_shapes.get(name)
            if stats is None:
                stats = self.target_shapes[name] = ShapeStats()
            stats.add(key)
        self.current = None

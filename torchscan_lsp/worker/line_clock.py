"""Python's line events for one frame of workspace code running a loop (:class:`LineClock`), and
what they need to know of its bytecode (:func:`loop_code`): the part of :mod:`.line_runs` that
tells a loop's iterations apart where the recording pass's events cannot.

**Loops in workspace code.** Events alone cannot tell every loop's iterations apart: one whose body
dispatches a single operator from one instruction written in C, without any Python call
(``for _ in range(3): x = x * 2``), dispatches it from the same instruction in every iteration, as
one composite operator that decomposes into several dispatches does in one run. So a frame of
workspace code that contains a backward jump (a loop, read from the bytecode) also gets Python's
line events (:class:`LineClock`, a trace function on that frame alone) from its first event inside
a loop that events cannot be trusted with: any event there but a module call made through its hook
by the frame itself, which makes an event each time its instruction runs, and any event at all in
a loop whose iterations may run different instructions (a branch, an inner loop, an exception
handler: :class:`LoopCode`). Until then the events told its runs apart, and from then on its line
events do. A line event at an instruction no later than the frame's previous one is a backward
jump: the line it lands on starts a new run. So does a line event that moves on to a line, except
one that returns to the first line of a statement spanning several (``torch.cat([a,`` / ``b],
dim=1)`` calls ``cat`` from its first line after evaluating ``b`` on the second; a ``while``
condition, compiled twice, starts a run in each copy).

The global trace function this needs (:mod:`~torchscan_lsp.engine.recording.frame_tracing`) makes
every Python call and line of the pass slower while it is set, so it is set only while such a frame
runs its own code: it is let go for each module call the frame makes (where the pass's work lies;
nothing in it is that frame's line) unless a frame inside needs it too, and taken again when the
call ends. Where a debugger or coverage tool has set its own, the frames are left to it and their
runs are told from the events alone, as are library code's: tracing a library's loops (a model's
``for layer in self.layers``) would slow the whole pass of every model built from it, and its lines
are shown only when a client opens that file.
"""

from __future__ import annotations

import dis
import types
from typing import Any, Callable, Mapping

__all__ = ["JUMPS", "LineClock", "LoopCode", "loop_code"]

JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)
"""The opcodes of every jump, forwards or backwards."""
# the opcodes that can jump backwards: a scan of a code's bytes for them spares reading the
# instructions of the many functions without a loop
_BACKWARD = [bytes([op]) for name, op in dis.opmap.items() if "BACKWARD" in name]


class LoopCode:
    """What line events need to know of code that has a loop (:func:`loop_code`).

    Attributes:
        spans: for each instruction's offset, the last line spanned by the instructions of its
            *line block* (the consecutive instructions of its line around it): a block that goes
            back to the first line of a statement spanning several lines ends at the last line it
            covers.
        loops: for each instruction inside a loop, 1 when every loop around it runs the same
            instructions in each iteration (no branch, no inner loop, no exception handler), else 2.
    """

    __slots__ = ("spans", "loops")

    def __init__(self, spans: dict[int, int], loops: dict[int, int]) -> None:
        self.spans = spans
        self.loops = loops


def loop_code(code: types.CodeType) -> LoopCode | None:
    """The :class:`LoopCode` of ``code``; None for code without a backward jump (no line of it can
    run twice in one frame)."""
    opcodes = code.co_code[::2]
    if not any(op in opcodes for op in _BACKWARD):
        return None
    bytecode = dis.Bytecode(code)
    instructions = list(bytecode)
    regions = [(i.argval, i.offset) for i in instructions
               if i.opcode in JUMPS and isinstance(i.argval, int) and i.argval <= i.offset]
    if not regions:
        return None
    spans: dict[int, int] = {}
    block: list[int] = []
    line, end = None, 0
    for instruction in [*instructions, None]:
        positions = instruction.positions if instruction is not None else None
        lineno = positions.lineno if positions is not None else None
        if lineno != line or lineno is None:
            for offset in block:
                spans[offset] = end
            block, line, end = [], lineno, lineno or 0
        if instruction is not None and lineno is not None:
            block.append(instruction.offset)
            end = max(end, positions.end_lineno or lineno)  # type: ignore[union-attr]
    handlers = [(entry.start, entry.end) for entry in bytecode.exception_entries]
    loops: dict[int, int] = {}
    for first, last in regions:
        inside = [i for i in instructions if first <= i.offset <= last]
        branches = any(i.opcode in JUMPS and i.offset != last and not (i.offset == first and i.opname == "FOR_ITER")
                       for i in inside)
        flag = 2 if branches or any(start <= last and first < stop for start, stop in handlers) else 1
        for instruction in inside:
            loops[instruction.offset] = max(flag, loops.get(instruction.offset, 0))
    return LoopCode(spans, loops)


class LineClock:
    """The line events of one frame running a loop: the token of each line's run in progress.

    Its :attr:`trace` is the frame's trace function; a trace function that was already on the frame
    (a direct ``forward`` call's watcher) still gets the events it asked for. ``watched`` maps lines
    whose last store runs whenever they run to that store's offset: when the frame moves on from one
    of them past that store (or back to an earlier instruction: the next pass), ``ended(frame,
    line, token)`` is told that the line's run ``token`` is over, its stores run.
    """

    __slots__ = ("spans", "tokens", "lasti", "line", "jumps", "trace", "_next", "_previous", "_lines", "_returned",
                 "_watched", "_ended")

    def __init__(self, frame: types.FrameType, spans: dict[int, int], next_token: Callable[[], int],
                 returned: Callable[[types.FrameType, "LineClock"], None], watched: Mapping[int, int] | None = None,
                 ended: Callable[[types.FrameType, int, int], None] | None = None) -> None:
        self.spans = spans
        self._watched = watched or {}
        self._ended = ended
        #: line -> the token of its run in progress
        self.tokens: dict[int, int] = {}
        self.lasti = frame.f_lasti
        self.line = frame.f_lineno or 0
        #: backward jumps seen: a new pass through the frame's code each
        self.jumps = 0
        self._next = next_token
        self._previous = frame.f_trace
        self._lines = frame.f_trace_lines
        self._returned = returned
        #: the frame's trace function (one bound method, not a new one at every event)
        self.trace = self._event

    def token(self, line: int) -> int:
        """The token of ``line``'s run in progress (a new one for a line no event has reached)."""
        found = self.tokens.get(line)
        if found is None:
            found = self.tokens[line] = self._next()
        return found

    def _event(self, frame: types.FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            lasti, line = frame.f_lasti, frame.f_lineno
            previous = self.line
            store = self._watched.get(previous)
            if store is not None and (lasti > store or lasti <= self.lasti):
                token = self.tokens.get(previous)
                if token is not None:
                    self._ended(frame, previous, token)  # type: ignore[misc]
            if lasti <= self.lasti:
                self.jumps += 1
                self.tokens[line] = self._next()
            elif not line < self.line <= self.spans.get(lasti, line):
                self.tokens[line] = self._next()
            self.lasti, self.line = lasti, line
            if self._previous is not None and self._lines:
                self._previous = self._previous(frame, event, arg)
            return self.trace
        if self._previous is not None:
            self._previous = self._previous(frame, event, arg)
        if event == "return":
            store = self._watched.get(self.line)
            if store is not None and frame.f_lasti > store and self.tokens.get(self.line) is not None:
                self._ended(frame, self.line, self.tokens[self.line])  # type: ignore[misc]
            self._returned(frame, self)
        return self.trace

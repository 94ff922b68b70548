"""What each line of model code computed, run by run: the first run's value, how many runs there
were and how their shapes varied, and the values of the names the line assigned.

A *run* of a line is one execution of it in one frame. Runs are told apart from the events of the
engine's recording pass (an operator dispatched, a module call made) and the frames on the stack at
each event, up to the module call in progress (:meth:`~torchscan_lsp.worker.sites.CodeFiles.chain`).
A frame's current instruction (``f_lasti``) only moves forward while it runs straight-line code; so
an event at an earlier instruction than the frame's last event starts a new pass through its code
(the next iteration of a loop), and so does an event at the same instruction that comes from another
call (the next ``block(x)`` of ``for block in self.blocks``, the next call of a helper). A line's
first event in a pass starts its next run. A frame that is no longer on the stack at an event under
the same module call has returned: its lines' runs are over.

**Loops in workspace code** whose iterations the events cannot tell apart get Python's line
events as well (:mod:`.line_clock`, which says when and at what cost).

**Assigned names.** For a line that stores local names (``xq, xk = apply_rotary_emb(...)``,
``x, pad_hw = window_partition(x, 14)``), the names are read from the frame's locals once the
line's stores ran: at the frame's first later event past the line's last store instruction, at
its next pass, or when the frame is left. Which names a line stores, in the order they are
written, comes from the bytecode (its ``STORE_FAST`` and kin, ordered by column).

**Returned values.** A line that returns a display of several values (``return out, weights``)
computed what it returned, not its last operator's output (:mod:`.line_values`). When the frame is
a module call's ``forward`` (the outermost frame of model code in the call), the call's output is
that value (:meth:`LineRuns.call_returned`); a frame of workspace code inside the call (a helper)
gets a :class:`~torchscan_lsp.worker.line_values.ReturnWatch` from its first event on, with the
global trace function that needs held as for a loop's line events. A library helper's line, whose
frames are not traced, shows nothing rather than one item of what it returned.
"""

from __future__ import annotations

import inspect
import itertools
import types
from typing import Any, Callable

from torchscan_lsp.engine.recording import frame_tracing
from torchscan_lsp.engine.recording.inputs import value_meta
from torchscan_lsp.worker.line_clock import LineClock, LoopCode, loop_code
from torchscan_lsp.worker.line_values import Display, ReturnWatch, ShapeStats, display_returns, fits, shape_key, stored_names

__all__ = ["LineRuns", "SiteRun", "SiteRecord"]

Site = tuple[str, int]

_SUSPENDS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


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
        self.shapes.add(run.returned[1] if run.returned is not None else run.key)
        for name, _, key in run.targets or ():
            stats = self.target_shapes.get(name)
            if stats is None:
                stats = self.target_shapes[name] = ShapeStats()
            stats.add(key)
        self.current = None


class _FrameState:
    """A frame seen at an event: its file's name and the call it runs in, its instruction and callee
    then, its pass, the names its lines assigned that are still to be read (run id -> (run, names,
    offset of the line's last store)), and its lines that return a display of several values."""

    __slots__ = ("frame", "file", "owner", "lasti", "callee", "token", "pending", "loops", "clock", "jumps", "returns")

    def __init__(self, frame: types.FrameType, file: str, owner: int | None, loops: LoopCode | None,
                 returns: dict[int, Display]) -> None:
        self.frame: types.FrameType | None = frame
        self.file = file
        self.owner = owner
        self.returns = returns
        self.lasti = -1
        self.callee: types.FrameType | None = None
        self.token: int | None = None
        self.pending: dict[int, tuple[SiteRun, tuple[str, ...], int]] = {}
        #: the loops of its code, when its frames may get line events
        self.loops = loops
        #: its line events, once they were needed, and the backward jumps they had seen at its last event
        self.clock: LineClock | None = None
        self.jumps = 0


class LineRuns:
    """The runs of every line of one recording pass (see the module docstring).

    Frames are held only while they are on the stack of the module call in progress (the live
    chain of each call): a returned frame is let go at the next event that no longer finds it.

    Args:
        traced: whether a code object's frames may get line events (the workspace's code); only
            those whose code has a loop do. None: no frame does.
    """

    def __init__(self, traced: Callable[[types.CodeType], bool] | None = None) -> None:
        #: site -> its runs
        self.sites: dict[Site, SiteRecord] = {}
        self._chains: dict[int | None, list[_FrameState]] = {}
        self._tokens = itertools.count()
        self._stores: dict[int, tuple[types.CodeType, dict[int, tuple[tuple[str, ...], int]]]] = {}
        self._traced = traced
        self._loops: dict[int, tuple[types.CodeType, LoopCode | None]] = {}
        self._returns: dict[int, tuple[types.CodeType, dict[int, Display]]] = {}
        #: frame -> its clock or return watch, while it runs (a generator's clock until the pass
        #: ends: it returns at each yield)
        self._clocks: dict[types.FrameType, LineClock | ReturnWatch] = {}
        self._holding = False
        # whether line events were on when each module call in progress began, innermost last
        self._levels: list[bool] = []

    def visit(self, owner: int | None, items: list[tuple[Site, types.FrameType, types.FrameType | None]],
              called: bool = False) -> list[SiteRun]:
        """An event while call ``owner`` is the innermost; ``items`` are the model-code frames on
        the stack from the event outwards to that call's frame, each ``(site, frame, callee)``;
        ``called``: the event is a hooked module call made by the innermost of them.
        Returns the run in progress of each site, innermost first."""
        chain = self._chains.get(owner)
        if chain is None:
            chain = self._chains[owner] = []
        count = len(items)
        kept = 0
        while kept < len(chain) and kept < count and chain[kept].frame is items[count - 1 - kept][1]:
            kept += 1
        if kept < len(chain):  # frames of earlier events that are gone: they returned
            for state in reversed(chain[kept:]):
                self._leave(state)
            del chain[kept:]
        runs: list[SiteRun] = []
        sites, tokens = self.sites, self._tokens
        for depth in range(count):
            site, frame, callee = items[count - 1 - depth]
            if depth < kept:
                state = chain[depth]
            else:
                code = frame.f_code
                traced = self._traced is not None and self._traced(code)
                state = _FrameState(frame, site[0], owner, self._loop_code(code) if traced else None, self._returned_lines(code))
                chain.append(state)
                # a call's forward returns its output (call_returned); any other frame needs its return event
                if state.returns and traced and (depth or owner is None) and not code.co_flags & _SUSPENDS:
                    self._watch(state)
            lasti, clock = frame.f_lasti, state.clock
            if clock is not None:
                if state.token is None or clock.jumps != state.jumps:
                    if state.pending:
                        self._resolve(state, None)
                    state.token, state.jumps = next(tokens), clock.jumps
                elif state.pending:
                    self._resolve(state, lasti)
                token = clock.token(site[1])
            else:
                if state.token is None or lasti < state.lasti or (lasti == state.lasti and callee is not None
                                                                   and callee is not state.callee):
                    if state.pending:
                        self._resolve(state, None)
                    state.token = next(tokens)
                elif state.pending:
                    self._resolve(state, lasti)
                token = state.token
                loops = state.loops
                if loops is not None:
                    inside = loops.loops.get(lasti)
                    # a hooked module call makes an event at every execution of its instruction, so
                    # a loop whose iterations run the same instructions and only make such calls
                    # is told apart by the calls alone; any other event in a loop needs line events
                    if inside and (inside == 2 or not called or depth != count - 1):
                        state.clock = self._clock(frame, loops, site[1], token)
            state.lasti, state.callee = lasti, callee
            record = sites.get(site)
            if record is None:
                record = sites[site] = SiteRecord()
            run = record.start(token, owner) if record.token != token else record.current
            if state.returns and site[1] in state.returns:
                record.returns = True
            stores = self._stored(frame.f_code).get(site[1])
            if stores is not None and id(run) not in state.pending:
                state.pending[id(run)] = (run, stores[0], stores[1])  # type: ignore[assignment]
            runs.append(run)  # type: ignore[arg-type]
        runs.reverse()
        return runs

    @staticmethod
    def value(runs: list[SiteRun], operator: str | None, value: Any, key: Any) -> None:
        """Each of ``runs`` did this last: ``operator``'s output metadata ``value`` (or, ``operator``
        None, the module call whose layer index is ``value``), of shape key ``key``."""
        for run in runs:
            run.operator, run.value, run.key = operator, value, key

    def call_returned(self, owner: int, forward: Callable[[], types.CodeType | None], value: Any) -> None:
        """Call ``owner`` returned ``value``; ``forward()`` is the code of the function the call ran
        (the module's ``forward``, unwrapped). When a model-code frame of the call ran that code and
        returned from a line that returns a display of several values (:func:`~torchscan_lsp.worker.
        line_values.display_returns`) of ``value``'s kind and length, that line's run returned
        ``value``. Called before :meth:`owner_ended`."""
        found = [(state, state.frame.f_lineno) for state in self._chains.get(owner) or ()
                 if state.returns and state.frame is not None and state.frame.f_lineno in state.returns]
        code = forward() if found else None
        for state, line in found:
            if state.frame.f_code is code:  # type: ignore[union-attr]
                # a decorator's wrapper around forward (outside it on the stack) may have changed
                # the value: it is taken for forward's only when it is the display forward built
                if fits(value, state.returns[line]):
                    self._record_return(state, line, value)
                return

    def owner_ended(self, owner: int | None) -> None:
        """Call ``owner`` ended: its frames are left, the names their lines assigned read."""
        chain = self._chains.pop(owner, None)
        for state in reversed(chain or ()):
            self._leave(state)

    def finish(self) -> None:
        """The pass ended: every frame left, every run closed."""
        self.stop_tracing()
        for owner in list(self._chains):
            self.owner_ended(owner)
        for record in self.sites.values():
            record.close()

    def call_started(self) -> None:
        """A module call begins: its frames are not the ones whose lines are watched, which wait for
        it to end, so it runs without the global trace function unless a frame inside it needs it
        (the pass's work lies in its calls)."""
        self._levels.append(self._holding)
        self._release()

    def call_ended(self) -> None:
        """The innermost module call in progress ended: line events are on again if they were
        when it began."""
        self._release()
        if self._levels and self._levels.pop() and self._clocks:
            self._holding = frame_tracing.hold()

    def stop_tracing(self) -> None:
        """No more line events (the pass's outermost call ended): the frames' trace functions are
        taken off, the global one released."""
        for frame, clock in self._clocks.items():
            if frame.f_trace is clock.trace:
                frame.f_trace = None
        self._clocks.clear()
        self._levels.clear()
        self._release()

    def _loop_code(self, code: types.CodeType) -> LoopCode | None:
        found = self._loops.get(id(code))
        if found is None or found[0] is not code:
            found = self._loops[id(code)] = (code, loop_code(code) if self._traced(code) else None)  # type: ignore[misc]
        return found[1]

    def _clock(self, frame: types.FrameType, loops: LoopCode, line: int, token: int) -> LineClock | None:
        """A clock on ``frame`` from now on, its current ``line``'s run in progress being ``token``
        (None when another global trace function is set)."""
        if not self._holding:
            if not frame_tracing.hold():
                return None
            self._holding = True
        clock = self._clocks.get(frame)
        if isinstance(clock, LineClock):  # its state was let go and made again: its line events went on
            return clock
        clock = self._clocks[frame] = LineClock(frame, loops.spans, self._tokens.__next__, self._returned)
        clock.tokens[line] = token
        frame.f_trace = clock.trace
        frame.f_trace_lines = True
        return clock

    def _returned(self, frame: types.FrameType, tracer: LineClock | ReturnWatch) -> None:
        if (isinstance(tracer, LineClock) and frame.f_code.co_flags & _SUSPENDS) or self._clocks.get(frame) is not tracer:
            return
        del self._clocks[frame]
        if not self._clocks:  # no traced frame of model code is running: the rest of the pass runs untraced
            self._release()

    def _watch(self, state: _FrameState) -> None:
        """A :class:`ReturnWatch` on ``state``'s frame (none when another global trace function is set)."""
        if not self._holding:
            if not frame_tracing.hold():
                return
            self._holding = True

        def returned(frame: types.FrameType, value: Any, watch: ReturnWatch) -> None:
            if value is not None:
                self._record_return(state, frame.f_lineno, value)
            self._returned(frame, watch)

        frame = state.frame
        self._clocks[frame] = ReturnWatch(frame, state.returns, returned)  # type: ignore[index,arg-type]

    def _record_return(self, state: _FrameState, line: int, value: Any) -> None:
        """``state``'s frame returned ``value`` from ``line``: the value of that line's run in progress."""
        site = (state.file, line)
        record = self.sites.get(site)
        if record is None:
            record = self.sites[site] = SiteRecord()
        token = state.clock.token(line) if state.clock is not None else state.token
        run = record.current if record.token == token and record.current is not None else record.start(token, state.owner)  # type: ignore[arg-type]
        meta = value_meta(value)
        run.returned = (meta, shape_key(meta))
        record.returns = True

    def _returned_lines(self, code: types.CodeType) -> dict[int, Display]:
        found = self._returns.get(id(code))
        if found is None or found[0] is not code:
            found = self._returns[id(code)] = (code, display_returns(code))
        return found[1]

    def _release(self) -> None:
        if self._holding:
            self._holding = False
            frame_tracing.release()

    def _stored(self, code: types.CodeType) -> dict[int, tuple[tuple[str, ...], int]]:
        found = self._stores.get(id(code))
        if found is None or found[0] is not code:
            found = self._stores[id(code)] = (code, stored_names(code))
        return found[1]

    def _leave(self, state: _FrameState) -> None:
        if state.pending:
            self._resolve(state, None)
        state.frame = state.callee = None

    @staticmethod
    def _resolve(state: _FrameState, lasti: int | None) -> None:
        """Read the names of the pending lines whose stores the frame has run (all of them when
        ``lasti`` is None: the frame moved to another pass, or is left)."""
        local = None
        for key, (run, names, offset) in list(state.pending.items()):
            if lasti is not None and lasti <= offset:
                continue
            del state.pending[key]
            if local is None:
                local = state.frame.f_locals  # type: ignore[union-attr]
            targets = []
            for name in names:
                if name in local:
                    meta = value_meta(local[name])
                    targets.append((name, meta, shape_key(meta)))
            run.targets = targets

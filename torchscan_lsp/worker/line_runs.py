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

**Assigned names.** For a line that stores local names (``xq, xk = apply_rotary_emb(...)``), the
names are read from the frame's locals once the line's stores ran: at the frame's first later
event past the line's last store, at its next pass, or when the frame is left. A line with no event
of its own (``first = outputs[0]``) that the frame went past in straight-line code between two
events had a run too; its tensors are read then (:meth:`~.line_values.CodeFacts.passed`). In a
frame with line events, such a line's run is known for sure when the frame moves on past its last
store (``out = h if out is None else torch.cat([out, h])`` in a loop's first pass), and its
tensors are read then (:attr:`~.line_values.CodeFacts.certain`).

**Returned values.** A line that returns a display of several values (``return out, weights``)
computed what it returned (:mod:`.line_values`): a module call's ``forward`` returned the call's
output (:meth:`LineRuns.call_returned`); a workspace helper's frame gets a
:class:`~.line_values.ReturnWatch`, holding the global trace function as a loop's line events do;
a library helper's line, untraced, shows nothing rather than one item of what it returned.
"""

from __future__ import annotations

import inspect
import itertools
import types
from typing import Any, Callable

import torch

from torchscan_lsp.engine.recording import frame_tracing
from torchscan_lsp.engine.recording.inputs import value_meta
from torchscan_lsp.worker.line_clock import LineClock, LoopCode, loop_code
from torchscan_lsp.worker.line_values import CodeFacts, Display, ReturnWatch, SiteRecord, SiteRun, fits, shape_key

__all__ = ["LineRuns"]

Site = tuple[str, int]

_SUSPENDS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


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
        self._facts: dict[int, tuple[types.CodeType, CodeFacts]] = {}
        self._traced = traced
        self._loops: dict[int, tuple[types.CodeType, LoopCode | None]] = {}
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
                state = _FrameState(frame, site[0], owner, self._loop_code(code) if traced else None, self._code(code).returns)
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
                else:
                    if state.pending:
                        self._resolve(state, lasti)
                    if lasti > state.lasti:
                        self._passed(state, frame, state.lasti, lasti, site[1])
                token = state.token
                loops = state.loops
                if loops is not None:
                    inside = loops.loops.get(lasti)
                    # a hooked module call makes an event at every execution of its instruction, so
                    # a loop whose iterations run the same instructions and only make such calls
                    # is told apart by the calls alone; any other event in a loop needs line events
                    if inside and (inside == 2 or not called or depth != count - 1):
                        state.clock = self._clock(state, frame, loops, site[1], token)
            state.lasti, state.callee = lasti, callee
            record = sites.get(site)
            if record is None:
                record = sites[site] = SiteRecord()
            run = record.start(token, owner) if record.token != token else record.current
            if state.returns and site[1] in state.returns:
                record.returns = True
            stores = self._code(frame.f_code).stores.get(site[1])
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
        line_values.CodeFacts.returns`) of ``value``'s kind and length, that line's run returned
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

    def _clock(self, state: _FrameState, frame: types.FrameType, loops: LoopCode, line: int, token: int) -> LineClock | None:
        """A clock on ``state``'s ``frame`` from now on, its current ``line``'s run in progress being
        ``token`` (None when another global trace function is set)."""
        if not self._holding:
            if not frame_tracing.hold():
                return None
            self._holding = True
        clock = self._clocks.get(frame)
        if isinstance(clock, LineClock):  # its state was let go and made again: its line events went on
            return clock
        file, owner = state.file, state.owner

        def ended(frame: types.FrameType, line: int, token: int) -> None:
            self._line_ended(file, owner, frame, line, token)

        clock = self._clocks[frame] = LineClock(frame, loops.spans, self._tokens.__next__, self._returned,
                                                self._code(frame.f_code).certain, ended)
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

    def _passed(self, state: _FrameState, frame: types.FrameType, start: int, end: int, current: int | None) -> None:
        """``state``'s frame went straight from instruction ``start`` to ``end`` in its pass: each
        line that stored names in between with no event of its own (but ``current``, the line of
        the event at ``end``) had a run, whose names are read now: those that hold a tensor, which
        no later line of these stored again (a list may have been changed since: ``skips.pop()``)."""
        facts = self._code(frame.f_code)
        local, later = None, set()
        for line in reversed(facts.passed(start, end)):
            record = self.sites.get((state.file, line))
            names = [name for name in facts.stores[line][0] if name not in later]
            later.update(names)
            if line == current or (record is not None and record.token == state.token):
                continue
            if local is None:
                local = frame.f_locals
            targets = _tensor_targets(names, local)
            if not targets:  # b, t, c = x.shape: nothing to show
                continue
            if record is None:
                record = self.sites[(state.file, line)] = SiteRecord()
            record.start(state.token, state.owner).targets = targets  # type: ignore[arg-type]

    def _line_ended(self, file: str, owner: int | None, frame: types.FrameType, line: int, token: int) -> None:
        """A line of a frame with a clock finished its run ``token``; one with no event of its own
        (``out = h if out is None else torch.cat([out, h])`` in a loop's first pass) had that run
        too, and the names it stored that hold a tensor are read now."""
        record = self.sites.get((file, line))
        if record is not None and record.token == token:
            return  # an event came from it: its names are read as pending stores
        targets = _tensor_targets(self._code(frame.f_code).stores[line][0], frame.f_locals)
        if not targets:
            return
        if record is None:
            record = self.sites[(file, line)] = SiteRecord()
        record.start(token, owner).targets = targets  # type: ignore[arg-type]

    def _release(self) -> None:
        if self._holding:
            self._holding = False
            frame_tracing.release()

    def _code(self, code: types.CodeType) -> CodeFacts:
        found = self._facts.get(id(code))
        if found is None or found[0] is not code:
            found = self._facts[id(code)] = (code, CodeFacts(code))
        return found[1]

    def _leave(self, state: _FrameState) -> None:
        if state.frame is not None and state.clock is None and state.token is not None:
            self._passed(state, state.frame, state.lasti, state.frame.f_lasti, None)
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


def _tensor_targets(names: tuple[str, ...], local: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(name, metadata, shape key)`` of each of ``names`` whose value in ``local`` is a tensor:
    what a line that ran without an event of its own shows."""
    return [(name, meta, shape_key(meta)) for name in names if isinstance(local.get(name), torch.Tensor)
            for meta in (value_meta(local[name]),)]

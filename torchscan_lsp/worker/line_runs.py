"""What each line of model code computed, run by run: the first run's value, how many runs there
were and how their shapes varied, and the values of the names the line assigned.

A *run* of a line is one execution of it in one frame. Runs are told apart without tracing, from
the events of the engine's recording pass (an operator dispatched, a module call made) and the frames
on the stack at each event, up to the module call in progress (:meth:`~torchscan_lsp.worker.sites.
CodeFiles.chain`). A frame's current instruction (``f_lasti``) only moves forward while it runs
straight-line code; so an event at an earlier instruction than the frame's last event starts a new
pass through its code (the next iteration of a loop), and so does an event at the same instruction
that comes from another call (the next ``block(x)`` of ``for block in self.blocks``, the next
call of a helper). A line's first event in a pass starts its next run. A frame that is no longer on
the stack at an event under the same module call has returned: its lines' runs are over. A loop
whose body dispatches a single operator from one instruction written in C, without any Python
call (``for _ in range(3): x = x * 2``), cannot be told from one run.

**Assigned names.** For a line that stores local names (``xq, xk = apply_rotary_emb(...)``,
``x, pad_hw = window_partition(x, 14)``), the names are read from the frame's locals once the
line's stores ran: at the frame's first later event past the line's last store instruction, at
its next pass, or when the frame is left. Which names a line stores, in the order they are
written, comes from the bytecode (its ``STORE_FAST`` and kin, ordered by column).
"""

from __future__ import annotations

import dis
import itertools
import types
from typing import Any

import torch

from torchscan_lsp.engine.recording.inputs import value_meta

__all__ = ["LineRuns", "SiteRun", "SiteRecord", "stored_names", "shape_key"]

Site = tuple[str, int]

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


class SiteRun:
    """One run of a line: the call whose ``forward`` ran it (``owner``, a layer index), the last
    thing it did (``operator`` and its output metadata ``value``, or ``operator`` None and ``value``
    the layer index of a module call it made) with its :func:`shape_key`, and the values of the names
    it assigned (``targets``: ``(name, metadata, key)``; None before they were read)."""

    __slots__ = ("owner", "operator", "value", "key", "targets")

    def __init__(self, owner: int | None) -> None:
        self.owner = owner
        self.operator: str | None = None
        self.value: Any = None
        self.key: Any = None
        self.targets: list[tuple[str, Any, Any]] | None = None


class SiteRecord:
    """Every run of one line: the first (what the editor shows), the one in progress, how many, and
    the shapes they gave."""

    __slots__ = ("first", "current", "token", "runs", "shapes", "target_shapes")

    def __init__(self) -> None:
        self.first: SiteRun | None = None
        self.current: SiteRun | None = None
        self.token: int | None = None
        self.runs = 0
        self.shapes = ShapeStats()
        self.target_shapes: dict[str, ShapeStats] = {}

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
        self.shapes.add(run.key)
        for name, _, key in run.targets or ():
            stats = self.target_shapes.get(name)
            if stats is None:
                stats = self.target_shapes[name] = ShapeStats()
            stats.add(key)
        self.current = None


class _FrameState:
    """A frame seen at an event: its instruction and callee then, its pass, and the names its lines
    assigned that are still to be read (run id -> (run, names, offset of the line's last store))."""

    __slots__ = ("frame", "lasti", "callee", "token", "pending")

    def __init__(self, frame: types.FrameType) -> None:
        self.frame: types.FrameType | None = frame
        self.lasti = -1
        self.callee: types.FrameType | None = None
        self.token: int | None = None
        self.pending: dict[int, tuple[SiteRun, tuple[str, ...], int]] = {}


class LineRuns:
    """The runs of every line of one recording pass (see the module docstring).

    Frames are held only while they are on the stack of the module call in progress (the live
    chain of each call): a returned frame is let go at the next event that no longer finds it.
    """

    def __init__(self) -> None:
        #: site -> its runs
        self.sites: dict[Site, SiteRecord] = {}
        self._chains: dict[int | None, list[_FrameState]] = {}
        self._tokens = itertools.count()
        self._stores: dict[int, tuple[types.CodeType, dict[int, tuple[tuple[str, ...], int]]]] = {}

    def visit(self, owner: int | None, items: list[tuple[Site, types.FrameType, types.FrameType | None]]) -> list[SiteRun]:
        """An event while call ``owner`` is the innermost; ``items`` are the model-code frames on
        the stack from the event outwards to that call's frame, each ``(site, frame, callee)``.
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
                state = _FrameState(frame)
                chain.append(state)
            lasti = frame.f_lasti
            if state.token is None or lasti < state.lasti or (lasti == state.lasti and callee is not None
                                                               and callee is not state.callee):
                if state.pending:
                    self._resolve(state, None)
                state.token = next(tokens)
            elif state.pending:
                self._resolve(state, lasti)
            state.lasti, state.callee = lasti, callee
            record = sites.get(site)
            if record is None:
                record = sites[site] = SiteRecord()
            run = record.start(state.token, owner) if record.token != state.token else record.current
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

    def owner_ended(self, owner: int | None) -> None:
        """Call ``owner`` ended: its frames are left, the names their lines assigned read."""
        chain = self._chains.pop(owner, None)
        for state in reversed(chain or ()):
            self._leave(state)

    def finish(self) -> None:
        """The pass ended: every frame left, every run closed."""
        for owner in list(self._chains):
            self.owner_ended(owner)
        for record in self.sites.values():
            record.close()

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

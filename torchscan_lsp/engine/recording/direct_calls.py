"""Module calls made through ``module.forward(...)``: records for forwards that run without ``__call__``.

llama2.c and Meta's original LLaMA code write ``h = x + self.attention.forward(self.attention_norm(x), ...)``.
Calling ``forward`` directly skips ``nn.Module.__call__``, so none of the global module hooks fire:
without this module the attention's own work (its products, its rotary embedding) would be counted
as the caller's, and the attention would have no record of its own.

:class:`DirectForwards` finds such calls on the Python stack. At every event of the recording pass
that can reveal one (a module call starting inside a container, an operator dispatched while a
container is the innermost call), it walks the stack from the event outwards to the *boundary* of
the innermost active call (the frame of PyTorch's ``_call_impl`` for a hooked call, the ``forward``
frame itself for a direct one). A frame on the way that runs a function named ``forward`` whose
``self`` is a module of the model that is not active is a direct call: it
opens a layer record like a hooked call would (``"direct": true``, its ``calls`` metric by
:data:`METHOD_FORWARD_FRAME`), with the call's arguments read from the frame. A direct call ends
when a later event no longer finds its frame on the stack, or when the hooked call around it ends.

Its output is the value its ``forward`` returned, seen by a local trace function on that frame
alone (``frame.f_trace``, with the shared quiet global trace function held while one is watched:
:mod:`.frame_tracing`). When another trace function is installed (a debugger, a coverage tool), the
frame is not watched: the record's output is ``{"kind": "unknown"}`` and a metric leaf's module formulas are not
evaluated (``direct_forward_output`` says why, and its module metrics are unavailable).

Only calls that reveal themselves by an event are found: a direct call in which nothing is
dispatched and no module is called (never the case in full mode for a call that computes) opens no
record.
"""

from __future__ import annotations

import inspect
import types
from typing import Any, Callable

from torch import nn

from torchscan_lsp.engine.recording import frame_tracing
from torchscan_lsp.engine.recording.inputs import call_meta, value_meta
from torchscan_lsp.engine.recording.module_info import ModuleInfo
from torchscan_lsp.engine.recording.module_metrics import output_unseen
from torchscan_lsp.engine.report import METHOD_FORWARD_FRAME, metric_result

__all__ = ["DirectForwards", "frame_call", "UNKNOWN_OUTPUT"]

#: The output of a direct call whose ``forward`` frame could not be watched.
UNKNOWN_OUTPUT: dict[str, Any] = {"kind": "unknown"}

_CALLS = metric_result(status="complete", value=1, unit="calls", scope="module_call", method=METHOD_FORWARD_FRAME)
_VARARGS, _VARKEYWORDS = inspect.CO_VARARGS, inspect.CO_VARKEYWORDS


def frame_call(frame: types.FrameType) -> tuple[Any, tuple, dict[str, Any]]:
    """``(self, args, kwargs)`` of the call a ``forward`` frame runs, read from its locals: the
    positional parameters after the first (and ``*args``) as ``args``, the keyword-only ones (and
    ``**kwargs``) as ``kwargs``. ``self`` is None when the frame has no first parameter."""
    code = frame.f_code
    if not code.co_argcount:
        return None, (), {}
    names, local = code.co_varnames, frame.f_locals
    count, keywords = code.co_argcount, code.co_kwonlyargcount
    args = tuple(local[name] for name in names[1:count] if name in local)
    kwargs = {name: local[name] for name in names[count:count + keywords] if name in local}
    extra = count + keywords
    if code.co_flags & _VARARGS:
        args += tuple(local.get(names[extra], ()))
        extra += 1
    if code.co_flags & _VARKEYWORDS:
        kwargs.update(local.get(names[extra], {}))
    return local.get(names[0]), args, kwargs


class DirectForwards:
    """Opens and ends the records of direct ``forward`` calls of one recording pass.

    Args:
        recorder: the pass's :class:`~torchscan_lsp.engine.recording.recorder.CallRecorder`; its
            active calls (``frames``), records, call counts and observers are the ones used here.
        make_call: ``make_call(module, info, layer, scope, args)``: a new active call.
    """

    def __init__(self, recorder: Any, make_call: Callable[..., Any]) -> None:
        self.recorder = recorder
        self.make_call = make_call
        #: boundary frame -> active call: the walk of :meth:`sync` stops at the first one it meets
        self.boundaries: dict[types.FrameType, Any] = {}
        self._watched = 0
        self._tracing = False

    def sync(self, frame: types.FrameType | None) -> None:
        """Bring the active calls up to date with the stack at ``frame`` (an event of the pass):
        end the direct calls whose frame has returned, open those whose frame is running."""
        frames = self.recorder.frames
        top = frames[-1]
        start, boundary, hooked = frame, top.boundary, top.direct is None
        found: list[types.FrameType] | None = None
        # the common case first, without allocating: the innermost call is alive (its boundary is on
        # this stack) and the only forward on the way is its own (a hooked call's, just inside it)
        while frame is not None and frame is not boundary:
            if frame.f_code.co_name == "forward" and not (hooked and frame.f_back is boundary):
                if found is None:
                    found = []
                found.append(frame)
            frame = frame.f_back
        if frame is not None and found is None:
            return
        owner = top if frame is not None else self._owner(start)
        while frames[-1] is not owner and frames[-1].direct is not None:
            self.end(frames.pop(), frames[-1])
        if frames[-1] is not owner or owner is None:
            return
        if owner is not top:  # the walk went past the ended calls: keep only what lies inside the owner
            found = self._inside(start, owner.boundary)
        for candidate in reversed(found or ()):
            top = frames[-1]
            if (top.direct is None and candidate.f_back is top.boundary) or (top.own is not None and candidate in top.own):
                continue  # the active hooked call's own forward, or one seen before
            module, args, kwargs = frame_call(candidate)
            info = self.recorder.infos.get(id(module)) if isinstance(module, nn.Module) else None
            if info is None or not info.recorded or info.script or top.info is None or top.info.leaf \
                    or module is top.module or any(call.module is module for call in frames):
                # not a module of the model (an autograd Function's forward), below a leaf, or the
                # call's own forward reached another way (super().forward(x), a wrapper): seen once
                if top.own is None:
                    top.own = set()
                top.own.add(candidate)
                continue
            self.open(module, info, candidate, args, kwargs)

    def _owner(self, frame: types.FrameType | None) -> Any:
        """The innermost active call whose boundary is on the stack at ``frame`` (None: none is)."""
        boundaries = self.boundaries
        while frame is not None:
            owner = boundaries.get(frame)
            if owner is not None:
                return owner
            frame = frame.f_back
        return None

    @staticmethod
    def _inside(frame: types.FrameType | None, boundary: Any) -> list[types.FrameType]:
        """The ``forward`` frames from ``frame`` outwards, up to ``boundary``."""
        found = []
        while frame is not None and frame is not boundary:
            if frame.f_code.co_name == "forward":
                found.append(frame)
            frame = frame.f_back
        return found

    def open(self, module: nn.Module, info: ModuleInfo, frame: types.FrameType, args: tuple, kwargs: dict) -> None:
        """Open the record of a direct call of ``module`` running in ``frame``."""
        recorder = self.recorder
        frames, layers = recorder.frames, recorder.layers
        key = id(module)
        call_index = recorder.call_counts.get(key, 0)
        recorder.call_counts[key] = call_index + 1
        layer = len(layers)
        layers.append({
            "path": info.path,
            "call_index": call_index,
            "name": info.name,
            "depth": info.depth,
            "parent": frames[-1].scope,
            "type": info.type,
            "input": call_meta(args, kwargs),
            "output": {"kind": "pending"},
            "parameters": None,
            "buffers": None,
            "metrics": {"calls": {**_CALLS}},
            "direct": True,
        })
        call = self.make_call(module, info, layer, layer, args)
        call.direct, call.boundary, call.kwargs = frame, frame, kwargs
        call.inner = True  # a direct call ends when an event no longer finds its frame: look at every one
        recorder.owners.append(call)
        recorder.count_call(info)
        frames.append(call)
        self.boundaries[frame] = call
        self._watch(call, frame)
        for start in recorder.direct_starts:
            start(module, info, layer, args, frame)

    def end(self, call: Any, parent: Any) -> None:
        """End direct ``call`` (already popped; ``parent`` is now the innermost): fold its counts,
        record its output, evaluate a metric leaf's formulas, tell the observers."""
        recorder = self.recorder
        self.boundaries.pop(call.direct, None)
        if call.watcher is not None:
            self._unwatch(call)
        call.direct = call.boundary = call.own = None  # a returned frame holds its locals: let it go
        call.inner = False
        recorder.fold_ended(call, parent)
        record = recorder.layers[call.layer]
        args, kwargs, call.args, call.kwargs = call.args, call.kwargs or {}, None, None
        output, seen = call.output, call.returned
        call.output = None
        if not seen:
            record["output"] = dict(UNKNOWN_OUTPUT)
            if call.info.leaf and recorder.evaluating:
                output_unseen(call.info, record, recorder.diagnostics)
        else:
            record["output"] = value_meta(output)
            if output is not None:  # None: it raised (or returned nothing a formula could read)
                recorder.evaluate_ended(call.module, call.info, args, kwargs, output, record, call.layer)
        for finish in recorder.ends:
            finish(call.module, call.info, call.layer, args, kwargs, output, None)

    # -- the output of a direct call: a trace function on its frame alone -----------------------

    def _watch(self, call: Any, frame: types.FrameType) -> None:
        if not self._tracing:
            if not frame_tracing.hold():
                return  # a debugger or coverage tool: its tracing is left alone
            self._tracing = True

        # a trace function already on the frame (a line tracer of the same pass) keeps its events
        previous = frame.f_trace

        def watcher(traced: types.FrameType, event: str, arg: Any) -> Any:
            if previous is not None:
                previous(traced, event, arg)
            if event == "return" and traced is frame:
                call.output, call.returned = arg, True
                self._unwatch(call)
            return watcher

        call.watcher = watcher
        frame.f_trace = watcher
        if previous is None:
            frame.f_trace_lines = False
        self._watched += 1

    def _unwatch(self, call: Any) -> None:
        if call.watcher is None:
            return
        call.watcher = None
        if call.direct is not None and call.direct.f_trace is not None:
            call.direct.f_trace = None
        self._watched -= 1
        if not self._watched:
            self.close()

    def close(self) -> None:
        """Stop tracing (the pass ended, or no direct call is watched any more)."""
        if self._tracing:
            self._tracing = False
            frame_tracing.release()

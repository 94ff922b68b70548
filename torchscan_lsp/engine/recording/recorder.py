"""The recording pass: one layer record per module call, from global module hooks.

The crawler installs PyTorch's *global* forward hooks (``register_module_forward_pre_hook`` /
``register_module_forward_hook``) and filters them to the analysed model's own modules. Per-module
hooks would switch fused fast paths off (``nn.TransformerEncoderLayer`` checks its children for
hooks) and are refused by ScriptModules; global hooks change neither.

:class:`CallRecorder` holds everything one crawl records: the layer records, the stack of active
calls (each a :class:`Call`, whose inclusive operator counts the operator counter accumulates), the
parameter statistics and the module diagnostics; it tells the pass's observers
(:mod:`.observers`) of every call. Operator counts are kept O(1) per operator: the counter adds to
the innermost active call only, and each call adds its inclusive totals to its parent when it ends.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable

import torch
from torch import nn
from torch.nn.modules.lazy import LazyModuleMixin

from torchscan_lsp.engine.recording.direct_calls import DirectForwards
from torchscan_lsp.engine.recording.inputs import call_meta, tensor_meta, value_meta
from torchscan_lsp.engine.recording.module_info import ModuleInfo, module_infos
from torchscan_lsp.engine.recording.observers import forward_starts, overriding
from torchscan_lsp.engine.recording.param_stats import ParameterStats
from torchscan_lsp.engine.report import METHOD_HOOK, Diagnostic, metric_result

__all__ = ["Call", "CallRecorder"]

_CALLS = metric_result(status="complete", value=1, unit="calls", scope="module_call", method=METHOD_HOOK)

#: ``evaluate(module, info, args, kwargs, output, record, diagnostics)``: module metrics of one call.
Evaluator = Callable[[nn.Module, ModuleInfo, tuple, dict, Any, dict, list], None]
#: ``fail(info, record, exc, diagnostics)``: the call raised before returning.
FailureHandler = Callable[[ModuleInfo, dict, "BaseException | None", list], None]


class Call:
    """One active module call (the bottom of the stack stands for "outside every call").

    ``flops``, ``macs``, ``counted`` (operators with a formula), ``uncounted`` and ``macs_unknown``
    (operator name -> calls without a FLOP formula / without a MAC formula) are inclusive once the
    call has ended: its children's counts are added to it as each of them ends.

    ``boundary`` is the frame a stack walk from inside the call stops at (PyTorch's ``_call_impl``
    frame of a hooked call, the ``forward`` frame of a direct one); ``direct`` the ``forward`` frame
    of a call made through ``module.forward(...)`` (:mod:`.direct_calls`), else None.
    """

    __slots__ = ("module", "info", "layer", "scope", "args", "flops", "macs", "counted", "uncounted", "macs_unknown",
                 "boundary", "direct", "kwargs", "output", "returned", "watcher", "own", "inner")

    def __init__(self, module: Any, info: Any, layer: int | None, scope: int | None, args: tuple) -> None:
        self.module = module
        self.info = info
        self.layer = layer  # the record this call opened, or None
        self.scope = scope  # the innermost active record: this call's, or its parent's
        self.args = args
        self.boundary: Any = None
        self.direct: Any = None
        self.kwargs: dict | None = None
        self.output: Any = None
        self.returned = False
        self.watcher: Any = None
        self.own: set | None = None
        # whether events inside it look at the stack: a recorded container (a direct call can start in
        # it; a leaf's children open no record), or a direct call (its end is seen that way)
        self.inner = info is not None and layer is not None and not info.leaf and not info.script
        self.flops = 0
        self.macs = 0
        self.counted = 0
        self.uncounted: dict[str, int] | None = None
        self.macs_unknown: dict[str, int] | None = None


def _merge(into: dict[str, int] | None, counts: dict[str, int]) -> dict[str, int]:
    if into is None:
        return dict(counts)
    for name, calls in counts.items():
        into[name] = into.get(name, 0) + calls
    return into


class CallRecorder:
    """Records the module calls of one crawl; its hooks are installed with :func:`install_hooks`.

    Args:
        root: the analysed model.
        evaluate: called in the forward hook of every metric-leaf call (``None`` in structure mode).
        on_failure: called for a metric-leaf call that raised (an exception caught by a parent).
        infos: ``ModelScan(root).infos`` when the caller has it already.
        observers: :class:`~torchscan_lsp.engine.recording.observers.PassObserver` objects told of every call.
        counting: whether an operator counter adds to the active calls (it sets ``counter``, which
            is paused while ``evaluate`` runs).
    """

    def __init__(
        self,
        root: nn.Module,
        *,
        evaluate: Evaluator | None = None,
        on_failure: FailureHandler | None = None,
        infos: dict[int, ModuleInfo] | None = None,
        observers: Any = (),
        counting: bool = False,
    ) -> None:
        self.infos = module_infos(root) if infos is None else infos
        self.layers: list[dict[str, Any]] = []
        self.diagnostics: list[Diagnostic] = []
        self.stats = ParameterStats()
        #: the call of each record, and the records of containers measured as one unit
        self.owners: list[Call] = []
        self.units: set[int] = set()
        self.counter: Any = None
        #: the active calls, innermost last; ``frames[0]`` stands for "outside every call"
        self.frames: list[Call] = [Call(None, None, None, None, ())]
        #: calls that opened a record, once ended: their inclusive operator counts
        self.ended: list[Call] = []
        #: label -> inclusive FLOPs of its outermost calls, and the labels any counted operator ran under
        self.label_flops: dict[str, int] = {}
        self.label_counted: set[str] = set()
        self._observers = tuple(observers)
        self._starts = overriding(self._observers, "call_started")
        self._ends = overriding(self._observers, "call_ended")
        #: the observers' ``forward_started`` (their ``call_started`` when they do not override it)
        self.direct_starts = forward_starts(self._observers)
        self.ends = self._ends
        self._counting = counting
        self._active: dict[str, int] = {}
        #: module id -> calls so far (the next record's ``call_index``)
        self.call_counts: dict[int, int] = {}
        self._evaluate = evaluate
        self._on_failure = on_failure
        self._thread = threading.get_ident()
        self.direct = DirectForwards(self, Call)
        self.pre_hook = self._make_pre_hook()
        self.post_hook = self._make_post_hook()

    # --------------------------------------------------------------------------------------- hooks
    # The hooks run at every module call, so they are closures over local names (cheaper than
    # attribute look-ups on ``self``): per-call overhead is what the analysis costs on models of
    # many small modules.

    def _make_pre_hook(self) -> Callable[[nn.Module, tuple], None]:
        infos, layers, frames, calls = self.infos, self.layers, self.frames, self.call_counts
        active, thread, get_ident = self._active, self._thread, threading.get_ident
        owners, starts, counting, tensor_type = self.owners, self._starts, self._counting, torch.Tensor
        sync, boundaries, getframe = self.direct.sync, self.direct.boundaries, sys._getframe

        def pre_hook(module: nn.Module, args: tuple) -> None:
            key = id(module)
            info = infos.get(key)
            if info is None or get_ident() != thread:
                return
            entry = getframe(1)  # PyTorch's _call_impl: on the stack until the call ends
            if frames[-1].inner:
                sync(entry)  # a direct forward call around this one, begun or ended
            if counting:
                label = info.label
                active[label] = active.get(label, 0) + 1
            if not info.recorded:
                call = Call(module, info, None, frames[-1].scope, args)
                call.boundary = entry
                boundaries[entry] = call
                frames.append(call)
                for start in starts:
                    start(module, info, None, args)
                return
            call_index = calls.get(key, 0)
            calls[key] = call_index + 1
            if len(args) == 1:  # the common case, without a comprehension's frame
                value = args[0]
                args_meta = [tensor_meta(value) if type(value) is tensor_type else value_meta(value)]
            else:
                args_meta = list(map(value_meta, args))
            layer = len(layers)
            layers.append(
                {
                    "path": info.path,
                    "call_index": call_index,
                    "name": info.name,
                    "depth": info.depth,
                    "parent": frames[-1].scope,
                    "type": info.type,
                    "input": {"args": args_meta, "kwargs": {}},
                    "output": {"kind": "pending"},
                    "parameters": None,  # counted when the pass ends (count_parameters)
                    "buffers": None,
                    "metrics": {"calls": {**_CALLS}},
                }
            )
            call = Call(module, info, layer, layer, args)
            call.boundary = entry
            boundaries[entry] = call
            owners.append(call)
            frames.append(call)
            for start in starts:
                start(module, info, layer, args)

        return pre_hook

    def count_call(self, info: ModuleInfo) -> None:
        """Note a call of ``info``'s module starting outside the hooks (a direct ``forward`` call)."""
        if self._counting:
            self._active[info.label] = self._active.get(info.label, 0) + 1

    def fold_ended(self, call: Call, parent: Call) -> None:
        """A call that ended outside the hooks adds its counts to ``parent``'s."""
        if self._counting:
            self._fold(call, parent)

    @property
    def evaluating(self) -> bool:
        """Whether module formulas are evaluated (full mode)."""
        return self._evaluate is not None

    def evaluate_ended(self, module: nn.Module, info: ModuleInfo, args: tuple, kwargs: dict, output: Any,
                       record: dict, index: int) -> None:
        """Module formulas of a call that ended outside the hooks, as its post-hook would run them."""
        if self._evaluate is not None:
            self._evaluate_call(module, info, args, kwargs, output, record, index)

    def close(self) -> None:
        """After the pass (whatever happened): end the direct calls still open and stop watching frames."""
        frames = self.frames
        while len(frames) > 1 and frames[-1].direct is not None:
            self.direct.end(frames.pop(), frames[-1])
        self.direct.close()

    def _fold(self, call: Call, parent: Call) -> None:
        """Add an ended call's inclusive operator counts to its parent's and to its label's."""
        parent.flops += call.flops
        parent.macs += call.macs
        parent.counted += call.counted
        if call.uncounted:
            parent.uncounted = _merge(parent.uncounted, call.uncounted)
        if call.macs_unknown:
            parent.macs_unknown = _merge(parent.macs_unknown, call.macs_unknown)
        active, label = self._active, call.info.label
        left = active.get(label, 1) - 1
        if left > 0:
            active[label] = left
        else:  # the label's outermost call: the label's total counts each operator once
            active.pop(label, None)
            self.label_flops[label] = self.label_flops.get(label, 0) + call.flops
            if call.counted:
                self.label_counted.add(label)
        if call.layer is not None:
            self.ended.append(call)

    def _end_frames(self, module: nn.Module) -> Call | None:
        """Pop the calls down to ``module``'s (calls whose end was not seen are ended with it)."""
        frames = self.frames
        depth = len(frames) - 1
        while depth > 0 and frames[depth].module is not module:
            depth -= 1
        if depth == 0:
            return None  # a call whose start was not seen
        while True:
            call = frames.pop()
            if call.direct is not None:  # a direct forward call inside it: its frame has returned
                self.direct.end(call, frames[-1])
                continue
            self.direct.boundaries.pop(call.boundary, None)
            call.boundary = call.own = None
            if self._counting:
                self._fold(call, frames[-1])
            if call.module is module:
                return call
            for end in self._ends:
                end(call.module, call.info, call.layer, call.args, {}, None, None)

    def _make_post_hook(self) -> Callable[..., None]:
        infos, layers, frames, thread, get_ident = self.infos, self.layers, self.frames, self._thread, threading.get_ident
        diagnostics, evaluate, on_failure = self.diagnostics, self._evaluate, self._on_failure
        ends, end_frames, fold, counting = self._ends, self._end_frames, self._fold, self._counting
        tensor_type, boundaries = torch.Tensor, self.direct.boundaries

        def post_hook(module: nn.Module, args: tuple, *rest: Any) -> None:
            # Called as (module, args, kwargs, output) after a normal return, and as
            # (module, args, result) by PyTorch's always-call path when the forward raised.
            info = infos.get(id(module))
            if info is None or get_ident() != thread:
                return
            call = frames[-1]
            if call.module is module and len(frames) > 1:  # the common case: the innermost call ends
                frames.pop()
                del boundaries[call.boundary]
                call.boundary = call.own = None  # finished frames hold their locals (the call's output among them)
                if counting:
                    fold(call, frames[-1])
            else:
                call = end_frames(module)
                if call is None:
                    return
            pre_args, call.args = call.args, None
            index = call.layer
            if len(rest) != 2:  # the call raised (and a parent may catch the exception)
                error = sys.exc_info()[1]
                if index is not None and on_failure is not None and (info.leaf or info.script):
                    on_failure(info, layers[index], error, diagnostics)
                for end in ends:
                    end(module, info, index, args, {}, None, error)
                return
            kwargs, output = rest
            if index is not None:
                record = layers[index]
                if args is not pre_args:
                    record["input"] = call_meta(args, kwargs)
                elif kwargs:
                    record["input"]["kwargs"] = {name: value_meta(value) for name, value in kwargs.items()}
                record["output"] = tensor_meta(output) if type(output) is tensor_type else value_meta(output)
                if evaluate is not None:
                    self._evaluate_call(module, info, args, kwargs, output, record, index)
            for end in ends:
                end(module, info, index, args, kwargs, output, None)

        return post_hook

    def count_parameters(self) -> None:
        """Fill in every record's ``parameters`` and ``buffers``, in record order (so a tensor is
        counted by the first call that owns it, as if counted at each call's start), once the pass
        ended: lazy modules have initialised themselves by then, and the hooks stay cheap."""
        stats, layers, units, lazy = self.stats, self.layers, self.units, LazyModuleMixin
        for index, call in enumerate(self.owners):
            module, info, record = call.module, call.info, layers[index]
            if not info.tensors or (isinstance(module, lazy) and module.has_uninitialized_params()):
                record["parameters"] = {"trainable": 0, "frozen": 0, "bytes": 0, "shared": False, "shared_elements": 0, "shared_with": []}
                record["buffers"] = {"elements": 0, "bytes": 0, "shared": False, "shared_elements": 0, "shared_with": []}
                continue
            record["parameters"], record["buffers"] = stats.of_call(module, info)
            if index in units:
                stats.add_descendants(module, info, record)

    def _evaluate_call(
        self, module: nn.Module, info: ModuleInfo, args: tuple, kwargs: dict, output: Any, record: dict, index: int
    ) -> None:
        if not (info.leaf or info.script):
            if len(self.layers) != index + 1:
                return  # a container whose children ran: they carry the metrics
            # None of its children ran: a fused fast path or work written in the container's own
            # forward. Measure the call as one unit (its descendants' tensors count in its record).
            self.units.add(index)
        counter = self.counter
        if counter is None:
            self._evaluate(module, info, args, kwargs, output, record, self.diagnostics)  # type: ignore[misc]
            return
        counter.pause()  # formula work is never seen by the operator counter
        try:
            self._evaluate(module, info, args, kwargs, output, record, self.diagnostics)  # type: ignore[misc]
        finally:
            counter.resume()

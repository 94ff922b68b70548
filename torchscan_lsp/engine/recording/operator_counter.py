"""The counting dispatch mode: every executed operator, counted with the engine's formula table.

:class:`OperatorCounter` enters one ``TorchDispatchMode`` that records every executed operator and
counts it in the same step. It follows ``FlopCounterMode``'s rules (skip size queries, try the
CompositeImplicit decomposition first, count by overload packet) but avoids its per-operator pytree
traversals. Two ways of attributing counts to modules:

* inside a crawl (``recorder=``), each operator's FLOPs and MACs are added to the innermost active
  call of the :class:`~torchscan_lsp.engine.recording.recorder.CallRecorder` — O(1) per operator; each call
  adds its inclusive totals to its parent when it ends — and the pass's observers are told of it;
* alone (``measure_flops``), PyTorch's ``ModuleTracker`` labels ``by_module`` as ``FlopCounterMode``
  does (every active module label gets the operator's FLOPs).

On PyTorch versions without ``torch.utils.module_tracker`` (or ``shape_wrapper``), ``measure_flops``
falls back to a stock ``FlopCounterMode`` with a recorder inside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from sys import _getframe
from typing import Any

import torch
from torch.utils import flop_counter as _fc
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from torchscan_lsp.engine.operator_formulas.complex import INPUTS_DECIDE, ComplexOperands, complex_counts, has_complex
from torchscan_lsp.engine.recording.observers import overriding
from torchscan_lsp.engine.recording.operator_table import IGNORED_OPERATORS, default_mapping, flop_table, mac_table
from torchscan_lsp.engine.recording.skipped_operators import SKIPPED_OPERATORS
from torchscan_lsp.engine.recording.tensor_shapes import irregular_reason

try:  # torch >= 2.4
    from torch.utils.module_tracker import ModuleTracker
except ImportError:  # pragma: no cover - old torch
    ModuleTracker = None  # type: ignore[assignment,misc]

__all__ = ["OperatorCounter"]

_DEVICE_OP = torch.ops.prim.device.default
_COMPOSITE = torch._C.DispatchKey.CompositeImplicitAutograd
_HigherOrderOperator = getattr(torch._ops, "HigherOrderOperator", ())

# kinds of dispatched functions, decided once per function
_SKIP, _HOP, _DECOMPOSE, _PLAIN = range(4)


class _CountingMode(TorchDispatchMode):
    """Records every executed operator and counts it, in one dispatch-mode step.

    Per-function facts are decided once and cached by ``id``: ``OpOverload.__hash__`` is Python
    code, too slow to run several times per operator.
    """

    supports_higher_order_operators = True

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # No ``torch._disable_dynamo`` wrapper around every dispatch (a few microseconds per
        # operator): this mode only counts eager operators.
        return False

    def __init__(self, counter: OperatorCounter) -> None:
        super().__init__()
        self.counter = counter
        # id(func) -> (kind, id(packet), packet name, FLOP formula, MAC formula, MACs unknown, ignored,
        #              a product (complex: 4 real MACs per MAC), its operands decide whether it is complex)
        self.info: dict[int, tuple] = {}

    def _describe(self, func: Any) -> tuple:
        from torchscan_lsp.engine.operator_formulas import MAC_CLASS

        if func in SKIPPED_OPERATORS:
            info: tuple = (_SKIP, 0, "", None, None, False, True, False, False)
        elif isinstance(func, _HigherOrderOperator):
            info = (_HOP, 0, "", None, None, False, True, False, False)
        else:
            packet = func._overloadpacket
            counter = self.counter
            counter.packets[id(packet)] = packet
            registry = counter.registry
            # FlopCounterMode's rule: decompose unless the registry names this very overload
            decompose = (
                func is not _DEVICE_OP
                and func not in registry
                and (
                    _COMPOSITE in getattr(func, "py_kernels", ())
                    or torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), _COMPOSITE)
                )
            )
            name = str(packet)
            macs = mac_table().get(packet)
            info = (
                _DECOMPOSE if decompose else _PLAIN, id(packet), name, registry.get(packet), macs,
                macs is None and name in MAC_CLASS, name in IGNORED_OPERATORS,
                macs is not None or name in MAC_CLASS, name in INPUTS_DECIDE,
            )  # fmt: skip
        self.info[id(func)] = info
        self.counter.functions.append(func)  # keeps every id in ``info`` valid
        return info

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        counter = self.counter
        if counter.paused:
            return func(*args, **kwargs)
        info = self.info.get(id(func))
        if info is None:
            info = self._describe(func)
        kind, packet_id, name, formula, mac_formula, macs_unknown, ignored, products, inputs_decide = info
        if kind is _DECOMPOSE:  # as FlopCounterMode: count the decomposition's operators instead
            with self:
                out = func.decompose(*args, **kwargs)
            if out is not NotImplemented:
                return out
        elif kind is _SKIP:
            return NotImplemented
        elif kind is _HOP:
            return self._higher_order(func, args, kwargs)
        calls = counter.calls
        calls[packet_id] = calls.get(packet_id, 0) + 1
        out = func(*args, **kwargs)
        frames = counter.frames
        mac_factor = 1
        if formula is not None:
            try:
                flops = formula(args, kwargs, out)
                if type(flops) is not int:
                    flops = _plain_count(flops)
                if (isinstance(out, torch.Tensor) and out.is_complex()) or (inputs_decide and has_complex(args, out)):
                    flops, mac_factor = complex_counts(name, products, flops, args, out)
            except Exception as exc:  # noqa: BLE001 - shapes a formula cannot read: this call is uncounted
                counter.formula_failed(packet_id, args, out, exc)
                formula, ignored = None, False
        if frames is None:  # alone: by module label, as FlopCounterMode
            if formula is not None:
                counts = counter.label_counts
                for label in counter.tracker.parents:
                    per_label = counts.get(label)
                    if per_label is None:
                        per_label = counts[label] = {}
                    per_label[packet_id] = per_label.get(packet_id, 0) + flops
            return out
        if frames[-1].inner:  # in a container's own code: maybe in a module's forward called directly
            counter.sync(_getframe(1))
        top = frames[-1]
        if formula is not None:
            by_packet = counter.by_packet
            by_packet[packet_id] = by_packet.get(packet_id, 0) + flops
            top.flops += flops
            top.counted += 1
            if mac_formula is not None:
                try:
                    macs = mac_formula(args, kwargs, out) * mac_factor
                    if type(macs) is not int:
                        macs = _plain_count(macs)
                except Exception:  # noqa: BLE001 - shapes it cannot read: these MACs are unknown
                    macs = None
                else:
                    top.macs += macs
            else:
                macs = None if macs_unknown else 0
            if macs is None:
                unknown = top.macs_unknown
                if unknown is None:
                    top.macs_unknown = {name: 1}
                else:
                    unknown[name] = unknown.get(name, 0) + 1
        else:
            flops = macs = None
            if not ignored:
                uncounted = top.uncounted
                if uncounted is None:
                    top.uncounted = {name: 1}
                else:
                    uncounted[name] = uncounted.get(name, 0) + 1
        for observe in counter.operator_observers:
            observe(func, args, kwargs, out, flops, macs, top.scope)
        return out

    def _higher_order(self, func, args, kwargs):
        if func is not getattr(torch.ops.higher_order, "cond", None):
            return NotImplemented
        # As FlopCounterMode does: run both branches, keep the larger count of each operator.
        counter = self.counter
        _, true_branch, false_branch, operands = args
        before = counter.snapshot()
        with self:
            out = true_branch(*operands)
        true_counts = counter.snapshot()
        counter.restore(before)
        with self:
            false_out = false_branch(*operands)
        if out is NotImplemented or false_out is NotImplemented:
            return NotImplemented
        counter.restore(counter.larger(true_counts, counter.snapshot()))
        return out


def _plain_count(flops: Any) -> int | float:
    """A formula's result as a Python number; raises for a symbolic size (a jagged tensor's ``j1``)."""
    if isinstance(flops, float):
        return flops
    return int(flops)


class _Recorder(TorchDispatchMode):
    """Fallback recorder (old PyTorch only), entered *outside* a stock ``FlopCounterMode``: it sees
    the operators that actually executed, as the single-mode counter does."""

    def __init__(self, counter: OperatorCounter) -> None:
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs if kwargs else {}
        if func not in SKIPPED_OPERATORS and not isinstance(func, _HigherOrderOperator):
            packet = func._overloadpacket
            self.counter.packets[id(packet)] = packet
            self.counter.calls[id(packet)] = self.counter.calls.get(id(packet), 0) + 1
        return func(*args, **kwargs)


class OperatorCounter:
    """One operator-counting session, used as a context manager around exactly one workload.

    Args:
        custom_mapping: validated caller formulas (they win over the defaults).
        recorder: the crawl's :class:`~torchscan_lsp.engine.recording.recorder.CallRecorder`, whose active
            calls receive the counts; ``None`` labels ``by_module`` with PyTorch's ``ModuleTracker``.
        observers: the pass's observers, told of every counted operator (with ``recorder`` only).
        stock: force the fallback (a stock ``FlopCounterMode`` with a recorder inside it; without
            ``recorder`` only).
        modules: passed to the stock ``FlopCounterMode`` as ``mods`` on PyTorch versions whose
            counter lacks automatic module tracking.

    Between :meth:`pause` and :meth:`resume`, dispatched operators are executed but neither recorded
    nor counted: the crawler pauses the counter while module formulas run.
    """

    def __init__(
        self,
        custom_mapping: Mapping[Any, Any] | None = None,
        *,
        recorder: Any = None,
        observers: Any = (),
        stock: bool = False,
        modules: Any = None,
    ) -> None:
        # counts are keyed by id(packet); ``packets`` maps the ids back
        self.calls: dict[int, int] = {}
        self.by_packet: dict[int, int] = {}  # with a recorder: FLOPs per packet
        #: packet id -> [calls whose formula could not be applied, the first reason]
        self.failures: dict[int, list[Any]] = {}
        self.label_counts: dict[str, dict[int, int]] = {}  # alone: label -> packet -> FLOPs
        self.packets: dict[int, Any] = {}
        self.functions: list[Any] = []
        self.paused = False
        self.recorder = recorder
        self.frames = recorder.frames if recorder is not None else None
        #: the recorder's look at the stack for direct ``forward`` calls (:mod:`.direct_calls`)
        self.sync = recorder.direct.sync if recorder is not None else None
        self.operator_observers = overriding(observers, "operator_ran") if recorder is not None else ()
        self._paused_modes: Any = None
        #: the caller formulas in use (they win over the defaults)
        self.mapping = dict(custom_mapping or {})
        self._stock = recorder is None and (stock or ModuleTracker is None or not hasattr(_fc, "shape_wrapper"))
        self._modules = modules
        self._contexts: list[Any] = []
        self.tracker: Any = None
        self.registry: dict[Any, Any] = {} if self._stock else flop_table(self.mapping)

    def pause(self) -> None:
        """Stop recording and counting until :meth:`resume`."""
        if self._stock:  # the stock counter has no switch: take every dispatch mode off meanwhile
            self._paused_modes = _disable_current_modes()
            self._paused_modes.__enter__()
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        if self._stock and self._paused_modes is not None:
            modes, self._paused_modes = self._paused_modes, None
            modes.__exit__(None, None, None)

    def formula_failed(self, packet_id: int, args: tuple, out: Any, exc: Exception) -> None:
        """A formula raised on one call (a nested tensor's shape, a symbolic size): the call stays
        uncounted and the report names the operator and why."""
        entry = self.failures.get(packet_id)
        if entry is not None:
            entry[0] += 1
            return
        from torch.utils._pytree import tree_leaves

        nested = next((t for t in tree_leaves((args, out)) if isinstance(t, torch.Tensor) and t.is_nested), None)
        reason = (irregular_reason(nested) if nested is not None else str(exc) if isinstance(exc, ComplexOperands)
                  else f"{type(exc).__name__}: {exc}")
        self.failures[packet_id] = [1, reason]

    def failed_calls(self) -> dict[Any, tuple[int, str]]:
        """Packet -> ``(calls, reason)`` of the calls whose formula could not be applied."""
        return {self.packets[key]: (count, reason) for key, (count, reason) in self.failures.items()}

    # snapshots for torch.cond: the per-packet counts and the innermost call's
    def snapshot(self) -> tuple:
        labels = {label: dict(counts) for label, counts in self.label_counts.items()}
        if self.frames is None:
            return (labels, {}, None)
        top = self.frames[-1]
        return (labels, dict(self.by_packet), (top.flops, top.macs, top.counted))

    def restore(self, snapshot: tuple) -> None:
        labels, by_packet, top = snapshot
        self.label_counts = {label: dict(counts) for label, counts in labels.items()}
        if self.frames is not None:
            self.by_packet = dict(by_packet)
            frame = self.frames[-1]
            frame.flops, frame.macs, frame.counted = top

    @staticmethod
    def larger(first: tuple, second: tuple) -> tuple:
        """Per operator (and for the innermost call) the larger of two snapshots' counts."""

        def merge(a: dict, b: dict) -> dict:
            return {key: max(a.get(key, 0), b.get(key, 0)) for key in set(a) | set(b)}

        labels = {label: merge(first[0].get(label, {}), second[0].get(label, {})) for label in set(first[0]) | set(second[0])}
        top = None if first[2] is None else tuple(map(max, first[2], second[2]))
        return (labels, merge(first[1], second[1]), top)

    def __enter__(self) -> OperatorCounter:
        if self._contexts:
            raise RuntimeError("An OperatorCounter counts one workload at a time.")
        if self._stock:
            mapping = {**default_mapping(), **self.mapping}
            counter = _fc.FlopCounterMode(display=False, custom_mapping=mapping)
            if self._modules is not None and not hasattr(counter, "mod_tracker"):
                counter = _fc.FlopCounterMode(mods=self._modules, display=False, custom_mapping=mapping)
            self._stock_counter = counter
            contexts: list[Any] = [_Recorder(self), counter]
        elif self.recorder is None:
            self.tracker = ModuleTracker()
            contexts = [self.tracker, _CountingMode(self)]
        else:
            contexts = [_CountingMode(self)]
        entered = []
        try:
            for context in contexts:
                context.__enter__()
                entered.append(context)
        except BaseException:
            for context in reversed(entered):
                context.__exit__(None, None, None)
            raise
        self._contexts = entered
        return self

    def __exit__(self, *exc: Any) -> None:
        contexts, self._contexts = self._contexts, []
        for context in reversed(contexts):
            context.__exit__(*exc)
        if self._stock:
            raw = self._stock_counter.get_flop_counts()
            self._stock_counter = None
            for counts in raw.values():
                for packet in counts:
                    self.packets[id(packet)] = packet
            self.label_counts = {
                label: {id(packet): count for packet, count in counts.items()} for label, counts in raw.items()
            }

    def counts(self) -> tuple[dict[Any, int], dict[str, int], dict[Any, int]]:
        """``(by_operator, by_module, calls)``: FLOPs per packet, FLOPs per module label (``"Global"``
        excluded) and executed calls per packet."""
        packets = self.packets
        calls = {packets[key]: count for key, count in self.calls.items()}
        if self.frames is not None:
            by_operator = {packets[key]: count for key, count in self.by_packet.items()}
            recorder = self.recorder
            by_module = {label: recorder.label_flops[label] for label in recorder.label_counted}
            return by_operator, by_module, calls
        labels = self.label_counts
        by_operator = {packets[key]: count for key, count in labels.get("Global", {}).items()}
        by_module = {label: sum(counts.values()) for label, counts in labels.items() if label != "Global"}
        return by_operator, by_module, calls

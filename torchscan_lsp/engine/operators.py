"""Operator FLOPs: what PyTorch's dispatcher executed, counted with ``FlopCounterMode``'s formulas.

:func:`measure_flops` runs a workload once and reports, per operator and per module label, the FLOPs
that ``torch.utils.flop_counter`` formulas assign to what was dispatched. Operators without a
formula are either on the ignore list (views, data movement, allocation, creation: no arithmetic)
or reported as ``uncounted_operator`` diagnostics, which makes the total ``partial`` (a lower bound).

The formulas are PyTorch's own registry, merged with this project's ``DEFAULT_FORMULAS`` for the
operators PyTorch leaves uncounted and, above both, the caller's ``custom_mapping``.

Counting uses one dispatch mode (:class:`OperatorCounter`) that records every executed operator and
counts it in the same step: it follows ``FlopCounterMode``'s rules (skip size queries, try the
CompositeImplicit decomposition first, count by overload packet, attribute to every active module
label) but avoids its per-operator pytree traversals. On PyTorch versions without
``torch.utils.module_tracker`` it falls back to a stock ``FlopCounterMode`` with a recorder inside it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypedDict

import torch
from torch.utils import flop_counter as _fc
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_map

from torchscan_lsp.engine.report import (
    METHOD_FLOP_COUNTER,
    METHOD_NOT_REQUESTED,
    SCHEMA_VERSION,
    Diagnostic,
    MetricResult,
    make_diagnostic,
    metric_result,
)
from torchscan_lsp.engine.formula_provenance import flop_method, formula_context
from torchscan_lsp.engine.tensor_shapes import irregular_reason

try:  # torch >= 2.2
    from torch.utils.module_tracker import ModuleTracker
except ImportError:  # pragma: no cover - old torch
    ModuleTracker = None  # type: ignore[assignment,misc]

__all__ = [
    "FlopReport",
    "IGNORED_OPERATORS",
    "REFERENCE_IGNORED",
    "OperatorCounter",
    "measure_flops",
    "flop_report",
    "not_requested_flop_report",
    "validate_mapping",
]

_VIEW = "Metadata-only tensor view."
_MOVE = "Data movement is excluded from FLOPs."
_ALLOC = "Tensor allocation is excluded from FLOPs."
_CREATE = "Tensor creation is excluded from FLOPs."

#: The reference's ignore list: operators that do no arithmetic, with the reason they are excluded.
REFERENCE_IGNORED: dict[str, str] = {
    **dict.fromkeys(
        (
            "aten._unsafe_view", "aten.alias", "aten.as_strided", "aten.detach", "aten.expand",
            "aten.narrow", "aten.permute", "aten.select", "aten.slice", "aten.squeeze", "aten.t",
            "aten.transpose", "aten.unbind", "aten.unsqueeze", "aten.view",
        ),
        _VIEW,
    ),
    **dict.fromkeys(
        ("aten._to_copy", "aten.cat", "aten.clone", "aten.contiguous", "aten.copy_", "aten.split", "aten.to"),
        _MOVE,
    ),
    **dict.fromkeys(("aten.empty", "aten.empty_strided"), _ALLOC),
    **dict.fromkeys(
        ("aten.full", "aten.lift_fresh", "aten.lift_fresh_copy", "aten.ones", "aten.scalar_tensor", "aten.zeros"),
        _CREATE,
    ),
}


def _extra_ignored() -> dict[str, str]:
    from torchscan_lsp.engine import operator_formulas

    return dict(getattr(operator_formulas, "EXTRA_IGNORED", {}))


#: Every operator excluded from FLOPs with its reason: the reference list, then further views,
#: copies, allocations, creations, random generation and runtime queries
#: (``operator_formulas.EXTRA_IGNORED``), so that strict mode does not fail on work that has no
#: FLOPs by definition. An operator that has a formula is counted whatever this list says.
IGNORED_OPERATORS: dict[str, str] = {**_extra_ignored(), **REFERENCE_IGNORED}


class FlopReport(TypedDict):
    """What :func:`measure_flops` returns (also ``AnalysisReport["operator_flops"]``)."""

    schema_version: int
    context: dict[str, Any]
    total: MetricResult
    by_module: dict[str, int]
    by_operator: dict[str, int]
    ignored_operators: dict[str, dict[str, Any]]
    diagnostics: list[Diagnostic]


# --------------------------------------------------------------------------------------------------
# formula registry


def validate_mapping(custom_mapping: Mapping[Any, Any] | None) -> dict[Any, Any]:
    """Copy ``custom_mapping`` (never mutating it) and reject overload keys."""
    if custom_mapping is None:
        return {}
    if not isinstance(custom_mapping, Mapping):
        raise TypeError(
            f"custom_mapping must be a mapping from operator packets to formulas, got "
            f"{type(custom_mapping).__name__}."
        )
    mapping = dict(custom_mapping)
    for key in mapping:
        packet = getattr(key, "_overloadpacket", None)
        if packet is not None and packet is not key:
            raise TypeError(
                "custom_mapping keys must be operator packets such as torch.ops.aten.sin, not "
                f"overloads such as torch.ops.aten.sin.default (got {key}; use {packet})."
            )
    return mapping


def _get_shape(value: Any) -> Any:
    return value.shape if isinstance(value, torch.Tensor) else value


_LEAF_TYPES = frozenset(
    (int, float, bool, complex, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)
)


def _shapes(value: Any) -> Any:
    """``tree_map(get_shape, value)`` with fast paths for tensors, tuples, lists and scalars."""
    kind = type(value)
    if kind in _LEAF_TYPES:
        return value
    if isinstance(value, torch.Tensor):
        return value.shape
    if kind is tuple:
        return tuple([_shape_item(item) for item in value])
    if kind is list:
        return [_shape_item(item) for item in value]
    return tree_map(_get_shape, value)


def _shape_item(item: Any) -> Any:
    if isinstance(item, torch.Tensor):
        return item.shape
    if type(item) in _LEAF_TYPES:
        return item
    return _shapes(item)


try:
    _SHAPE_WRAPPER_CODE = _fc.shape_wrapper(lambda: None).__code__
except AttributeError:  # pragma: no cover - old torch
    _SHAPE_WRAPPER_CODE = None


def _compile_formula(formula: Callable[..., Any]) -> Callable[[tuple, dict, Any], Any]:
    """Turn a ``FlopCounterMode`` formula into ``call(args, kwargs, out) -> flops``.

    Raw formulas (``_get_raw``) get the values; the others get shapes, as ``shape_wrapper`` would
    give them. PyTorch's registered formulas are already wrapped by ``shape_wrapper``; they are
    unwrapped so that shapes are computed once, without pytree overhead.
    """
    if getattr(formula, "_get_raw", False):
        return lambda args, kwargs, out: formula(*args, **kwargs, out_val=out)
    if _SHAPE_WRAPPER_CODE is not None and getattr(formula, "__code__", None) is _SHAPE_WRAPPER_CODE:
        formula = formula.__wrapped__  # type: ignore[attr-defined]

    def call(args: tuple, kwargs: dict, out: Any) -> Any:
        out_shape = out.shape if isinstance(out, torch.Tensor) else _shapes(out)
        if kwargs:
            return formula(*[_shape_item(a) for a in args], out_shape=out_shape, **{k: _shape_item(v) for k, v in kwargs.items()})
        return formula(*[_shape_item(a) for a in args], out_shape=out_shape)

    return call


#: Compiled built-in and default formulas, by ``id`` (the formula is kept to check identity).
_COMPILED: dict[int, tuple[Any, Callable[[tuple, dict, Any], Any]]] = {}


def _compiled(formula: Callable[..., Any]) -> Callable[[tuple, dict, Any], Any]:
    entry = _COMPILED.get(id(formula))
    if entry is not None and entry[0] is formula:
        return entry[1]
    compiled = _compile_formula(formula)
    _COMPILED[id(formula)] = (formula, compiled)
    return compiled


def default_mapping() -> dict[Any, Any]:
    """This project's formulas: ``DEFAULT_FORMULAS`` by packet, then ``DECOMPOSITION_GUARDS`` by
    overload (overloads that would otherwise be decomposed before their formula could count them)."""
    from torchscan_lsp.engine import operator_formulas

    return {**operator_formulas.DEFAULT_FORMULAS, **getattr(operator_formulas, "DECOMPOSITION_GUARDS", {})}


#: PyTorch's formulas under this project's defaults, compiled: ``(sources, registry)``, where
#: ``sources`` is a snapshot of the two mappings it was built from. Merging ~700 formulas costs about
#: as much as counting a tiny model, so it is done once per process and redone only when a source
#: changed (a formula registered later with ``register_flop_formula``, a default added at run time).
_BASE_REGISTRY: tuple[tuple[dict, dict], dict] | None = None


def _base_registry() -> dict[Any, Callable[[tuple, dict, Any], Any]]:
    """The cached built-in and default registry (rebuilt when a source mapping changed)."""
    global _BASE_REGISTRY
    torch_formulas, defaults = _fc.flop_registry, default_mapping()
    cached = _BASE_REGISTRY
    # dict equality compares the formulas by identity, in C: far cheaper than a rebuild
    if cached is not None and cached[0][0] == torch_formulas and cached[0][1] == defaults:
        return cached[1]
    registry = {packet: _compiled(formula) for packet, formula in torch_formulas.items()}
    registry.update((key, _compiled(formula)) for key, formula in defaults.items())
    _BASE_REGISTRY = ((dict(torch_formulas), defaults), registry)
    return registry


def _build_registry(custom_mapping: Mapping[Any, Any] | None) -> dict[Any, Callable[[tuple, dict, Any], Any]]:
    """Key -> compiled formula: PyTorch's, under this project's defaults, under the caller's.

    Starts from a copy of the cached base (so no counter can change what the next one gets); the
    caller's formulas are layered on top for this counter only, and compiled afresh: caching them
    could keep closures alive forever.
    """
    registry = dict(_base_registry())
    registry.update((packet, _compile_formula(formula)) for packet, formula in (custom_mapping or {}).items())
    return registry


# --------------------------------------------------------------------------------------------------
# the counting dispatch mode

_aten = torch.ops.aten
_SKIPPED = frozenset(
    op
    for op in (
        getattr(getattr(_aten, name, None), overload, None)
        for name, overload in (
            ("sym_is_contiguous", "default"), ("is_contiguous", "default"), ("is_contiguous", "memory_format"),
            ("is_strides_like_format", "default"), ("is_non_overlapping_and_dense", "default"),
            ("size", "default"), ("sym_size", "default"), ("stride", "default"), ("sym_stride", "default"),
            ("storage_offset", "default"), ("sym_storage_offset", "default"), ("numel", "default"),
            ("sym_numel", "default"), ("dim", "default"),
        )
    )
    if op is not None
    # prim.device reaches a mode only from a subclass that answers .device in Python (FakeTensor)
) | frozenset([torch.ops.prim.layout.default, torch.ops.prim.device.default])
_DEVICE_OP = torch.ops.prim.device.default
_COMPOSITE = torch._C.DispatchKey.CompositeImplicitAutograd
_HigherOrderOperator = getattr(torch._ops, "HigherOrderOperator", ())


# kinds of dispatched functions, decided once per function
_SKIP, _HOP, _DECOMPOSE, _PLAIN = range(4)


class _CountingMode(TorchDispatchMode):
    """Records every executed operator and counts its FLOPs, in one dispatch-mode step.

    Per-function facts (skipped size query, higher-order operator, CompositeImplicit decomposition,
    packet, formula) are decided once and cached by ``id``: ``OpOverload.__hash__`` is Python code,
    too slow to run several times per operator.
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
        self.info: dict[int, tuple[int, int, Any]] = {}

    def _describe(self, func: Any) -> tuple[int, int, Any]:
        if func in _SKIPPED:
            info: tuple[int, int, Any] = (_SKIP, 0, None)
        elif isinstance(func, _HigherOrderOperator):
            info = (_HOP, 0, None)
        else:
            packet = func._overloadpacket
            counter = self.counter
            counter.packets[id(packet)] = packet
            # FlopCounterMode's rule: decompose unless the registry names this very overload
            decompose = (
                func is not _DEVICE_OP
                and func not in counter.registry
                and (
                    _COMPOSITE in getattr(func, "py_kernels", ())
                    or torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), _COMPOSITE)
                )
            )
            info = (_DECOMPOSE if decompose else _PLAIN, id(packet), counter.registry.get(packet))
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
        kind, packet_id, formula = info
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
        observer = counter.observer  # told of operators that run outside every leaf call
        if observer is not None and observer.outside:
            observer.observe(packet_id, args, kwargs, out)
        if formula is not None:
            try:
                flops = formula(args, kwargs, out)
                if type(flops) is not int:
                    flops = _plain_count(flops)
            except Exception as exc:  # noqa: BLE001 - shapes a formula cannot read: this call is uncounted
                counter.formula_failed(packet_id, args, out, exc)
                return out
            counts = counter.flop_counts
            for label in counter.tracker.parents:
                per_label = counts.get(label)
                if per_label is None:
                    per_label = counts[label] = {}
                per_label[packet_id] = per_label.get(packet_id, 0) + flops
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
        false_counts = counter.snapshot()
        merged: dict[str, dict[int, int]] = {}
        for label in set(true_counts) | set(false_counts):
            first, second = true_counts.get(label, {}), false_counts.get(label, {})
            merged[label] = {key: max(first.get(key, 0), second.get(key, 0)) for key in set(first) | set(second)}
        counter.restore(merged)
        return out


def _plain_count(flops: Any) -> int | float:
    """A formula's result as a Python number; raises for a symbolic size (a jagged tensor's ``j1``)."""
    if isinstance(flops, float):
        return flops
    return int(flops)


class _Recorder(TorchDispatchMode):
    """Fallback recorder (old PyTorch only), entered *outside* a stock ``FlopCounterMode``.

    The counter sees each operator first and runs CompositeImplicit decompositions itself, so the
    recorder sees the operators that actually executed, as the single-mode counter does.
    """

    def __init__(self, counter: OperatorCounter) -> None:
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs if kwargs else {}
        if func not in _SKIPPED and not isinstance(func, _HigherOrderOperator):
            self.counter.record(func._overloadpacket)
        return func(*args, **kwargs)


class OperatorCounter:
    """One operator-counting session, used as a context manager around exactly one workload.

    Args:
        custom_mapping: validated caller formulas (they win over the defaults).
        tracker: an object whose ``parents`` attribute is the set of active module labels
            (always containing ``"Global"``); ``None`` uses PyTorch's ``ModuleTracker``.
        stock: force the fallback (a stock ``FlopCounterMode`` with a recorder inside it).
        modules: passed to the stock ``FlopCounterMode`` as ``mods`` on PyTorch versions whose
            counter lacks automatic module tracking.

    Between :meth:`pause` and :meth:`resume`, dispatched operators are executed but neither recorded
    nor counted: the crawler pauses the counter while module formulas run.
    """

    def __init__(
        self,
        custom_mapping: Mapping[Any, Any] | None = None,
        *,
        tracker: Any = None,
        stock: bool = False,
        modules: Any = None,
    ) -> None:
        # counts are keyed by id(packet); ``packets`` maps the ids back
        self.calls: dict[int, int] = {}
        self.flop_counts: dict[str, dict[int, int]] = {}
        self.packets: dict[int, Any] = {}
        #: packet id -> [calls whose formula could not be applied, the first reason]
        self.failures: dict[int, list[Any]] = {}
        self.functions: list[Any] = []
        self.paused = False
        #: an object with an ``outside`` flag and ``observe(packet_id, args, kwargs, out)``, told of
        #: each operator while ``outside`` is true (``paths.ExecutionPaths``); None for none
        self.observer: Any = None
        self._paused_modes: Any = None
        self._mapping = dict(custom_mapping or {})
        self._stock = stock or ModuleTracker is None or not hasattr(_fc, "shape_wrapper")
        self._modules = modules
        self._own_tracker = None
        self._contexts: list[Any] = []
        if self._stock:
            self.registry: dict[Any, Any] = {}
            self.tracker = tracker
        else:
            self.registry = _build_registry(self._mapping)
            if tracker is None:
                tracker = self._own_tracker = ModuleTracker()
            self.tracker = tracker

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
        reason = irregular_reason(nested) if nested is not None else f"{type(exc).__name__}: {exc}"
        self.failures[packet_id] = [1, reason]

    def record(self, packet: Any) -> None:
        """Count one executed call of ``packet`` (used by the fallback recorder)."""
        key = id(packet)
        self.packets[key] = packet
        self.calls[key] = self.calls.get(key, 0) + 1

    # snapshots for torch.cond
    def snapshot(self) -> dict[str, dict[int, int]]:
        return {label: dict(counts) for label, counts in self.flop_counts.items()}

    def restore(self, snapshot: dict[str, dict[int, int]]) -> None:
        self.flop_counts = {label: dict(counts) for label, counts in snapshot.items()}

    def __enter__(self) -> OperatorCounter:
        if self._contexts:
            raise RuntimeError("An OperatorCounter counts one workload at a time.")
        if self._stock:
            mapping = {**default_mapping(), **self._mapping}
            counter = _fc.FlopCounterMode(display=False, custom_mapping=mapping)
            if self._modules is not None and not hasattr(counter, "mod_tracker"):
                counter = _fc.FlopCounterMode(mods=self._modules, display=False, custom_mapping=mapping)
            self._stock_counter = counter
            contexts = [_Recorder(self), counter]
        else:
            contexts = [self._own_tracker] if self._own_tracker is not None else []
            contexts.append(_CountingMode(self))
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
            self.flop_counts = {
                label: {id(packet): count for packet, count in counts.items()} for label, counts in raw.items()
            }

    def report(self) -> FlopReport:
        """The :class:`FlopReport` of what was counted."""
        packets = self.packets
        raw = {
            label: {packets[key]: count for key, count in counts.items()} for label, counts in self.flop_counts.items()
        }
        calls = {packets[key]: count for key, count in self.calls.items()}
        failures = {packets[key]: (count, reason) for key, (count, reason) in self.failures.items()}
        return flop_report(raw, calls, custom_mapping=self._mapping, failures=failures)


# --------------------------------------------------------------------------------------------------
# reports


def _context(method: str) -> dict[str, Any]:
    return {"torch_version": str(torch.__version__), "method": method}


def flop_report(
    raw: Mapping[str, Mapping[Any, Any]],
    calls: Mapping[Any, int],
    *,
    custom_mapping: Mapping[Any, Any] | None = None,
    failures: Mapping[Any, tuple[int, str]] | None = None,
) -> FlopReport:
    """Build a :class:`FlopReport` from per-label counts (``"Global"`` included) and operator calls.

    ``custom_mapping``: the caller formulas in use (named in the method and the context);
    ``failures``: packet -> ``(calls, reason)`` of calls whose formula could not be applied.
    """
    global_counts = raw.get("Global", {})
    by_operator = {str(packet): int(count) for packet, count in global_counts.items()}
    by_operator = dict(sorted(by_operator.items()))
    by_module = {
        label: int(sum(counts.values())) for label, counts in raw.items() if label != "Global"
    }
    by_module = dict(sorted(by_module.items()))
    recorded: dict[str, int] = defaultdict(int)
    for packet, count in calls.items():
        recorded[str(packet)] += int(count)
    failed = {str(packet): entry for packet, entry in (failures or {}).items()}
    ignored: dict[str, dict[str, Any]] = {}
    diagnostics: list[Diagnostic] = []
    for op in sorted(recorded):
        if op in failed:
            count, reason = failed[op]
            message = (f"{op} was observed {recorded[op]} time(s); its FLOP formula could not be applied to "
                       f"{count} of them: {reason}.")
            diagnostics.append(make_diagnostic("uncounted_operator", "flops", message, operator=op))
            continue
        if op in by_operator:
            continue
        reason = IGNORED_OPERATORS.get(op)
        if reason is not None:
            ignored[op] = {"calls": recorded[op], "reason": reason}
        else:
            diagnostics.append(
                make_diagnostic(
                    "uncounted_operator",
                    "flops",
                    f"{op} was observed {recorded[op]} time(s), but no FLOP formula is registered.",
                    operator=op,
                )
            )
    value = int(sum(by_operator.values()))
    method = flop_method(custom_mapping)
    if diagnostics:
        total = metric_result(status="partial", known_value=value, unit="FLOPs", scope="workload", method=method)
    else:
        total = metric_result(status="complete", value=value, unit="FLOPs", scope="workload", method=method)
    return {
        "schema_version": SCHEMA_VERSION,
        "context": {**_context(method), "formulas": formula_context(custom_mapping)},
        "total": total,
        "by_module": by_module,
        "by_operator": by_operator,
        "ignored_operators": ignored,
        "diagnostics": diagnostics,
    }


def not_requested_flop_report() -> FlopReport:
    """The placeholder :class:`FlopReport` of an analysis that did not count operators."""
    return {
        "schema_version": SCHEMA_VERSION,
        "context": _context(METHOD_NOT_REQUESTED),
        "total": metric_result(status="unavailable", unit="FLOPs", scope="workload", method=METHOD_NOT_REQUESTED),
        "by_module": {},
        "by_operator": {},
        "ignored_operators": {},
        "diagnostics": [],
    }


def measure_flops(
    workload: Callable[[], Any],
    *,
    modules: torch.nn.Module | Iterable[torch.nn.Module] | None = None,
    custom_mapping: Mapping[Any, Callable[..., Any]] | None = None,
) -> FlopReport:
    """Count the operator FLOPs of one call of ``workload`` (a zero-argument callable).

    Args:
        workload: called exactly once; its exceptions propagate unchanged.
        modules: only used on PyTorch versions whose ``FlopCounterMode`` cannot track modules by
            itself, to label ``by_module``.
        custom_mapping: ``{torch.ops.aten.op: formula}`` using ``FlopCounterMode``'s formula
            contract (shapes positionally, ``out_shape`` by keyword). Keys must be operator packets.
            Applies to this call only and wins over the built-in and default formulas.

    Returns:
        A :class:`FlopReport`. ``total`` is ``complete`` when every executed operator had a formula
        or is on the ignore list, else ``partial`` (a lower bound) with one ``uncounted_operator``
        diagnostic per uncounted operator.
    """
    if not callable(workload):
        raise TypeError(f"workload must be a zero-argument callable, got {type(workload).__name__}.")
    mapping = validate_mapping(custom_mapping)
    if isinstance(modules, torch.nn.Module):
        modules = [modules]
    elif modules is not None:
        modules = list(modules)
    counter = OperatorCounter(mapping, modules=modules)
    with counter:
        workload()
    return counter.report()

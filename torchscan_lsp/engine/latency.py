"""Latency of a caller-controlled workload, and of each layer of a model (docs/measurement.md).

:func:`measure_latency` times one zero-argument callable with ``torch.utils.benchmark.Timer``:

1. a **first call**, between two explicit device synchronisations, on an ordinary clock;
2. ``warmup`` explicit warm-up calls;
3. the Timer's own calibration and **timed blocks** (``blocked_autorange``), topped up with blocks of
   the same size until there are at least ``min_repeats``; the Timer's clock synchronises the device
   before every reading, so each block covers completed work.

Its report (:class:`BenchmarkReport`) gives ``latency`` (median of the block averages),
``latency_iqr`` (their interquartile range), ``throughput`` (declared work units completed across the
timed blocks divided by their total elapsed seconds) and ``first_call_latency`` as metric objects,
with the raw block durations, calls per block and timed call count they were computed from, so that
anyone can recompute them.

:func:`measure_layer_latency` measures each leaf module call of one forward by replaying that module
alone, on copies of the inputs it received, through the same timer. Calls are captured with
PyTorch's *global* module hooks (per-module hooks would change the program: they disable fused fast
paths). A call that cannot be replayed faithfully is ``unavailable`` with a reason. The sum of layer
latencies is reported beside the whole-model latency, never in place of it.

Timing imports are lazy: a missing benchmark dependency raises an actionable ``ImportError`` before
anything runs. All timing holds the process-wide measurement lock.
"""

from __future__ import annotations

import copy
import enum
import math
import statistics
import time
import timeit
from collections.abc import Callable, Mapping
from numbers import Real
from typing import Any, TypedDict

import torch
from torch import nn

from torchscan_lsp.engine._measuring import (
    MEASUREMENT_LOCK,
    check_runnable_device,
    device_name_of,
    hardware_info,
    measurement_context,
    normalise_device,
    synchronizer,
    tensor_dtypes,
)
from torchscan_lsp.engine.inputs import call_meta, value_meta
from torchscan_lsp.engine.report import (
    METHOD_NOT_REQUESTED,
    SCHEMA_VERSION,
    Diagnostic,
    MetricResult,
    make_diagnostic,
    metric_result,
)

__all__ = [
    "BenchmarkReport",
    "LayerLatencyReport",
    "LayerLatency",
    "measure_latency",
    "measure_layer_latency",
    "DEFAULT_WARMUP",
    "DEFAULT_MIN_RUN_TIME",
    "DEFAULT_MIN_REPEATS",
    "LAYER_DEFAULT_WARMUP",
    "LAYER_DEFAULT_MIN_RUN_TIME",
    "LAYER_DEFAULT_MIN_REPEATS",
]

#: ``measure_latency`` defaults: explicit warm-up calls (one after the first call; the Timer's
#: calibration then calls the workload again before any timed block), the Timer's minimum timed
#: seconds, and the minimum number of timed blocks (the IQR needs at least two).
DEFAULT_WARMUP = 1
DEFAULT_MIN_RUN_TIME = 0.5
DEFAULT_MIN_REPEATS = 3
#: ``measure_layer_latency`` defaults: many small timings, so shorter ones. No explicit warm-up: the
#: capture forward has already called each module once and the Timer's calibration calls it again.
LAYER_DEFAULT_WARMUP = 0
LAYER_DEFAULT_MIN_RUN_TIME = 0.02
LAYER_DEFAULT_MIN_REPEATS = 3

METHOD_TIMER = "torch.utils.benchmark.Timer"
METHOD_FIRST_CALL = "synchronized_clock"
UNIT_SECONDS = "seconds"
_TIMER_NAME = "__torchscan_workload"


class BenchmarkReport(TypedDict):
    """What :func:`measure_latency` returns (JSON-safe; ``schema_version`` 1).

    * ``kind``: always ``"latency"``.
    * ``context``: package and version, torch, python and CUDA versions, the method.
    * ``device`` (``cpu``, ``cuda:<i>``, ``mps``), ``device_name`` (GPU name on CUDA, the CPU/SoC
      model on CPU and MPS), ``hardware`` (machine, CPU model, CPU count).
    * ``threads``: the intra-op thread count passed to the Timer; ``interop_threads``.
    * ``work_units`` (what one call completes) and ``work_unit`` (its name).
    * ``timing``: ``warmup``, ``min_run_time``, ``min_repeats``, the synchronisation, the clocks.
    * ``inputs``: ``{"supplied": bool}`` plus, when supplied, ``value`` (shapes/dtypes metadata, never
      contents) and ``dtypes``.
    * ``block_durations`` (seconds per timed block), ``calls_per_block``, ``timed_calls``.
    * ``totals``: ``first_call_latency``, ``latency``, ``latency_iqr`` (seconds) and ``throughput``
      (``<work_unit>/s``) metric objects.
    """

    schema_version: int
    kind: str
    context: dict[str, Any]
    device: str
    device_name: str
    hardware: dict[str, Any]
    threads: int
    interop_threads: int
    work_units: float
    work_unit: str
    timing: dict[str, Any]
    inputs: dict[str, Any]
    block_durations: list[float]
    calls_per_block: int
    timed_calls: int
    totals: dict[str, MetricResult]


class LayerLatency(TypedDict, total=False):
    """One replayed module call of :func:`measure_layer_latency`.

    ``unit`` is ``"leaf"`` for a metric-leaf call, or ``"container"`` for a container whose call ran
    none of its children (a fused fast path) and was therefore replayed whole. ``timing`` is
    ``None`` when the call was not timed, and ``reason`` says why.
    """

    path: str
    call_index: int
    type: str
    unit: str
    input: dict[str, Any]
    metrics: dict[str, MetricResult]
    timing: dict[str, Any] | None
    reason: str


class LayerLatencyReport(TypedDict):
    """What :func:`measure_layer_latency` returns (``kind`` ``"layer_latency"``)."""

    schema_version: int
    kind: str
    context: dict[str, Any]
    device: str
    device_name: str
    hardware: dict[str, Any]
    threads: int
    interop_threads: int
    timing: dict[str, Any]
    inputs: dict[str, Any]
    layers: list[LayerLatency]
    totals: dict[str, MetricResult]
    model: BenchmarkReport | None
    diagnostics: list[Diagnostic]


# --------------------------------------------------------------------------------------------------
# validation and the timing core


def _load_timer() -> type:
    """Import ``torch.utils.benchmark.Timer`` lazily, with an actionable error when it cannot be."""
    try:
        from torch.utils.benchmark import Timer
    except ImportError as exc:
        raise ImportError(
            "Latency measurement needs torch.utils.benchmark, which could not be imported "
            f"({type(exc).__name__}: {exc}). Install the benchmark dependencies into the environment "
            "that runs the model, e.g. `pip install numpy setuptools` (with PyTorch 2.1: "
            "`pip install 'setuptools<70' 'numpy<2'`). Nothing was run."
        ) from exc
    return Timer


def _check_int(name: str, value: Any, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}.")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}.")
    return value


def _check_timing(warmup: Any, min_run_time: Any, min_repeats: Any) -> tuple[int, float, int]:
    warmup = _check_int("warmup", warmup, 0)
    if not isinstance(min_run_time, Real) or isinstance(min_run_time, bool):
        raise TypeError(f"min_run_time must be a number of seconds, got {type(min_run_time).__name__}.")
    if not math.isfinite(min_run_time) or min_run_time <= 0:
        raise ValueError(f"min_run_time must be a finite number of seconds > 0, got {min_run_time!r}.")
    min_repeats = _check_int("min_repeats", min_repeats, 2)
    return warmup, float(min_run_time), min_repeats


def _clock(sync: Callable[[], None] | None) -> Callable[[], float]:
    """The Timer's clock: the device is synchronised before every reading (CPU: the plain clock)."""
    if sync is None:
        return timeit.default_timer
    read = timeit.default_timer

    def synchronized_clock() -> float:
        sync()
        return read()

    return synchronized_clock


def _time_callable(
    workload: Callable[[], Any],
    *,
    timer_cls: type,
    sync: Callable[[], None] | None,
    threads: int,
    warmup: int,
    min_run_time: float,
    min_repeats: int,
    first_call: bool = True,
) -> dict[str, Any]:
    """First call (optional), warm-up, then timed blocks. Workload exceptions propagate unchanged."""
    clock = _clock(sync)
    first = None
    if first_call:
        start = clock()
        workload()
        first = float(clock() - start)
    for _ in range(warmup):
        workload()
    timer = timer_cls(stmt=f"{_TIMER_NAME}()", globals={_TIMER_NAME: workload}, timer=clock, num_threads=threads)
    measurement = timer.blocked_autorange(min_run_time=min_run_time)
    calls_per_block = int(measurement.number_per_run)
    blocks = [float(duration) for duration in measurement.raw_times]
    while len(blocks) < min_repeats:
        blocks.extend(float(duration) for duration in timer.timeit(calls_per_block).raw_times)
    return {"first_call": first, "block_durations": blocks, "calls_per_block": calls_per_block}


def _block_statistics(blocks: list[float], calls_per_block: int) -> tuple[float, float]:
    """Median and interquartile range (linear interpolation) of the block averages."""
    averages = [duration / calls_per_block for duration in blocks]
    quartiles = statistics.quantiles(averages, n=4, method="inclusive")
    return float(statistics.median(averages)), float(quartiles[2] - quartiles[0])


def _seconds(value: float, scope: str, method: str = METHOD_TIMER) -> MetricResult:
    return metric_result(status="complete", value=value, unit=UNIT_SECONDS, scope=scope, method=method)


def _unavailable_seconds(scope: str, method: str = METHOD_TIMER) -> MetricResult:
    return metric_result(status="unavailable", unit=UNIT_SECONDS, scope=scope, method=method)


def _check_inputs_device(value: Any, device_name: str) -> None:
    wanted = torch.device(device_name)
    for leaf in _tree_leaves(value):
        if isinstance(leaf, torch.Tensor) and not _same_device(leaf.device, wanted):
            raise ValueError(
                f"inputs hold a tensor on '{leaf.device}', but device is '{device_name}': "
                "device must name where the workload runs (measure_latency never moves tensors)."
            )


def _same_device(actual: torch.device, wanted: torch.device) -> bool:
    if actual.type != wanted.type:
        return False
    if actual.type == "cpu":
        return True
    return (actual.index or 0) == (wanted.index or 0)


def _tree_leaves(value: Any) -> list[Any]:
    from torch.utils import _pytree

    return _pytree.tree_leaves(value)


# --------------------------------------------------------------------------------------------------
# measure_latency


def measure_latency(
    workload: Callable[[], Any],
    *,
    device: str | torch.device,
    inputs: Any = None,
    work_units: float = 1,
    work_unit: str = "calls",
    warmup: int = DEFAULT_WARMUP,
    min_run_time: float = DEFAULT_MIN_RUN_TIME,
    min_repeats: int = DEFAULT_MIN_REPEATS,
) -> BenchmarkReport:
    """Time one caller-controlled, zero-argument ``workload`` on ``device``.

    The callable owns eval/train state, grad mode, precision, transfers and side effects; only work
    inside it is measured. ``device`` must name where it executes (nothing is moved). Set
    ``torch.set_num_threads`` before calling: the active thread count is recorded and passed to the
    Timer.

    Args:
        workload: zero-argument callable; its return value is ignored, its exceptions propagate.
        device: ``"cpu"``, ``"cuda"``/``"cuda:<i>"`` or ``"mps"``.
        inputs: optional caller metadata (a tensor or a structure of them); **not** passed to the
            workload; only shapes and dtypes are recorded.
        work_units: how many work units one call completes (e.g. the batch size); > 0.
        work_unit: their name (``"samples"``, ``"tokens"``); throughput is in ``<work_unit>/s``.
        warmup: explicit warm-up calls after the first call (the Timer adds its own calibration).
        min_run_time: minimum total seconds of timed blocks (not a wall-clock timeout).
        min_repeats: minimum number of timed blocks (>= 2, so that the IQR exists).

    Raises:
        TypeError: ``workload`` is not callable, or an option has the wrong type.
        ValueError: ``work_units <= 0``, a bad option, an unknown or unsupported device (``meta``),
            or ``inputs`` on another device.
        RuntimeError: a CUDA or MPS device that is unavailable.
        ImportError: ``torch.utils.benchmark`` cannot be imported (raised before anything runs).
    """
    if not callable(workload):
        raise TypeError(f"workload must be a zero-argument callable, got {type(workload).__name__}.")
    if not isinstance(work_units, Real) or isinstance(work_units, bool):
        raise TypeError(f"work_units must be a number, got {type(work_units).__name__}.")
    if not math.isfinite(work_units) or work_units <= 0:
        raise ValueError(f"work_units must be a finite number > 0, got {work_units!r}.")
    if not isinstance(work_unit, str) or not work_unit.strip():
        raise ValueError("work_unit must be a non-empty string such as 'calls', 'samples' or 'tokens'.")
    warmup, min_run_time, min_repeats = _check_timing(warmup, min_run_time, min_repeats)
    dev = normalise_device(device, api="measure_latency")
    device_name = check_runnable_device(dev, str(device), api="measure_latency")
    if inputs is not None:
        _check_inputs_device(inputs, device_name)
    timer_cls = _load_timer()
    inputs_meta: dict[str, Any] = {"supplied": inputs is not None}
    if inputs is not None:
        value = value_meta(inputs)
        inputs_meta.update({"value": value, "dtypes": tensor_dtypes(value)})
    with MEASUREMENT_LOCK:
        return _latency_report(
            workload,
            timer_cls=timer_cls,
            device_name=device_name,
            inputs_meta=inputs_meta,
            work_units=work_units,
            work_unit=work_unit,
            warmup=warmup,
            min_run_time=min_run_time,
            min_repeats=min_repeats,
        )


def _latency_report(
    workload: Callable[[], Any],
    *,
    timer_cls: type,
    device_name: str,
    inputs_meta: dict[str, Any],
    work_units: float,
    work_unit: str,
    warmup: int,
    min_run_time: float,
    min_repeats: int,
) -> BenchmarkReport:
    sync, sync_label = synchronizer(device_name)
    threads = torch.get_num_threads()
    timing = _time_callable(
        workload,
        timer_cls=timer_cls,
        sync=sync,
        threads=threads,
        warmup=warmup,
        min_run_time=min_run_time,
        min_repeats=min_repeats,
    )
    blocks, per_block = timing["block_durations"], timing["calls_per_block"]
    latency, iqr = _block_statistics(blocks, per_block)
    timed_calls = per_block * len(blocks)
    units = int(work_units) if float(work_units).is_integer() else float(work_units)
    throughput = units * timed_calls / sum(blocks)
    totals = {
        "first_call_latency": _seconds(timing["first_call"], "workload", METHOD_FIRST_CALL),
        "latency": _seconds(latency, "workload"),
        "latency_iqr": _seconds(iqr, "workload"),
        "throughput": metric_result(
            status="complete", value=throughput, unit=f"{work_unit}/s", scope="workload", method=METHOD_TIMER
        ),
    }
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kind": "latency",
        "context": measurement_context(method=METHOD_TIMER, cuda_version=torch.version.cuda),
        "device": device_name,
        "device_name": device_name_of(device_name),
        "hardware": hardware_info(),
        "threads": threads,
        "interop_threads": torch.get_num_interop_threads(),
        "work_units": units,
        "work_unit": work_unit,
        "timing": {
            "warmup": warmup,
            "min_run_time": min_run_time,
            "min_repeats": min_repeats,
            "synchronization": sync_label,
            "timer": f"{METHOD_TIMER}.blocked_autorange",
            "first_call_clock": "time.perf_counter between device synchronisations",
            "gc": "timeit default (disabled during timed blocks)",
        },
        "inputs": inputs_meta,
        "block_durations": blocks,
        "calls_per_block": per_block,
        "timed_calls": timed_calls,
        "totals": totals,
    }
    return report  # type: ignore[return-value]


# --------------------------------------------------------------------------------------------------
# per-layer latency

_IMMUTABLE = (
    type(None), bool, int, float, complex, str, bytes, range, slice, type(Ellipsis), enum.Enum,
    torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size,
)  # fmt: skip


class _CaptureError(Exception):
    pass


def _copy_leaf(leaf: Any) -> Any:
    if isinstance(leaf, torch.Tensor):
        return leaf.detach().clone()
    if isinstance(leaf, _IMMUTABLE):
        return leaf
    try:
        return copy.deepcopy(leaf)
    except Exception as exc:  # noqa: BLE001 - any failure means the value cannot be captured
        raise _CaptureError(f"a {type(leaf).__qualname__} argument could not be copied ({type(exc).__name__})") from exc


def _copy_tree(value: Any) -> Any:
    """Private copies of every tensor (and mutable object) in ``value``; containers rebuilt."""
    from torch.utils import _pytree

    leaves, spec = _pytree.tree_flatten(value)
    return _pytree.tree_unflatten([_copy_leaf(leaf) for leaf in leaves], spec)


_MODULE_INTERNALS = frozenset(nn.Module().__dict__) | {"training"}


def _attribute_snapshot(module: nn.Module) -> dict[str, Any]:
    return {key: value for key, value in vars(module).items() if key not in _MODULE_INTERNALS}


def _changed_attributes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    changed = sorted(set(before) ^ set(after))
    for key in before.keys() & after.keys():
        old, new = before[key], after[key]
        if old is new:
            continue
        try:
            equal = isinstance(old, _IMMUTABLE + (tuple,)) and type(old) is type(new) and bool(old == new)
        except Exception:  # noqa: BLE001
            equal = False
        if not equal:
            changed.append(key)
    return sorted(changed)


def _state_versions(module: nn.Module) -> list[tuple[int, int]]:
    tensors = [*module.parameters(), *module.buffers()]
    return [(id(tensor), tensor._version) for tensor in tensors]


def _rng_states(device_name: str) -> list[torch.Tensor]:
    states = [torch.random.get_rng_state()]
    if device_name.startswith("cuda"):
        states.append(torch.cuda.get_rng_state(int(device_name.split(":", 1)[1])))
    elif device_name == "mps":
        states.append(torch.mps.get_rng_state())
    return states


def _is_metric_leaf(module: nn.Module) -> bool:
    return next(module.children(), None) is None or isinstance(module, nn.MultiheadAttention)


def _stateful_reason(module: nn.Module) -> str | None:
    """Modules known to change state when called, judged before anything is replayed."""
    from torch.nn.modules.batchnorm import _BatchNorm

    for sub in module.modules():
        if isinstance(sub, _BatchNorm) and sub.training and sub.track_running_stats:
            return (
                f"{type(sub).__name__} in training mode updates its running statistics on every call, "
                "so replaying it would change the model"
            )
    return None


class _Call:
    __slots__ = (
        "seq", "path", "call_index", "module", "type", "leaf", "args", "kwargs", "capture_error",
        "versions", "attributes", "rng", "child_calls", "input_meta", "reason",
    )  # fmt: skip

    def __init__(self, seq: int, path: str, call_index: int, module: nn.Module) -> None:
        self.seq, self.path, self.call_index, self.module = seq, path, call_index, module
        self.type = type(module).__name__
        self.leaf = _is_metric_leaf(module)
        self.args: Any = None
        self.kwargs: Any = None
        self.capture_error: str | None = None
        self.child_calls = 0
        self.input_meta: dict[str, Any] = {"args": [], "kwargs": {}}
        self.reason: str | None = None


class _Recorder:
    """Global module hooks that copy each module call's inputs (one forward, no per-module hooks)."""

    def __init__(self, model: nn.Module, device_name: str) -> None:
        self.paths: dict[int, str] = {}
        for name, module in model.named_modules():
            self.paths.setdefault(id(module), name)
        self.device_name = device_name
        self.counts: dict[int, int] = {}
        self.stack: list[_Call] = []
        self.units: list[_Call] = []
        self.seq = 0

    def pre_hook(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        path = self.paths.get(id(module))
        if path is None:
            return
        call_index = self.counts.get(id(module), 0)
        self.counts[id(module)] = call_index + 1
        if self.stack:
            self.stack[-1].child_calls += 1
        call = _Call(self.seq, path, call_index, module)
        self.seq += 1
        try:
            call.args = _copy_tree(tuple(args))
        except _CaptureError as exc:
            call.capture_error = str(exc)
        call.input_meta["args"] = [value_meta(arg) for arg in args]
        call.versions = _state_versions(module)
        call.attributes = _attribute_snapshot(module)
        call.rng = _rng_states(self.device_name)
        self.stack.append(call)

    def post_hook(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        if id(module) not in self.paths:
            return
        index = next((i for i in range(len(self.stack) - 1, -1, -1) if self.stack[i].module is module), None)
        if index is None:
            return
        call = self.stack.pop(index)
        call.input_meta["kwargs"] = {key: value_meta(value) for key, value in kwargs.items()}
        if call.capture_error is None:
            try:
                call.kwargs = _copy_tree(dict(kwargs))
            except _CaptureError as exc:
                call.capture_error = str(exc)
        changed_tensors = call.versions != _state_versions(module)
        changed_attributes = _changed_attributes(call.attributes, _attribute_snapshot(module))
        rng_after = _rng_states(self.device_name)
        if changed_tensors:
            call.reason = "the call modified its parameters or buffers in place, so replaying it would change the model"
        elif changed_attributes:
            call.reason = (
                f"the call changed the module's attributes ({', '.join(changed_attributes)}), "
                "so it is stateful and replaying it would change the model"
            )
        elif any(not torch.equal(a, b) for a, b in zip(call.rng, rng_after, strict=True)):
            call.reason = (
                "the call drew random numbers (e.g. dropout in training mode); replaying it would advance "
                "the global random generator"
            )
        del call.versions, call.attributes, call.rng
        if call.leaf or call.child_calls == 0:
            self.units.append(call)
        else:
            call.args = call.kwargs = None  # a container measured through its children: free the copies


def _tensors_of(value: Any) -> list[torch.Tensor]:
    return [leaf for leaf in _tree_leaves(value) if isinstance(leaf, torch.Tensor)]


def _model_devices(model: nn.Module) -> set[torch.device]:
    return {tensor.device for tensor in [*model.parameters(), *model.buffers()]}


def measure_layer_latency(
    model: nn.Module,
    args: tuple[Any, ...] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    device: str | torch.device,
    warmup: int = LAYER_DEFAULT_WARMUP,
    min_run_time: float = LAYER_DEFAULT_MIN_RUN_TIME,
    min_repeats: int = LAYER_DEFAULT_MIN_REPEATS,
    include_model: bool = True,
    eval_mode: bool = True,
    time_budget: float | None = None,
) -> LayerLatencyReport:
    """Latency of each leaf module call of ``model(*args, **kwargs)``, replayed alone on ``device``.

    One forward runs on private copies of ``args``/``kwargs`` with PyTorch's global module hooks,
    which copy each call's inputs before the call runs (keyword arguments: when it returns, because
    global pre-hooks do not receive them). Each metric-leaf call (a module without children, or a
    ``MultiheadAttention``) is then replayed alone through the same timer as
    :func:`measure_latency`. A container whose call ran none of its children (a fused fast path such
    as ``TransformerEncoderLayer``'s) is replayed whole, as a ``"container"`` unit.

    With ``eval_mode=True`` (the default, like ``crawl_module``) every module is put in evaluation
    mode for the measurement and the flags are restored afterwards; everything runs under
    ``torch.no_grad()``. The caller's tensors are never passed to the model.

    A call is ``unavailable``, with a ``reason`` and a ``layer_latency_unavailable`` diagnostic, when
    its inputs cannot be copied, when the module is stateful (BatchNorm in training mode, a call that
    changes parameters, buffers or attributes), when it draws random numbers, when its replay raises,
    or on the meta device. ``totals.layer_latency_sum`` is ``complete`` only when every call was
    measured (else ``partial`` with the sum of the measured ones as a lower bound);
    ``totals.model_latency`` is the whole forward timed by :func:`measure_latency`'s defaults — the
    two are separate numbers and differ by the work outside leaf calls and by per-call overhead.

    ``time_budget`` (seconds, default unlimited) bounds the measurement for callers with a deadline
    (an editor's worker): once it is spent, the remaining calls are not timed and are
    ``unavailable`` with that reason. The whole model is timed first, right after the capture.

    Raises:
        TypeError: ``model`` is not an ``nn.Module``; ``args`` not a tuple; ``kwargs`` not a mapping
            with string keys; caller inputs that cannot be copied.
        ValueError / RuntimeError: as :func:`measure_latency` for the device and options, and when
            the model or inputs live on another device than ``device``.
        ImportError: the timer cannot be imported (before anything runs).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}.")
    if not isinstance(args, tuple):
        raise TypeError(f"args must be a tuple, got {type(args).__name__}.")
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise TypeError(f"kwargs must be a mapping, got {type(kwargs).__name__}.")
    kwargs = dict(kwargs or {})
    if any(not isinstance(key, str) for key in kwargs):
        raise TypeError("kwargs keys must be strings.")
    warmup, min_run_time, min_repeats = _check_timing(warmup, min_run_time, min_repeats)
    if time_budget is not None:
        if not isinstance(time_budget, Real) or isinstance(time_budget, bool):
            raise TypeError(f"time_budget must be a number of seconds or None, got {type(time_budget).__name__}.")
        if not math.isfinite(time_budget) or time_budget <= 0:
            raise ValueError(f"time_budget must be a finite number of seconds > 0, got {time_budget!r}.")
    dev = normalise_device(device, api="measure_layer_latency")
    input_tensors = _tensors_of((args, kwargs))
    placed = _model_devices(model) | {tensor.device for tensor in input_tensors}
    on_meta = dev.type == "meta" or any(place.type == "meta" for place in placed)
    if on_meta:
        device_name, timer_cls = "meta", None
    else:
        device_name = check_runnable_device(dev, str(device), api="measure_layer_latency")
        wanted = torch.device(device_name)
        stray = sorted({str(place) for place in placed if not _same_device(place, wanted)})
        if stray:
            raise ValueError(
                f"the model or its inputs live on {', '.join(stray)}, but device is '{device_name}': "
                "device must name where the model runs (measure_layer_latency never moves tensors)."
            )
        timer_cls = _load_timer()
    try:
        capture_args, capture_kwargs = _copy_tree((args, kwargs))
    except _CaptureError as exc:
        raise TypeError(f"measure_layer_latency copies its inputs and could not: {exc}.") from None
    inputs_meta = call_meta(args, kwargs)

    with MEASUREMENT_LOCK:
        deadline = None if time_budget is None else time.perf_counter() + float(time_budget)
        spent = f"not timed: the time budget of {time_budget:g} s was spent" if time_budget is not None else ""
        flags = [(module, module.training) for module in model.modules()]
        recorder = _Recorder(model, device_name)
        try:
            if eval_mode:
                model.eval()
            with torch.no_grad():
                handles = [
                    nn.modules.module.register_module_forward_pre_hook(recorder.pre_hook),
                    nn.modules.module.register_module_forward_hook(recorder.post_hook, with_kwargs=True),
                ]
                try:
                    model(*capture_args, **capture_kwargs)
                finally:
                    for handle in handles:
                        handle.remove()
                del capture_args, capture_kwargs
                units = sorted(recorder.units, key=lambda call: call.seq)
                model_report, model_reason = None, None
                if include_model and not on_meta:
                    if deadline is not None and time.perf_counter() > deadline:
                        model_reason = spent
                    else:
                        model_args, model_kwargs = _copy_tree((args, kwargs))
                        model_meta = value_meta((args, kwargs))
                        model_report = _latency_report(
                            lambda: model(*model_args, **model_kwargs),
                            timer_cls=timer_cls,  # type: ignore[arg-type]
                            device_name=device_name,
                            inputs_meta={"supplied": True, "value": model_meta, "dtypes": tensor_dtypes(model_meta)},
                            work_units=1,
                            work_unit="calls",
                            warmup=DEFAULT_WARMUP,
                            min_run_time=DEFAULT_MIN_RUN_TIME,
                            min_repeats=DEFAULT_MIN_REPEATS,
                        )
                layers = []
                for call in units:
                    over = deadline is not None and time.perf_counter() > deadline
                    layers.append(
                        _measure_unit(
                            call, timer_cls, device_name, on_meta, warmup, min_run_time, min_repeats,
                            skip_reason=spent if over else None,
                        )  # fmt: skip
                    )
        finally:
            for module, training in flags:
                module.training = training
    return _layer_report(
        model, layers, model_report, model_reason, device_name, on_meta, inputs_meta, eval_mode,
        warmup, min_run_time, min_repeats, include_model, time_budget,
    )  # fmt: skip


def _measure_unit(
    call: _Call,
    timer_cls: type | None,
    device_name: str,
    on_meta: bool,
    warmup: int,
    min_run_time: float,
    min_repeats: int,
    skip_reason: str | None = None,
) -> LayerLatency:
    record: dict[str, Any] = {
        "path": call.path,
        "call_index": call.call_index,
        "type": call.type,
        "unit": "leaf" if call.leaf else "container",
        "input": call.input_meta,
    }
    reason = None
    if skip_reason is not None:
        reason = skip_reason
    elif on_meta:
        reason = "the meta device holds no data and runs no kernels, so there is no latency to measure"
    elif call.capture_error is not None:
        reason = f"its inputs could not be captured: {call.capture_error}"
    else:
        reason = _stateful_reason(call.module) or call.reason
        if reason is None:
            wanted = torch.device(device_name)
            stray = sorted(
                {
                    str(tensor.device)
                    for tensor in [*_tensors_of((call.args, call.kwargs)), *call.module.parameters()]
                    if not _same_device(tensor.device, wanted)
                }
            )
            if stray:
                reason = f"it ran on {', '.join(stray)}, not on the measured device '{device_name}'"
    timing = None
    if reason is None:
        module, call_args, call_kwargs = call.module, call.args, call.kwargs
        sync, _label = synchronizer(device_name)
        try:
            timing = _time_callable(
                lambda: module(*call_args, **call_kwargs),
                timer_cls=timer_cls,  # type: ignore[arg-type]
                sync=sync,
                threads=torch.get_num_threads(),
                warmup=warmup,
                min_run_time=min_run_time,
                min_repeats=min_repeats,
                first_call=False,  # the capture forward already made this module's first call
            )
        except Exception as exc:  # noqa: BLE001 - a replay failure makes this one call unavailable
            reason = f"replaying it raised {type(exc).__name__}: {exc}"
    call.args = call.kwargs = None
    if timing is None:
        record["metrics"] = {
            "latency": _unavailable_seconds("module_call"),
            "latency_iqr": _unavailable_seconds("module_call"),
        }
        record["timing"] = None
        record["reason"] = reason
        return record  # type: ignore[return-value]
    latency, iqr = _block_statistics(timing["block_durations"], timing["calls_per_block"])
    record["metrics"] = {
        "latency": _seconds(latency, "module_call"),
        "latency_iqr": _seconds(iqr, "module_call"),
    }
    record["timing"] = {
        "block_durations": timing["block_durations"],
        "calls_per_block": timing["calls_per_block"],
        "timed_calls": timing["calls_per_block"] * len(timing["block_durations"]),
    }
    return record  # type: ignore[return-value]


def _layer_report(
    model: nn.Module,
    layers: list[LayerLatency],
    model_report: BenchmarkReport | None,
    model_reason: str | None,
    device_name: str,
    on_meta: bool,
    inputs_meta: dict[str, Any],
    eval_mode: bool,
    warmup: int,
    min_run_time: float,
    min_repeats: int,
    include_model: bool,
    time_budget: float | None,
) -> LayerLatencyReport:
    measured = [layer["metrics"]["latency"]["value"] for layer in layers if layer["metrics"]["latency"]["status"] == "complete"]
    if layers and len(measured) == len(layers):
        layer_sum = metric_result(status="complete", value=sum(measured), unit=UNIT_SECONDS, scope="forward", method=METHOD_TIMER)
    elif measured:
        layer_sum = metric_result(status="partial", known_value=sum(measured), unit=UNIT_SECONDS, scope="forward", method=METHOD_TIMER)
    else:
        layer_sum = _unavailable_seconds("forward")
    if model_report is not None:
        model_latency = copy.deepcopy(model_report["totals"]["latency"])
    elif include_model:
        model_latency = _unavailable_seconds("workload")
    else:
        model_latency = _unavailable_seconds("workload", METHOD_NOT_REQUESTED)
    diagnostics: list[Diagnostic] = []
    if model_reason is not None:
        diagnostics.append(make_diagnostic("model_latency_unavailable", "latency", model_reason, path=""))
    for layer in layers:
        if layer["unit"] == "container":
            diagnostics.append(
                make_diagnostic(
                    "container_replayed_whole",
                    "latency",
                    f"{layer['type']} ran without calling any of its child modules (a fused fast path), "
                    "so it was timed as one unit; its children have no latency of their own",
                    path=layer["path"],
                )
            )
        if "reason" in layer:
            diagnostics.append(make_diagnostic("layer_latency_unavailable", "latency", layer["reason"], path=layer["path"]))
    model_type = f"{type(model).__module__}.{type(model).__qualname__}"
    sync_label = synchronizer(device_name)[1] if not on_meta else "none"
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kind": "layer_latency",
        "context": measurement_context(
            method=f"{METHOD_TIMER} replay of each module call captured with global module hooks",
            cuda_version=torch.version.cuda,
            model_type=model_type,
            execution_mode="evaluation_no_grad" if eval_mode else "as_is_no_grad",
        ),
        "device": device_name,
        "device_name": "meta" if on_meta else device_name_of(device_name),
        "hardware": hardware_info(),
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "timing": {
            "warmup": warmup,
            "min_run_time": min_run_time,
            "min_repeats": min_repeats,
            "synchronization": sync_label,
            "timer": f"{METHOD_TIMER}.blocked_autorange",
            "time_budget": time_budget,
        },
        "inputs": inputs_meta,
        "layers": layers,
        "totals": {"layer_latency_sum": layer_sum, "model_latency": model_latency},
        "model": model_report,
        "diagnostics": diagnostics,
    }
    return report  # type: ignore[return-value]

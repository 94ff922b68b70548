"""Latency of a caller-controlled workload (docs/measurement.md).

:func:`measure_latency` times one zero-argument callable with ``torch.utils.benchmark.Timer``
(:func:`~torchscan_lsp.engine.measuring.timing.time_workload`):

1. a **first call**, between two explicit device synchronisations, on an ordinary clock;
2. ``warmup`` explicit warm-up calls;
3. the Timer's own calibration and **timed blocks** (``blocked_autorange``), topped up with blocks of
   the same size until there are at least ``min_repeats``; the Timer's clock synchronises the device
   before every reading, so each block covers completed work.

Its report (:class:`BenchmarkReport`) gives ``latency`` (median of the block averages),
``latency_iqr`` (their interquartile range), ``throughput`` (declared work units completed across the
timed blocks divided by their total elapsed seconds) and ``first_call_latency`` as metric objects,
with the raw block durations, calls per block and timed call count they were computed from, so that
anyone can recompute them. Per-layer latency is :mod:`.layer_latency`.

Timing imports are lazy: a missing benchmark dependency raises an actionable ``ImportError`` before
anything runs. All timing holds the process-wide measurement lock.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Real
from typing import Any, TypedDict

import torch

from torchscan_lsp.engine.measuring.shared import (
    MEASUREMENT_LOCK,
    check_runnable_device,
    device_name_of,
    hardware_info,
    measurement_context,
    normalise_device,
    synchronizer,
    tensor_dtypes,
)
from torchscan_lsp.engine.recording.inputs import value_meta
from torchscan_lsp.engine.report import SCHEMA_VERSION, MetricResult, metric_result
from torchscan_lsp.engine.measuring.timing import (
    METHOD_FIRST_CALL,
    METHOD_TIMER,
    block_statistics,
    check_timing,
    load_timer,
    same_device,
    seconds,
    tensors_of,
    time_workload,
)

__all__ = [
    "MeasurementHeader",
    "BenchmarkReport",
    "measure_latency",
    "latency_report",
    "DEFAULT_WARMUP",
    "DEFAULT_MIN_RUN_TIME",
    "DEFAULT_MIN_REPEATS",
]

#: ``measure_latency`` defaults: explicit warm-up calls (one after the first call; the Timer's
#: calibration then calls the workload again before any timed block), the Timer's minimum timed
#: seconds, and the minimum number of timed blocks (the IQR needs at least two).
DEFAULT_WARMUP = 1
DEFAULT_MIN_RUN_TIME = 0.5
DEFAULT_MIN_REPEATS = 3


class MeasurementHeader(TypedDict):
    """The keys every timing report starts with: schema, kind, context, where it ran and with how
    many threads (``kind`` ``"latency"`` or ``"layer_latency"``)."""

    schema_version: int
    kind: str
    context: dict[str, Any]
    device: str
    device_name: str
    hardware: dict[str, Any]
    threads: int
    interop_threads: int


class BenchmarkReport(MeasurementHeader):
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

    work_units: float
    work_unit: str
    timing: dict[str, Any]
    inputs: dict[str, Any]
    block_durations: list[float]
    calls_per_block: int
    timed_calls: int
    totals: dict[str, MetricResult]


def _check_inputs_device(value: Any, device_name: str) -> None:
    wanted = torch.device(device_name)
    for tensor in tensors_of(value):
        if not same_device(tensor.device, wanted):
            raise ValueError(
                f"inputs hold a tensor on '{tensor.device}', but device is '{device_name}': "
                "device must name where the workload runs (measure_latency never moves tensors)."
            )


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
    warmup, min_run_time, min_repeats = check_timing(warmup, min_run_time, min_repeats)
    dev = normalise_device(device, api="measure_latency")
    device_name = check_runnable_device(dev, str(device), api="measure_latency")
    if inputs is not None:
        _check_inputs_device(inputs, device_name)
    timer_cls = load_timer()
    inputs_meta: dict[str, Any] = {"supplied": inputs is not None}
    if inputs is not None:
        value = value_meta(inputs)
        inputs_meta.update({"value": value, "dtypes": tensor_dtypes(value)})
    with MEASUREMENT_LOCK:
        return latency_report(
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


def latency_report(
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
    """Time ``workload`` and build its :class:`BenchmarkReport` (arguments already validated; the
    caller holds the measurement lock). Per-layer latency times the whole model through this."""
    sync, sync_label = synchronizer(device_name)
    threads = torch.get_num_threads()
    timing = time_workload(
        workload,
        timer_cls=timer_cls,
        sync=sync,
        threads=threads,
        warmup=warmup,
        min_run_time=min_run_time,
        min_repeats=min_repeats,
    )
    blocks, per_block = timing["block_durations"], timing["calls_per_block"]
    latency, iqr = block_statistics(blocks, per_block)
    timed_calls = per_block * len(blocks)
    units = int(work_units) if float(work_units).is_integer() else float(work_units)
    throughput = units * timed_calls / sum(blocks)
    totals = {
        "first_call_latency": seconds(timing["first_call"], "workload", METHOD_FIRST_CALL),
        "latency": seconds(latency, "workload"),
        "latency_iqr": seconds(iqr, "workload"),
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

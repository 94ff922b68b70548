"""Peak memory of one owner-provided workload (docs/measurement.md).

``measure_peak_memory(workload, *, device)`` runs a zero-argument callable exactly once and reports
the memory PyTorch tracked while it ran:

* CPU: the profiler's memory timeline (``torch.profiler`` with ``profile_memory=True``), summed over
  its categories; metric ``pytorch_tensor_bytes``.
* CUDA and MPS: the caching allocator's peak statistics; metric ``pytorch_reserved_bytes`` plus
  ``allocated_peak_bytes``.

It never warms up, repeats, moves, resets caches (no ``empty_cache``) or rolls back, and workload
exceptions propagate unchanged. The whole call holds the process-wide measurement lock.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
import warnings
from collections.abc import Callable
from typing import Any, TypedDict

import torch

from torchscan_lsp.engine.measuring.shared import (
    MEASUREMENT_LOCK,
    allocator_settings,
    device_name_of,
    execution_state,
    hardware_info,
    measurement_context,
)
from torchscan_lsp.engine.report import SCHEMA_VERSION

__all__ = ["MemoryReport", "measure_peak_memory"]

#: The timestamp the profiler gives tensors that existed before profiling started.
_PREEXISTING_TIME = -1
_METHODS = {
    "cpu": "torch.profiler memory timeline (profile_memory=True)",
    "cuda": "torch.cuda caching allocator statistics",
    "mps": "torch.accelerator.memory allocator statistics",
}
_CUDA_APIS = ("synchronize", "memory_reserved", "reset_peak_memory_stats", "max_memory_reserved", "max_memory_allocated")
_MPS_MEMORY_APIS = ("memory_reserved", "reset_peak_memory_stats", "max_memory_reserved", "max_memory_allocated")


class _MemoryReportBase(TypedDict):
    schema_version: int
    device: str
    metric: str
    baseline_bytes: int
    peak_bytes: int
    delta_bytes: int
    context: dict[str, Any]


class MemoryReport(_MemoryReportBase, total=False):
    """What :func:`measure_peak_memory` returns (docs/measurement.md: the reference's fields plus a
    version and a context).

    ``allocated_peak_bytes`` is present on CUDA and MPS only; ``peak_by_category`` on CPU only:
    the bytes of each of the profiler's categories live at the peak (they sum to ``peak_bytes``).
    """

    allocated_peak_bytes: int
    peak_by_category: dict[str, int]


def measure_peak_memory(workload: Callable[[], Any], *, device: str | torch.device) -> MemoryReport:
    """Run ``workload`` once on ``device`` and report baseline, peak and delta bytes.

    Args:
        workload: a zero-argument callable that does the work to measure (the caller owns its
            eval/train state, grad mode, precision and transfers).
        device: where the workload runs: ``"cpu"``, ``"cuda"``/``"cuda:<i>"`` or ``"mps"``.

    Returns:
        ``{"schema_version": 1, "device", "metric", "baseline_bytes", "peak_bytes", "delta_bytes",
        ["allocated_peak_bytes"], "context"}`` — all byte fields are ``int`` and
        ``delta_bytes = peak_bytes - baseline_bytes``.

    Raises:
        RuntimeError: CUDA/MPS device unavailable (the workload is not called), or the CPU profiler
            exported no timeline points.
        NotImplementedError: a required allocator API is missing, or the device type is not
            supported (e.g. ``meta``).
    """
    with MEASUREMENT_LOCK:
        requested = device
        device = torch.device(device)
        state = execution_state(device.type)
        if device.type == "cpu":
            result: dict[str, Any] = _measure_cpu(workload)
        elif device.type == "cuda":
            result = _measure_cuda(workload, device, requested)
        elif device.type == "mps":
            result = _measure_mps(workload, device)
        else:
            raise NotImplementedError(f"Peak memory measurement is not implemented for '{device}'.")
        report: dict[str, Any] = {"schema_version": SCHEMA_VERSION, **result, "context": _context(result["device"], state)}
        return report  # type: ignore[return-value]


def _context(device_name: str, state: dict[str, Any]) -> dict[str, Any]:
    """What the contract asks users to keep beside a memory number: versions, hardware, the state the
    workload was called in, and the allocator's settings (CUDA, MPS)."""
    device_type = device_name.split(":", 1)[0]
    try:
        hardware_name = device_name_of(device_name)
    except (RuntimeError, AssertionError, AttributeError) as exc:  # a driver that cannot name the device
        hardware_name = f"unknown ({type(exc).__name__})"
    context = measurement_context(
        method=_METHODS[device_type],
        device_name=hardware_name,
        hardware=hardware_info(),
        cuda_version=torch.version.cuda,
        **state,
    )
    allocator = allocator_settings(device_type)
    if allocator is not None:
        context["allocator"] = allocator
    return context


def _measure_cpu(workload: Callable[[], Any]) -> dict[str, Any]:
    from torch.profiler import ProfilerActivity, profile

    handle = tempfile.NamedTemporaryFile(suffix=".raw.json.gz", delete=False)
    path = handle.name
    handle.close()
    try:
        with profile(
            activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True
        ) as profiler:
            workload()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*export_memory_timeline.*", category=FutureWarning)
            profiler.export_memory_timeline(path, device="cpu")
        with gzip.open(path, "rt", encoding="utf-8") as timeline:
            events = json.load(timeline)
        baseline, peak, by_category = _replay(events)
        return {
            "device": "cpu",
            "metric": "pytorch_tensor_bytes",
            "baseline_bytes": baseline,
            "peak_bytes": peak,
            "delta_bytes": peak - baseline,
            "peak_by_category": by_category,
        }
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def cpu_peak(events: list[list[int]]) -> tuple[int, int]:
    """``(baseline, peak)`` bytes from the profiler's raw memory events.

    Each event is ``[timestamp, action, signed bytes, category]`` (``export_memory_timeline`` with a
    ``.raw.json.gz`` path). Pre-existing tensors (timestamp ``-1``: allocated before the workload
    started, seen when it used them) make the baseline; then every creation adds its bytes and every
    destruction subtracts them, in order, and the peak is the largest running total (never below the
    baseline). An empty workload has no events: ``(0, 0)``.

    This departs from the reference, whose baseline is the first point of the coalesced timeline:
    that point already holds the workload's first allocation, so ``lambda: torch.ones(1024, 1024)``
    showed a delta of 0 (docs/measurement.md).
    """
    baseline, peak, _ = _replay(events)
    return baseline, peak


def _replay(events: list[list[int]]) -> tuple[int, int, dict[str, int]]:
    """:func:`cpu_peak`'s replay, also keeping the bytes of each of the profiler's categories live
    at the peak (``parameters``, ``optimizer_state``, ``inputs``, ``temporaries``, ``activations``,
    ``gradients``, ``autograd_detail``, ``unknown``: an event's fourth field indexes
    ``torch.profiler._memory_profiler._CATEGORY_TO_INDEX``; they sum to the peak)."""
    from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX

    plural = {"parameter": "parameters", "input": "inputs", "temporary": "temporaries",
              "activation": "activations", "gradient": "gradients"}
    names = {index: "unknown" if category is None else plural.get(category.name.lower(), category.name.lower())
             for category, index in _CATEGORY_TO_INDEX.items()}
    live = dict.fromkeys(names.values(), 0)
    baseline = 0
    for event in events:  # tensors that existed before the workload: the baseline
        if int(event[0]) == _PREEXISTING_TIME:
            live[names.get(int(event[3]), "unknown")] += int(event[2])
            baseline += int(event[2])
    total = peak = baseline
    at_peak = dict(live)
    for event in events:
        if int(event[0]) == _PREEXISTING_TIME:
            continue
        live[names.get(int(event[3]), "unknown")] += int(event[2])
        total += int(event[2])
        if total > peak:
            peak, at_peak = total, dict(live)
    return baseline, peak, at_peak


def _measure_cuda(workload: Callable[[], Any], device: torch.device, requested: Any) -> dict[str, Any]:
    cuda = torch.cuda
    if not cuda.is_available():
        raise RuntimeError(f"CUDA device '{requested}' is unavailable.")
    index = device.index if device.index is not None else cuda.current_device()
    name = f"cuda:{index}"
    count = cuda.device_count()
    if index >= count:
        raise RuntimeError(f"CUDA device '{name}' is unavailable: {count} CUDA device(s) visible.")
    missing = [f"torch.cuda.{api}" for api in _CUDA_APIS if not callable(getattr(cuda, api, None))]
    if missing:
        raise NotImplementedError(
            f"Peak memory on '{name}' needs APIs that PyTorch {torch.__version__} lacks: {', '.join(missing)}."
        )
    dev = torch.device(name)
    cuda.synchronize(dev)
    baseline = int(cuda.memory_reserved(dev))
    cuda.reset_peak_memory_stats(dev)
    workload()
    cuda.synchronize(dev)
    peak = int(cuda.max_memory_reserved(dev))
    allocated_peak = int(cuda.max_memory_allocated(dev))
    return {
        "device": name,
        "metric": "pytorch_reserved_bytes",
        "baseline_bytes": baseline,
        "peak_bytes": peak,
        "delta_bytes": peak - baseline,
        "allocated_peak_bytes": allocated_peak,
    }


def _measure_mps(workload: Callable[[], Any], device: torch.device) -> dict[str, Any]:
    if device.index not in (None, 0):
        raise RuntimeError(f"MPS device 'mps:{device.index}' is unavailable.")
    backend = getattr(torch.backends, "mps", None)
    if backend is None or not backend.is_available():
        raise RuntimeError("MPS device 'mps' is unavailable.")
    accelerator = getattr(torch, "accelerator", None)
    memory = getattr(accelerator, "memory", None) if accelerator is not None else None
    missing = [
        f"torch.accelerator.memory.{api}" for api in _MPS_MEMORY_APIS if not callable(getattr(memory, api, None))
    ]
    mps = getattr(torch, "mps", None)
    if not callable(getattr(mps, "synchronize", None)):
        missing.append("torch.mps.synchronize")
    if missing:
        raise NotImplementedError(
            f"Peak memory on 'mps' needs APIs that PyTorch {torch.__version__} lacks: {', '.join(missing)}."
        )
    dev = torch.device("mps")
    mps.synchronize()
    try:
        baseline = int(memory.memory_reserved(dev))
        memory.reset_peak_memory_stats(dev)
    except (NotImplementedError, RuntimeError) as exc:
        names = ", ".join(f"torch.accelerator.memory.{api}" for api in _MPS_MEMORY_APIS)
        raise NotImplementedError(
            f"Peak memory on 'mps' needs allocator statistics that PyTorch {torch.__version__} "
            f"does not provide for MPS ({names}): {exc}"
        ) from exc
    workload()
    mps.synchronize()
    peak = int(memory.max_memory_reserved(dev))
    allocated_peak = int(memory.max_memory_allocated(dev))
    return {
        "device": "mps",
        "metric": "pytorch_reserved_bytes",
        "baseline_bytes": baseline,
        "peak_bytes": peak,
        "delta_bytes": peak - baseline,
        "allocated_peak_bytes": allocated_peak,
    }

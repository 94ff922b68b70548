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

import json
import os
import tempfile
import warnings
from collections.abc import Callable
from typing import Any, TypedDict

import torch

from torchscan_lsp.engine._measuring import MEASUREMENT_LOCK, measurement_context
from torchscan_lsp.engine.report import SCHEMA_VERSION

__all__ = ["MemoryReport", "measure_peak_memory"]

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
    the bytes of the timeline's peak point by the profiler's categories (``parameters``,
    ``optimizer_state``, ``inputs``, ``temporaries``, ``activations``, ``gradients``,
    ``autograd_detail``, ``unknown``), which sum to ``peak_bytes``.
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
        if device.type == "cpu":
            result: dict[str, Any] = _measure_cpu(workload)
        elif device.type == "cuda":
            result = _measure_cuda(workload, device, requested)
        elif device.type == "mps":
            result = _measure_mps(workload, device)
        else:
            raise NotImplementedError(f"Peak memory measurement is not implemented for '{device}'.")
        report: dict[str, Any] = {"schema_version": SCHEMA_VERSION, **result, "context": measurement_context()}
        return report  # type: ignore[return-value]


def _measure_cpu(workload: Callable[[], Any]) -> dict[str, Any]:
    from torch.profiler import ProfilerActivity, profile

    handle = tempfile.NamedTemporaryFile(suffix=".json", delete=False)
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
        with open(path, encoding="utf-8") as timeline:
            _timestamps, points = json.load(timeline)
        totals = [int(sum(point)) for point in points]
        if not totals:
            raise RuntimeError(f"PyTorch {torch.__version__} exported no memory timeline points for 'cpu'.")
        baseline, peak = totals[0], max(totals)
        return {
            "device": "cpu",
            "metric": "pytorch_tensor_bytes",
            "baseline_bytes": baseline,
            "peak_bytes": peak,
            "delta_bytes": peak - baseline,
            "peak_by_category": _timeline_categories(points[totals.index(peak)]),
        }
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _timeline_categories(point: list[int]) -> dict[str, int]:
    """Name the sizes of one memory-timeline point: PyTorch writes ``[0, size of category 0, ...]`` in
    the order of ``torch.profiler._memory_profiler._CATEGORY_TO_INDEX`` (``None``: uncategorised)."""
    from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX

    plural = {"parameter": "parameters", "input": "inputs", "temporary": "temporaries",
              "activation": "activations", "gradient": "gradients"}
    named: dict[str, int] = {}
    for category, index in _CATEGORY_TO_INDEX.items():
        name = "unknown" if category is None else category.name.lower()
        named[plural.get(name, name)] = int(point[index + 1]) if index + 1 < len(point) else 0
    return named


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

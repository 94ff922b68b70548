"""Shared plumbing of the measurement APIs (peak memory, latency, per-layer latency).

* :data:`MEASUREMENT_LOCK` serialises every measurement in the process: timings and allocator
  statistics are process-global, so two measurements must never overlap. It is re-entrant so that
  per-layer latency can hold it across its many timings.
* :func:`measurement_context` is the execution context every measurement report carries
  (docs/measurement.md; the package version is looked up on every call, never cached).
* :func:`tensor_dtypes` lists the dtypes found in value metadata (``inputs.value_meta``).
* Device helpers normalise a device, check that it can run work, name its hardware and synchronise
  it explicitly (on every supported PyTorch, without relying on ``torch.accelerator``).
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
import threading
from collections.abc import Callable
from typing import Any

import torch

from torchscan_lsp.engine.report import PACKAGE
from torchscan_lsp.version import package_version

#: Process-wide lock: one measurement at a time (memory, latency, per-layer latency).
MEASUREMENT_LOCK = threading.RLock()


def measurement_context(**extra: Any) -> dict[str, Any]:
    """The execution context of a measurement report: package, versions, and ``extra`` keys."""
    context: dict[str, Any] = {
        "torchscan_version": package_version(),
        "package": PACKAGE,
        "torch_version": str(torch.__version__),
        "python_version": platform.python_version(),
    }
    context.update(extra)
    return context


def execution_state(device_type: str) -> dict[str, Any]:
    """The process state a measurement ran under, read when it was called (the workload may change
    it for itself): grad mode, inference mode, autocast on ``device_type`` and the thread counts."""
    try:
        autocast = {
            "device_type": device_type,
            "enabled": bool(torch.is_autocast_enabled(device_type)),
            "dtype": str(torch.get_autocast_dtype(device_type)),
        }
    except (TypeError, RuntimeError, AttributeError):  # PyTorch without per-device autocast queries
        autocast = {"device_type": device_type, "enabled": None, "dtype": None}
    return {
        "grad_enabled": torch.is_grad_enabled(),
        "inference_mode": torch.is_inference_mode_enabled(),
        "autocast": autocast,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
    }


#: Environment variables that configure each backend's caching allocator.
_ALLOCATOR_ENV = {
    "cuda": ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING"),
    "mps": ("PYTORCH_MPS_HIGH_WATERMARK_RATIO", "PYTORCH_MPS_LOW_WATERMARK_RATIO"),
}


def allocator_settings(device_type: str) -> dict[str, Any] | None:
    """The caching allocator's backend and environment settings on CUDA and MPS; ``None`` on CPU,
    whose allocator has no settings PyTorch exposes."""
    names = _ALLOCATOR_ENV.get(device_type)
    if names is None:
        return None
    settings: dict[str, Any] = {"env": {name: os.environ.get(name) for name in names}}
    if device_type == "cuda":
        try:
            settings["backend"] = str(torch.cuda.get_allocator_backend())
        except (AttributeError, RuntimeError):
            settings["backend"] = None
    return settings


def tensor_dtypes(meta: dict[str, Any]) -> list[str]:
    """Sorted unique dtypes of every tensor in a ``value_meta`` tree."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("kind") == "tensor":
                found.add(node["dtype"])
                return
            for item in node.get("items", ()):
                walk(item["value"] if node.get("kind") == "mapping" else item)

    walk(meta)
    return sorted(found)


def normalise_device(device: Any, *, api: str) -> torch.device:
    """``torch.device(device)`` with clear errors: ``TypeError`` for a wrong type, ``ValueError``
    for a string PyTorch does not understand."""
    if isinstance(device, torch.device):
        return device
    if not isinstance(device, (str, int)) or isinstance(device, bool):
        raise TypeError(f"{api}: device must be a str or torch.device, got {type(device).__name__}.")
    try:
        return torch.device(device)
    except (RuntimeError, ValueError) as exc:
        raise ValueError(f"{api}: unknown device {device!r} ({exc}).") from None


def check_runnable_device(device: torch.device, requested: Any, *, api: str) -> str:
    """Check that ``device`` can run timed work; return its canonical name (``cpu``, ``cuda:<i>``, ``mps``).

    Raises:
        ValueError: a device type latency cannot be measured on (``meta`` and any backend other
            than CPU, CUDA and MPS).
        RuntimeError: a CUDA or MPS device that is not available in this process.
    """
    if device.type == "cpu":
        return "cpu"
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(f"CUDA device '{requested}' is unavailable.")
        index = device.index if device.index is not None else torch.cuda.current_device()
        count = torch.cuda.device_count()
        if index >= count:
            raise RuntimeError(f"CUDA device 'cuda:{index}' is unavailable: {count} CUDA device(s) visible.")
        return f"cuda:{index}"
    if device.type == "mps":
        if device.index not in (None, 0):
            raise RuntimeError(f"MPS device 'mps:{device.index}' is unavailable.")
        backend = getattr(torch.backends, "mps", None)
        if backend is None or not backend.is_available():
            raise RuntimeError("MPS device 'mps' is unavailable.")
        return "mps"
    if device.type == "meta":
        raise ValueError(
            f"{api}: the meta device holds no data and runs no kernels, so it has no latency; "
            "measure on 'cpu', 'cuda' or 'mps'."
        )
    raise ValueError(f"{api} supports 'cpu', 'cuda' and 'mps' devices, not {device.type!r}.")


def synchronizer(device_name: str) -> tuple[Callable[[], None] | None, str]:
    """The explicit synchronisation of a canonical device and its label (``None`` on CPU)."""
    if device_name.startswith("cuda"):
        index = int(device_name.split(":", 1)[1])
        return (lambda: torch.cuda.synchronize(index)), "torch.cuda.synchronize"
    if device_name == "mps":
        return torch.mps.synchronize, "torch.mps.synchronize"
    return None, "none (cpu work completes before the call returns)"


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU (or SoC) model name: ``/proc/cpuinfo``, ``sysctl`` on macOS, then ``platform``.

    Cached: the hardware of a running process does not change (unlike the package version).
    """
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            fields: dict[str, str] = {}
            for line in handle:
                key, sep, value = line.partition(":")
                if sep and key.strip() and value.strip():
                    fields.setdefault(key.strip().lower(), value.strip())
        for key in ("model name", "hardware", "cpu model", "processor", "uarch"):
            value = fields.get(key, "")
            if value and not value.isdigit():
                return value
    except OSError:
        pass
    if platform.system() == "Darwin":
        try:
            result = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=5, check=False
            )
            if result.returncode == 0 and result.stdout.strip():
                return result.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or "unknown"


def device_name_of(device_name: str) -> str:
    """The hardware model behind a canonical device: the GPU name on CUDA, the CPU/SoC otherwise."""
    if device_name.startswith("cuda"):
        return str(torch.cuda.get_device_name(int(device_name.split(":", 1)[1])))
    return cpu_model()


def hardware_info() -> dict[str, Any]:
    """Host facts recorded beside the device name."""
    return {"machine": platform.machine(), "cpu_model": cpu_model(), "cpu_count": os.cpu_count()}

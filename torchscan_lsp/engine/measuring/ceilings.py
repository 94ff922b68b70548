"""This machine's ceilings: the matmul FLOP/s it reaches for a dtype and the memory bandwidth it
streams at, measured with ``torch.utils.benchmark.Timer`` and kept on disk.

* **Compute**: ``torch.mm`` of two ``n x n`` matrices of the dtype into a preallocated output
  (``2·n³`` FLOPs each, PyTorch's ``mm_flop``), on the threads this process runs with
  (``torch.get_num_threads()``; the Timer is told the same count), ``n`` = 512 on a CPU and 8192
  on a GPU: large enough to run at the BLAS kernel's peak (a CPU's operands then sit in its L2 and
  L3, as a peak measurement wants), short enough for many blocks, of which a loaded machine leaves
  some uninterrupted.
* **Memory**: buffers of at least 8x the last-level cache (the CPU's from
  ``/sys/devices/system/cpu/cpu0/cache`` or ``lscpu``; a GPU's L2 from
  ``torch.cuda.get_device_properties``), and never below 256 MiB, so that nothing of them stays in
  a cache between calls. Each call streams the next chunk of the buffers in turn (half the cache
  each, :func:`chunk_bytes`): every chunk was flushed by the others since its last visit, and a
  call lasts milliseconds, so that there are many blocks. Two patterns: a copy (``dst.copy_(src)``:
  ``2·N`` bytes, one read and one write of each byte, STREAM's convention) and a read
  (``src.sum()``: ``N`` bytes). The bandwidth ceiling is the faster of the two: a layer that mostly
  reads (a ``Linear`` over large weights) streams at the read rate, which a copy's write-allocate
  traffic can hide.

A ceiling is what the machine *reaches*, so each one's ``value`` is its fastest block, and its spread
is reported beside it: the block rates' slowest (``low``), ``median``, first and third quartiles
(``q1``, ``q3``) and the number of blocks; on a loaded machine the median falls and the spread
widens while the fastest block stays nearer the hardware's rate. Two measurements agree when their
spreads, from the slowest block to the fastest, overlap.

The result is kept as JSON under ``cache_dir`` (the worker passes
``contract.folders.cache_folder("ceilings")``), one file per machine, device, dtype, thread count
and PyTorch version, and measured again only when none is there or ``refresh`` is set; measured
again, each ceiling keeps the higher of its kept and its new rate, so a first measurement on a busy
machine is raised, never lowered, by the next.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import statistics
import subprocess
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

import torch

from torchscan_lsp.engine.measuring.shared import (
    MEASUREMENT_LOCK,
    check_runnable_device,
    device_name_of,
    measurement_context,
    normalise_device,
    synchronizer,
)
from torchscan_lsp.engine.measuring.timing import load_timer
from torchscan_lsp.engine.report import SCHEMA_VERSION, metric_result

__all__ = ["CEILINGS_FORMAT", "METHOD_CEILINGS", "MIN_BUFFER_BYTES", "measure_ceilings", "last_level_cache",
           "buffer_bytes", "chunk_bytes", "block_rates", "ceilings_agree"]

#: Version of the cached file's layout: part of its key, so an older layout is never read.
CEILINGS_FORMAT = 1
#: The method label of a measured ceiling.
METHOD_CEILINGS = "torch.utils.benchmark.Timer.blocked_autorange"
#: The smallest buffer the bandwidth is measured on, bytes.
MIN_BUFFER_BYTES = 256 << 20
#: Buffers are at least this many times the last-level cache.
CACHE_MULTIPLE = 8
#: Matrix side of the compute measurement per device type.
MATMUL_SIDE = {"cpu": 512, "cuda": 8192, "mps": 4096}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]?)(?:i?B)?\s*$", re.IGNORECASE)


def _size_bytes(text: str) -> int | None:
    """``"32768K"`` -> 33554432 (sysfs and ``lscpu`` sizes are binary)."""
    match = _SIZE.match(text)
    if match is None:
        return None
    return int(float(match[1]) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match[2].upper()])


def _sysfs_cache(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> tuple[int, str] | None:
    found: list[tuple[int, int, str]] = []
    for index in sorted(root.glob("index*")):
        try:
            level = int((index / "level").read_text().strip())
            kind = (index / "type").read_text().strip()
            size = _size_bytes((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind in ("Unified", "Data") and size:
            found.append((level, size, str(index / "size")))
    if not found:
        return None
    level, size, source = max(found)
    return size, source


def _lscpu_cache() -> tuple[int, str] | None:
    try:
        done = subprocess.run(["lscpu", "-B"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    sizes = {}
    for line in done.stdout.splitlines():
        match = re.match(r"^\s*L(\d)\s*(?:d\s*)?cache:\s*(\d+)", line)
        if match:
            sizes[int(match[1])] = int(match[2])
    if not sizes:
        return None
    return sizes[max(sizes)], "lscpu -B"


def last_level_cache(device_name: str = "cpu") -> tuple[int | None, str]:
    """``(bytes, where it was read)`` of the last-level cache of ``device_name`` (``"cpu"`` or
    ``"cuda:<i>"``): the highest-level data or unified cache of CPU 0 in sysfs, else ``lscpu -B``;
    a GPU's L2. ``(None, reason)`` when it cannot be read."""
    if device_name.startswith("cuda"):
        properties = torch.cuda.get_device_properties(int(device_name.split(":", 1)[1]))
        size = getattr(properties, "L2_cache_size", None) or None
        return size, "torch.cuda.get_device_properties().L2_cache_size" if size else "unknown (no L2 size reported)"
    for reader in (_sysfs_cache, _lscpu_cache):
        found = reader()
        if found is not None:
            return found
    return None, "unknown (no sysfs cache entries, no lscpu)"


def buffer_bytes(cache_bytes: int | None) -> int:
    """Bytes of each bandwidth buffer: :data:`CACHE_MULTIPLE` times the last-level cache, at least
    :data:`MIN_BUFFER_BYTES` (and that much when the cache size is unknown), a multiple of 1 MiB."""
    wanted = max(MIN_BUFFER_BYTES, CACHE_MULTIPLE * (cache_bytes or 0))
    return -(-wanted // (1 << 20)) * (1 << 20)


def chunk_bytes(cache_bytes: int | None, size: int) -> int:
    """Bytes each timed call streams: half the last-level cache (8 MiB when unknown), at least 1 MiB
    and at most a sixteenth of the buffer, so that between two visits to a chunk the other chunks
    move at least 15 times its size through the caches."""
    half = (cache_bytes or 16 << 20) // 2
    chunk = max(1 << 20, min(half, size // 16))
    return chunk - chunk % (1 << 20) or 1 << 20


def block_rates(block_times: list[float], calls_per_block: int, work: float) -> dict[str, Any]:
    """The rate of each timed block (``work`` per call over the block's mean call time) summarised:
    ``value`` (the fastest block: the ceiling), ``low`` (the slowest), ``median``, ``q1``, ``q3``
    (linear interpolation, numpy's default) and ``blocks``."""
    rates = sorted(work * calls_per_block / duration for duration in block_times if duration > 0)
    if len(rates) >= 2:
        q1, _, q3 = statistics.quantiles(rates, n=4, method="inclusive")
    else:
        q1 = q3 = rates[0]
    return {"value": rates[-1], "low": rates[0], "median": statistics.median(rates), "q1": q1, "q3": q3,
            "blocks": len(rates)}


def ceilings_agree(first: dict[str, Any], second: dict[str, Any]) -> bool:
    """Whether two measurements of one ceiling agree: their spreads, each from its slowest block to
    its fastest, overlap (neither one's ceiling lies below every block of the other)."""
    return first["low"] <= second["value"] and second["low"] <= first["value"]


def _ceiling(rates: dict[str, Any], unit: str, method: str, **detail: Any) -> dict[str, Any]:
    metric = metric_result(status="complete", value=rates["value"], unit=unit, scope="device", method=method)
    return {**metric, **{key: rates[key] for key in ("low", "median", "q1", "q3", "blocks")}, **detail}


def _timed(stmt: Any, *, clock: Any, threads: int, min_run_time: float) -> tuple[list[float], int]:
    timer = load_timer()(stmt="__ceiling()", globals={"__ceiling": stmt}, timer=clock, num_threads=threads)
    stmt()  # first call: allocation, kernel selection, page faults
    measurement = timer.blocked_autorange(min_run_time=min_run_time)
    blocks = [float(t) for t in measurement.raw_times]
    while len(blocks) < 5:  # a spread of fewer blocks says little
        blocks += [float(t) for t in timer.timeit(int(measurement.number_per_run)).raw_times]
    return blocks, int(measurement.number_per_run)


def _clock(device_name: str) -> Any:
    sync = synchronizer(device_name)[0]
    if sync is None:
        return timeit.default_timer

    def synchronized() -> float:
        sync()
        return timeit.default_timer()

    return synchronized


def _compute(device_name: str, dtype: torch.dtype, threads: int, min_run_time: float) -> dict[str, Any]:
    side = MATMUL_SIDE.get(device_name.split(":")[0], 1024)
    a = torch.rand(side, side, device=device_name).to(dtype)
    b = torch.rand(side, side, device=device_name).to(dtype)
    out = torch.empty(side, side, device=device_name, dtype=dtype)
    blocks, per_block = _timed(lambda: torch.mm(a, b, out=out), clock=_clock(device_name), threads=threads,
                               min_run_time=min_run_time)
    rates = block_rates(blocks, per_block, 2.0 * side**3)
    return _ceiling(rates, "FLOP/s", f"{METHOD_CEILINGS}: torch.mm of {side}x{side} {str(dtype).removeprefix('torch.')} "
                    "matrices, 2·n³ FLOPs each", matrix_side=side)


def _memory(device_name: str, threads: int, min_run_time: float, cache_bytes: int | None) -> dict[str, Any]:
    size = buffer_bytes(cache_bytes)
    chunk = chunk_bytes(cache_bytes, size)
    count = size // chunk
    src = torch.ones(size // 4, device=device_name).view(count, -1)  # the values do not matter, only the pages
    dst = torch.zeros_like(src)
    clock = _clock(device_name)
    patterns = {}
    for name, step, moved in (("copy", lambda i: dst[i].copy_(src[i]), 2 * chunk), ("read", lambda i: src[i].sum(), chunk)):
        turn = iter(range(1 << 62))

        def stmt(step: Any = step, turn: Any = turn) -> None:
            step(next(turn) % count)  # the next chunk in turn: the others have flushed it from every cache

        blocks, per_block = _timed(stmt, clock=clock, threads=threads, min_run_time=min_run_time)
        patterns[name] = {**block_rates(blocks, per_block, float(moved)), "bytes_per_call": moved}
    best = max(patterns, key=lambda name: patterns[name]["value"])
    method = (f"{METHOD_CEILINGS}: the faster of a copy (dst.copy_(src), read + write bytes) and a read (src.sum()), "
              f"chunk after chunk ({chunk >> 20} MiB each) of {size >> 20} MiB buffers")
    return _ceiling(patterns[best], "bytes/s", method, pattern=best, buffer_bytes=size, chunk_bytes=chunk,
                    patterns=patterns)


def _key(device_name: str, hardware: str, dtype: torch.dtype, threads: int) -> str:
    material = {"format": CEILINGS_FORMAT, "host": platform.node(), "device": device_name, "hardware": hardware,
                "dtype": str(dtype), "threads": threads, "torch": str(torch.__version__)}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:24]


def _read(path: Path) -> dict[str, Any] | None:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and found.get("kind") == "ceilings" else None


def _write(path: Path, report: dict[str, Any]) -> None:
    """Write atomically (a temporary file beside it, then renamed): two workers measuring at once
    never leave half a file; an unwritable folder only loses the cache."""
    with contextlib.suppress(OSError):
        handle, temporary = tempfile.mkstemp(prefix=".ceilings.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(report, out, indent=1)
            os.replace(temporary, path)
        except OSError:
            os.unlink(temporary)


def measure_ceilings(
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    refresh: bool = False,
    min_run_time: float = 1.0,
) -> dict[str, Any]:
    """This machine's compute and memory ceilings on ``device`` for ``dtype`` (see the module
    docstring for what is timed and how).

    Args:
        device: ``"cpu"`` or a CUDA device (``"cuda"``, ``"cuda:1"``).
        dtype: the floating dtype of the matmuls (the bandwidth does not depend on it).
        cache_dir: a folder to keep the result in and read it from; ``None``: measure, keep nothing.
        refresh: measure again even when a kept result exists; each ceiling is then the higher of
            the kept one and the new one (a ceiling is the fastest rate seen), and that is kept.
        min_run_time: seconds each of the three timings runs at least (``blocked_autorange``): the
            longer, the likelier a block that nothing else on the machine interrupted.

    Returns:
        ``{"schema_version", "kind": "ceilings", "device", "device_name", "dtype", "threads",
        "peak_flops"`` (a metric in FLOP/s with ``median``, ``q1``, ``q3``, ``blocks``,
        ``matrix_side``), ``"bandwidth"`` (a metric in bytes/s with the same spread, the faster
        ``pattern`` and both ``patterns``, ``buffer_bytes``), ``"last_level_cache": {"bytes",
        "source"}``, ``"measured_at"`` (seconds since the epoch), ``"seconds"`` (how long it took),
        ``"cached"`` (read from ``cache_dir`` rather than measured now), ``"context"}``.

    Raises:
        ValueError: a device that cannot run timed work (``meta``, an unknown type) or a dtype that
            is not floating point.
        RuntimeError: a CUDA device this process does not have.
        ImportError: ``torch.utils.benchmark`` cannot be imported.
    """
    dev = normalise_device(device, api="measure_ceilings")
    device_name = check_runnable_device(dev, str(device), api="measure_ceilings")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"measure_ceilings: dtype must be a floating torch.dtype, got {dtype!r}.")
    threads = torch.get_num_threads()
    hardware = device_name_of(device_name)
    path = Path(cache_dir) / f"{_key(device_name, hardware, dtype, threads)}.json" if cache_dir is not None else None
    kept = _read(path) if path is not None else None
    if kept is not None and not refresh:
        return {**kept, "cached": True}
    load_timer()
    with MEASUREMENT_LOCK:
        started = time.perf_counter()
        cache_bytes, cache_source = last_level_cache(device_name)
        with torch.inference_mode():
            compute = _compute(device_name, dtype, threads, min_run_time)
            memory = _memory(device_name, threads, min_run_time, cache_bytes)
        spent = time.perf_counter() - started
    report = {
        "schema_version": SCHEMA_VERSION,
        "kind": "ceilings",
        "device": device_name,
        "device_name": hardware,
        "dtype": str(dtype).removeprefix("torch."),
        "threads": threads,
        "peak_flops": compute,
        "bandwidth": memory,
        "last_level_cache": {"bytes": cache_bytes, "source": cache_source},
        "measured_at": time.time(),
        "seconds": spent,
        "cached": False,
        "context": measurement_context(method=METHOD_CEILINGS),
    }
    if kept is not None:  # a ceiling is the fastest rate ever seen: the higher of the kept and the new one stays
        for name in ("peak_flops", "bandwidth"):
            if kept[name]["value"] > report[name]["value"]:
                report[name] = kept[name]
    if path is not None:
        _write(path, report)
    return report

"""The timing core shared by model latency (:mod:`.latency`) and per-layer latency (:mod:`.layer_latency`).

* :func:`time_workload` — a whole workload: one first call on a synchronised clock, explicit warm-up,
  then ``torch.utils.benchmark.Timer.blocked_autorange`` topped up to ``min_repeats`` blocks.
* :func:`time_blocks` — one module call replayed many times: calls per block calibrated until a block
  lasts at least ``min_block_time`` (the shortest of three timings at each size, so that one slow
  call cannot shrink every block to a single call), then blocks of that size (the three trials of
  the final size among them) until there are at least ``min_blocks`` and they total at least
  ``min_run_time`` seconds. Blocks are timed by the standard library's ``timeit.Timer`` (the
  machinery ``torch.utils.benchmark.Timer`` wraps, with GC disabled in each block), on the same
  synchronised clock, without the Timer's extra warm-up calls per block.
* :func:`block_statistics` — median and interquartile range of the block averages.

Validation helpers raise ``TypeError`` for a wrongly typed option and ``ValueError`` for a bad value.
"""

from __future__ import annotations

import math
import statistics
import timeit
from collections.abc import Callable
from numbers import Real
from typing import Any

import torch

from torchscan_lsp.engine.report import MetricResult, metric_result

__all__ = [
    "METHOD_TIMER",
    "METHOD_FIRST_CALL",
    "UNIT_SECONDS",
    "load_timer",
    "check_int",
    "check_seconds",
    "check_timing",
    "time_workload",
    "time_blocks",
    "block_statistics",
    "seconds",
    "unavailable_seconds",
    "same_device",
    "tensors_of",
]

METHOD_TIMER = "torch.utils.benchmark.Timer"
METHOD_FIRST_CALL = "synchronized_clock"
UNIT_SECONDS = "seconds"
_TIMER_NAME = "__torchscan_workload"
#: Calibration gives up growing a block beyond this many calls (a workload of a few nanoseconds).
MAX_CALLS_PER_BLOCK = 1_000_000
#: Upper bound on the blocks of one replayed call, whatever ``min_run_time`` asks.
MAX_BLOCKS = 1_000


def load_timer() -> type:
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


def check_int(name: str, value: Any, minimum: int) -> int:
    """``value`` as an int ``>= minimum`` (``TypeError`` / ``ValueError`` naming ``name``)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}.")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}.")
    return value


def check_seconds(name: str, value: Any) -> float:
    """``value`` as a finite number of seconds > 0."""
    if not isinstance(value, Real) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number of seconds, got {type(value).__name__}.")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number of seconds > 0, got {value!r}.")
    return float(value)


def check_timing(warmup: Any, min_run_time: Any, min_repeats: Any, least_repeats: int = 2) -> tuple[int, float, int]:
    """Validated ``(warmup, min_run_time, min_repeats)``; ``min_repeats >= least_repeats``."""
    return (
        check_int("warmup", warmup, 0),
        check_seconds("min_run_time", min_run_time),
        check_int("min_repeats", min_repeats, least_repeats),
    )


def _clock(sync: Callable[[], None] | None) -> Callable[[], float]:
    """The clock: the device is synchronised before every reading (CPU: the plain clock)."""
    if sync is None:
        return timeit.default_timer
    read = timeit.default_timer

    def synchronized_clock() -> float:
        sync()
        return read()

    return synchronized_clock


def time_workload(
    workload: Callable[[], Any],
    *,
    timer_cls: type,
    sync: Callable[[], None] | None,
    threads: int,
    warmup: int,
    min_run_time: float,
    min_repeats: int,
) -> dict[str, Any]:
    """First call, warm-up, then the Timer's timed blocks (topped up to ``min_repeats``).

    Returns ``{"first_call": seconds, "block_durations": [...], "calls_per_block": n}``. Workload
    exceptions propagate unchanged.
    """
    clock = _clock(sync)
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


def time_blocks(
    call: Callable[[], Any],
    *,
    sync: Callable[[], None] | None,
    warmup: int,
    min_block_time: float,
    min_blocks: int,
    min_run_time: float,
) -> dict[str, Any]:
    """Calibrated blocks of one call (see the module docstring).

    Returns ``{"block_durations": [...], "calls_per_block": n}``; exceptions of ``call`` propagate.
    """
    for _ in range(warmup):
        call()
    timer = timeit.Timer(stmt=call, timer=_clock(sync))
    calls = 1
    while True:
        trial = timer.repeat(repeat=3, number=calls)
        shortest = min(trial)
        if shortest >= min_block_time or calls >= MAX_CALLS_PER_BLOCK:
            break
        # jump to about the size that reaches the block time, at least doubling
        wanted = math.ceil(calls * min_block_time / max(shortest, 1e-9) * 1.1)
        calls = min(MAX_CALLS_PER_BLOCK, max(2 * calls, wanted))
    # the three trials of the final size are blocks like the others (the smaller sizes warmed up)
    durations = [float(duration) for duration in trial]
    while (len(durations) < min_blocks or sum(durations) < min_run_time) and len(durations) < MAX_BLOCKS:
        durations.append(float(timer.timeit(number=calls)))
    return {"block_durations": durations, "calls_per_block": calls}


def block_statistics(blocks: list[float], calls_per_block: int) -> tuple[float, float]:
    """Median and interquartile range (linear interpolation, numpy's default) of the block averages."""
    averages = [duration / calls_per_block for duration in blocks]
    quartiles = statistics.quantiles(averages, n=4, method="inclusive")
    return float(statistics.median(averages)), float(quartiles[2] - quartiles[0])


def seconds(value: float, scope: str, method: str = METHOD_TIMER) -> MetricResult:
    """A complete metric in seconds."""
    return metric_result(status="complete", value=value, unit=UNIT_SECONDS, scope=scope, method=method)


def unavailable_seconds(scope: str, method: str = METHOD_TIMER) -> MetricResult:
    """An unavailable metric in seconds."""
    return metric_result(status="unavailable", unit=UNIT_SECONDS, scope=scope, method=method)


def same_device(actual: torch.device, wanted: torch.device) -> bool:
    """Whether ``actual`` is the canonical device ``wanted`` (any CPU index is the CPU)."""
    if actual.type != wanted.type:
        return False
    if actual.type == "cpu":
        return True
    return (actual.index or 0) == (wanted.index or 0)


def tensors_of(value: Any) -> list[torch.Tensor]:
    """Every tensor in a pytree of values."""
    from torch.utils import _pytree

    return [leaf for leaf in _pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)]

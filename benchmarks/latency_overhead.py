"""Overhead of ``measure_latency`` over the same ``torch.utils.benchmark.Timer`` used directly.

A ~1 ms CPU workload (a matrix product sized to take about a millisecond here, one intra-op thread)
is timed both ways with the same minimum run time and thread count:

* direct:  ``Timer(stmt="fn()", globals=..., num_threads=n).blocked_autorange(min_run_time=...)``
* ours:    ``measure_latency(fn, device="cpu")`` — first call, explicit warm-up, the same Timer,
  statistics, context and report.

Pairs are interleaved (order alternating) and the median of the per-pair ratios taken. The script
prints the wall-clock ratio (ours / direct, must be below 1.05) and, for information, the ratio of the reported
per-call latencies (the wrapper must not bias the measurement). Exit status 1 when over budget.
Run: ``python benchmarks/latency_overhead.py``.
"""

from __future__ import annotations

import statistics
import os
import sys
import time
import timeit
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

LIMIT = 1.05
PAIRS = 7


def one_millisecond_workload():
    """A matrix product whose size is chosen so that one call takes about 1 ms on this machine.

    Each size is judged by its fastest of several calls, which other jobs on the machine cannot
    make faster, so a busy machine does not shrink the workload far below a millisecond of work.
    """
    size = 64
    while True:
        a, b = torch.rand(size, size), torch.rand(size, size)
        torch.mm(a, b)
        timings = []
        for _ in range(7):
            start = time.perf_counter()
            torch.mm(a, b)
            timings.append(time.perf_counter() - start)
        per_call = min(timings)
        if per_call >= 1e-3 or size >= 4096:
            break
        size = int(size * 1.25)

    def workload() -> None:
        torch.mm(a, b)

    return workload, size, per_call


def main() -> int:
    from torch.utils.benchmark import Timer

    from torchscan_lsp.engine.measuring.latency import DEFAULT_MIN_RUN_TIME, measure_latency

    # One intra-op thread, as in the contract's example: on a small shared machine a multi-threaded
    # kernel waits for descheduled threads, and that noise would swamp the overhead being measured.
    torch.set_num_threads(1)
    load_before = os.getloadavg()[0]
    workload, size, per_call = one_millisecond_workload()
    threads = torch.get_num_threads()
    print(f"workload: torch.mm on {size}x{size} ({1e3 * per_call:.2f} ms per call), {threads} thread(s)")

    def direct() -> tuple[float, float]:
        start = time.perf_counter()
        timer = Timer(stmt="fn()", globals={"fn": workload}, timer=timeit.default_timer, num_threads=threads)
        measurement = timer.blocked_autorange(min_run_time=DEFAULT_MIN_RUN_TIME)
        return time.perf_counter() - start, measurement.median

    def ours() -> tuple[float, float]:
        start = time.perf_counter()
        report = measure_latency(workload, device="cpu")
        return time.perf_counter() - start, report["totals"]["latency"]["value"]

    measure_latency(workload, device="cpu", min_run_time=0.05)  # import and first-use costs out of the way
    direct_walls, our_walls, direct_medians, our_medians = [], [], [], []
    for pair in range(PAIRS):
        for name in ("direct", "ours") if pair % 2 == 0 else ("ours", "direct"):
            wall, median = direct() if name == "direct" else ours()
            (direct_walls if name == "direct" else our_walls).append(wall)
            (direct_medians if name == "direct" else our_medians).append(median)
    # each pair ran back to back, so its ratio cancels slow drifts of the machine's load
    wall_ratio = statistics.median(o / d for o, d in zip(our_walls, direct_walls, strict=True))
    latency_ratio = statistics.median(o / d for o, d in zip(our_medians, direct_medians, strict=True))
    print(f"direct Timer wall: {statistics.median(direct_walls):.3f} s   measure_latency wall: "
          f"{statistics.median(our_walls):.3f} s   (medians of {PAIRS} interleaved pairs)")
    print(f"reported latency ratio (ours / direct): {latency_ratio:.4f}")
    print(f"overhead ratio (wall, ours / direct, median of per-pair ratios): {wall_ratio:.4f}  (limit {LIMIT})")
    print(f"machine load (1-min average) before/after: {load_before:.2f}/{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    return 0 if wall_ratio < LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())

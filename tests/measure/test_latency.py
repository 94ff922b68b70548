"""measure_latency (docs/measurement.md): statistics recomputed independently, devices faked, bad input."""

from __future__ import annotations

import json
import math
import sys
import threading
import time

import numpy as np
import pytest
import torch
import torch.utils.benchmark as tub

from torchscan_lsp.engine.measuring.shared import cpu_model
from torchscan_lsp.engine.measuring.latency import measure_latency
from torchscan_lsp.version import package_version

FAST = {"warmup": 1, "min_run_time": 0.01, "min_repeats": 3}


def _noop():
    return None


def test_report_shape_and_statistics_recomputed_independently():
    x = torch.rand(64, 64)
    report = measure_latency(lambda: x @ x, device="cpu", **FAST)
    assert json.loads(json.dumps(report)) == report
    assert report["schema_version"] == 1 and report["kind"] == "latency"
    blocks = report["block_durations"]
    per_block = report["calls_per_block"]
    assert len(blocks) >= 3 and per_block >= 1
    assert report["timed_calls"] == per_block * len(blocks)
    averages = np.array(blocks) / per_block
    totals = report["totals"]
    assert totals["latency"]["value"] == pytest.approx(float(np.median(averages)), rel=1e-12)
    q25, q75 = np.percentile(averages, [25, 75])
    assert totals["latency_iqr"]["value"] == pytest.approx(float(q75 - q25), rel=1e-9, abs=1e-15)
    for name in ("first_call_latency", "latency", "latency_iqr", "throughput"):
        metric = totals[name]
        assert set(metric) == {"status", "value", "known_value", "unit", "scope", "method"}
        assert metric["status"] == "complete" and metric["value"] == metric["known_value"]
        assert metric["scope"] == "workload"
    assert totals["latency"]["unit"] == "seconds" and totals["latency"]["method"] == "torch.utils.benchmark.Timer"
    assert totals["throughput"]["unit"] == "calls/s"
    assert report["device"] == "cpu" and report["device_name"] == cpu_model()
    assert report["threads"] == torch.get_num_threads()
    assert report["context"]["package"] == "torchscan-lsp"
    assert report["context"]["torchscan_version"] == package_version()
    assert report["context"]["torch_version"] == torch.__version__
    assert report["timing"]["warmup"] == 1 and report["timing"]["min_repeats"] == 3
    assert report["inputs"] == {"supplied": False}


def test_throughput_is_work_units_over_the_recorded_block_durations():
    report = measure_latency(_noop, device="cpu", work_units=32, work_unit="samples", **FAST)
    expected = 32 * report["calls_per_block"] * len(report["block_durations"]) / sum(report["block_durations"])
    assert report["totals"]["throughput"]["value"] == pytest.approx(expected, rel=1e-12)
    assert report["totals"]["throughput"]["unit"] == "samples/s"
    assert report["work_units"] == 32 and report["work_unit"] == "samples"


def test_min_repeats_tops_up_blocks_of_the_same_size():
    report = measure_latency(lambda: time.sleep(0.002), device="cpu", warmup=0, min_run_time=0.001, min_repeats=6)
    assert len(report["block_durations"]) >= 6
    assert report["timed_calls"] == report["calls_per_block"] * len(report["block_durations"])


def test_sleeping_workload_latency_within_tolerance():
    """Benchmark-style: a 10 ms sleep must measure between 10 ms and 10 ms + 25% + 2 ms in one of five tries."""
    target = 0.010
    seen = []
    for _ in range(5):
        report = measure_latency(lambda: time.sleep(target), device="cpu", warmup=1, min_run_time=0.1, min_repeats=3)
        latency = report["totals"]["latency"]["value"]
        seen.append(latency)
        assert latency >= target * 0.999  # sleep never returns early
        if latency <= target * 1.25 + 0.002:
            break
    else:
        pytest.fail(f"sleep({target}) measured {seen}")
    assert report["totals"]["first_call_latency"]["value"] >= target * 0.999


def test_inputs_metadata_is_recorded_but_never_forwarded_or_stored():
    x = torch.full((4, 3), 12345.678, dtype=torch.float64)
    received = []

    def workload(*args, **kwargs):
        received.append((args, kwargs))

    report = measure_latency(workload, device="cpu", inputs=x, work_units=4, work_unit="samples", **FAST)
    assert all(call == ((), {}) for call in received)
    assert report["inputs"]["supplied"] is True
    assert report["inputs"]["value"]["shape"] == [4, 3]
    assert report["inputs"]["dtypes"] == ["torch.float64"]
    # The tensor's value must appear nowhere; searching the JSON text for its digits is not enough,
    # since a timing such as 0.00113071000123454 can contain them by chance.
    assert 12345.678 not in _numbers(report)
    assert "12345.678" not in json.dumps(report)


def _numbers(tree):
    """Every number in a JSON-like tree of dicts, lists and scalars."""
    if isinstance(tree, dict):
        return [n for value in tree.values() for n in _numbers(value)]
    if isinstance(tree, (list, tuple)):
        return [n for value in tree for n in _numbers(value)]
    return [tree] if isinstance(tree, (int, float)) and not isinstance(tree, bool) else []


def test_threads_are_recorded_and_passed_to_the_timer(monkeypatch):
    seen = []

    class SpyTimer(tub.Timer):
        def __init__(self, *args, **kwargs):
            seen.append(kwargs.get("num_threads"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(tub, "Timer", SpyTimer)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        report = measure_latency(_noop, device="cpu", **FAST)
    finally:
        torch.set_num_threads(before)
    assert seen == [1] and report["threads"] == 1


def test_first_call_and_warmup_happen_before_the_timer(monkeypatch):
    calls = []
    at_timer = []

    class SpyTimer(tub.Timer):
        def __init__(self, *args, **kwargs):
            at_timer.append(len(calls))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(tub, "Timer", SpyTimer)
    measure_latency(lambda: calls.append(1), device="cpu", warmup=4, min_run_time=0.005, min_repeats=2)
    assert at_timer == [1 + 4]


# --------------------------------------------------------------------------------------------------
# explicit synchronisation, with fake accelerators


def test_cuda_is_synchronised_around_the_first_call_and_at_every_timer_reading(monkeypatch):
    events = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: f"Fake GPU {index}")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: events.append(("sync", device)))
    report = measure_latency(lambda: events.append("call"), device="cuda", warmup=2, min_run_time=0.005, min_repeats=2)
    assert events[:5] == [("sync", 1), "call", ("sync", 1), "call", "call"]
    syncs = [e for e in events if e != "call"]
    assert set(syncs) == {("sync", 1)}
    # the Timer's clock synchronises before each reading: at least two readings per timed block
    assert len(syncs) >= 2 + 2 * len(report["block_durations"])
    assert report["device"] == "cuda:1" and report["device_name"] == "Fake GPU 1"
    assert report["timing"]["synchronization"] == "torch.cuda.synchronize"


def test_mps_is_synchronised(monkeypatch):
    events = []
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(torch.mps, "synchronize", lambda: events.append("sync"))
    report = measure_latency(lambda: events.append("call"), device="mps", warmup=0, min_run_time=0.005, min_repeats=2)
    assert events[:3] == ["sync", "call", "sync"]
    assert report["device"] == "mps" and report["device_name"] == cpu_model()
    assert report["timing"]["synchronization"] == "torch.mps.synchronize"


# --------------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize("workload", [None, 3, "model"])
def test_non_callable_workload(workload):
    with pytest.raises(TypeError, match="callable"):
        measure_latency(workload, device="cpu")


@pytest.mark.parametrize("units", [0, -1, 0.0, float("nan"), float("inf")])
def test_work_units_must_be_positive(units):
    with pytest.raises(ValueError, match="work_units"):
        measure_latency(_noop, device="cpu", work_units=units)


@pytest.mark.parametrize("units", [True, "4", None])
def test_work_units_must_be_a_number(units):
    with pytest.raises(TypeError, match="work_units"):
        measure_latency(_noop, device="cpu", work_units=units)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"work_unit": ""}, ValueError),
        ({"warmup": -1}, ValueError),
        ({"warmup": 1.5}, TypeError),
        ({"min_run_time": 0}, ValueError),
        ({"min_run_time": "fast"}, TypeError),
        ({"min_repeats": 1}, ValueError),
    ],
)
def test_bad_options(options, error):
    called = []
    with pytest.raises(error):
        measure_latency(lambda: called.append(1), device="cpu", **options)
    assert not called


def test_unknown_and_unsupported_devices():
    called = []
    workload = lambda: called.append(1)  # noqa: E731
    with pytest.raises(ValueError, match="unknown device 'gpu0'"):
        measure_latency(workload, device="gpu0")
    with pytest.raises(ValueError, match="meta device"):
        measure_latency(workload, device="meta")
    with pytest.raises(ValueError, match="not 'xpu'"):
        measure_latency(workload, device="xpu")
    with pytest.raises(TypeError, match="device"):
        measure_latency(workload, device=None)
    assert not called


def test_unavailable_accelerators(monkeypatch):
    called = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="CUDA device 'cuda:0' is unavailable"):
        measure_latency(lambda: called.append(1), device="cuda:0")
    with pytest.raises(RuntimeError, match="MPS device 'mps' is unavailable"):
        measure_latency(lambda: called.append(1), device="mps")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(RuntimeError, match="CUDA device 'cuda:2' is unavailable"):
        measure_latency(lambda: called.append(1), device="cuda:2")
    assert not called


def test_inputs_on_another_device_are_refused():
    called = []
    with pytest.raises(ValueError, match="inputs hold a tensor on 'meta'"):
        measure_latency(lambda: called.append(1), device="cpu", inputs=torch.empty(2, device="meta"))
    assert not called


@pytest.mark.parametrize("fail_at", [1, 2, 7])
def test_workload_errors_propagate_unchanged(fail_at):
    error = ZeroDivisionError("from the workload")
    count = [0]

    def workload():
        count[0] += 1
        if count[0] == fail_at:
            raise error

    with pytest.raises(ZeroDivisionError) as info:
        measure_latency(workload, device="cpu", **FAST)
    assert info.value is error


def test_missing_benchmark_dependency_is_actionable_and_nothing_runs(monkeypatch):
    called = []
    monkeypatch.setitem(sys.modules, "torch.utils.benchmark", None)
    with pytest.raises(ImportError, match="pip install") as info:
        measure_latency(lambda: called.append(1), device="cpu")
    assert "torch.utils.benchmark" in str(info.value)
    assert not called


def test_timings_are_serialised():
    spans = []

    def workload():
        start = time.perf_counter()
        time.sleep(0.002)
        spans.append((threading.get_ident(), start, time.perf_counter()))

    def run():
        measure_latency(workload, device="cpu", warmup=0, min_run_time=0.02, min_repeats=2)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    idents = {ident for ident, _, _ in spans}
    assert len(idents) == 2
    first, second = sorted(idents, key=lambda i: min(s for j, s, _ in spans if j == i))
    assert max(e for j, _, e in spans if j == first) <= min(s for j, s, _ in spans if j == second)


def test_top_level_export():
    import torchscan_lsp

    assert torchscan_lsp.measure_latency is measure_latency
    assert math.isfinite(measure_latency(_noop, device="cpu", **FAST)["totals"]["latency"]["value"])

"""measure_peak_memory (docs/measurement.md): CPU for real, CUDA and MPS call order and messages with fakes."""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
import warnings

import pytest
import torch

from torchscan_lsp.engine.measuring import memory as memory_module
from torchscan_lsp.engine.measuring.memory import measure_peak_memory
from torchscan_lsp.version import package_version

KNOWN_BYTES = 3 * 1024 * 1024


def _allocating_workload():
    """Holds a small tensor, then allocates KNOWN_BYTES more: the peak is at least that above the start."""
    keep = torch.empty(16, dtype=torch.uint8)
    big = torch.ones(KNOWN_BYTES, dtype=torch.uint8)
    return keep, big


class _RecordingTemp:
    """Wraps tempfile.NamedTemporaryFile to remember the paths measure_peak_memory creates."""

    def __init__(self, monkeypatch):
        self.paths: list[str] = []
        real = tempfile.NamedTemporaryFile

        def fake(*args, **kwargs):
            handle = real(*args, **kwargs)
            self.paths.append(handle.name)
            return handle

        monkeypatch.setattr(memory_module.tempfile, "NamedTemporaryFile", fake)


def test_cpu_delta_covers_a_known_allocation(monkeypatch):
    temps = _RecordingTemp(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = measure_peak_memory(_allocating_workload, device="cpu")
    assert not [w for w in caught if "export_memory_timeline" in str(w.message)]
    assert report["device"] == "cpu"
    assert report["metric"] == "pytorch_tensor_bytes"
    assert report["delta_bytes"] >= KNOWN_BYTES
    assert report["delta_bytes"] == report["peak_bytes"] - report["baseline_bytes"]
    assert report["peak_bytes"] >= report["baseline_bytes"]
    assert all(type(report[k]) is int for k in ("baseline_bytes", "peak_bytes", "delta_bytes"))
    assert "allocated_peak_bytes" not in report
    assert report["schema_version"] == 1
    assert report["context"]["package"] == "torchscan-lsp"
    assert report["context"]["torchscan_version"] == package_version()
    assert report["context"]["torch_version"] == torch.__version__
    assert json.loads(json.dumps(report)) == report
    assert temps.paths and not any(os.path.exists(path) for path in temps.paths)


MIB4 = 1024 * 1024 * 4  # a float32 (1024, 1024) tensor: 2^20 elements of 4 bytes


def test_cpu_delta_counts_the_first_allocation():
    """The baseline is what was live before the workload, so its first allocation counts
    (docs/measurement.md: where we depart from the reference).

    The reference took the first timeline point (which already holds that allocation) as the
    baseline: these two workloads reported deltas of 12 and 0 bytes there.
    """

    def work():
        t = torch.ones(1024, 1024)  # 4 MiB, then t.sum() adds a 4-byte scalar
        return t.sum()

    report = measure_peak_memory(work, device="cpu")
    assert report["baseline_bytes"] == 0 and report["delta_bytes"] >= MIB4
    assert measure_peak_memory(lambda: torch.ones(1024, 1024), device="cpu")["delta_bytes"] >= MIB4


def test_cpu_model_built_inside_the_workload_keeps_its_weights():
    # Linear(512, 512): weight 512*512*4 = 1,048,576 B, bias 2,048 B; input and output (4, 512)
    # float32: 8,192 B each, all live at once when the output is made -> 1,067,008 B
    report = measure_peak_memory(lambda: torch.nn.Linear(512, 512)(torch.rand(4, 512)), device="cpu")
    assert report["delta_bytes"] >= 512 * 512 * 4 + 512 * 4
    assert report["delta_bytes"] == 1_067_008


def test_cpu_empty_workload_reports_zero(monkeypatch):
    temps = _RecordingTemp(monkeypatch)
    report = measure_peak_memory(lambda: None, device="cpu")
    assert (report["baseline_bytes"], report["peak_bytes"], report["delta_bytes"]) == (0, 0, 0)
    assert temps.paths and not any(os.path.exists(path) for path in temps.paths)


def test_cpu_tensor_from_before_the_workload_is_baseline_not_delta():
    # big: 512*1024 float32 = 2 MiB, made before; the workload makes big * 2 (2 MiB) and a scalar sum
    big = torch.ones(512, 1024)
    report = measure_peak_memory(lambda: (big * 2).sum(), device="cpu")
    assert report["baseline_bytes"] == 2 * 1024 * 1024
    assert 2 * 1024 * 1024 <= report["delta_bytes"] < 2 * 1024 * 1024 + 64


def test_cpu_peak_from_raw_events():
    # [time, action, signed bytes, category]; time -1 is a tensor from before the workload:
    # baseline 100; +50 -> 150, +30 -> 180 (peak), -50 -> 130, +10 -> 140
    events = [[-1, 0, 100, 0], [1, 1, 50, 0], [2, 1, 30, 0], [3, 3, -50, 0], [4, 1, 10, 0]]
    assert memory_module.cpu_peak(events) == (100, 180)
    assert memory_module.cpu_peak([]) == (0, 0)
    # frees only (the workload released a tensor it was given): the peak never falls below the baseline
    assert memory_module.cpu_peak([[-1, 0, 64, 0], [5, 3, -64, 0]]) == (64, 64)


def test_memory_report_carries_its_context():
    with torch.no_grad():
        context = measure_peak_memory(lambda: torch.ones(4), device="cpu")["context"]
    assert context["grad_enabled"] is False and context["inference_mode"] is False
    assert context["autocast"] == {"device_type": "cpu", "enabled": False, "dtype": str(torch.get_autocast_dtype("cpu"))}
    assert context["threads"] == torch.get_num_threads()
    assert context["interop_threads"] == torch.get_num_interop_threads()
    assert context["hardware"]["cpu_count"] == os.cpu_count()
    assert context["device_name"] == context["hardware"]["cpu_model"]
    assert context["python_version"] and context["torch_version"] == torch.__version__
    assert "allocator" not in context  # PyTorch's CPU allocator exposes no settings
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert measure_peak_memory(lambda: None, device="cpu")["context"]["autocast"]["enabled"] is True


def test_cpu_index_is_reported_as_cpu():
    assert measure_peak_memory(_allocating_workload, device="cpu:0")["device"] == "cpu"
    assert measure_peak_memory(_allocating_workload, device=torch.device("cpu"))["device"] == "cpu"


def test_workload_error_propagates_unchanged_and_temp_file_is_deleted(monkeypatch):
    temps = _RecordingTemp(monkeypatch)
    error = KeyError("boom")

    def failing():
        raise error

    with pytest.raises(KeyError) as info:
        measure_peak_memory(failing, device="cpu")
    assert info.value is error
    assert temps.paths and not any(os.path.exists(path) for path in temps.paths)


def test_other_devices_are_not_implemented():
    called = []
    with pytest.raises(NotImplementedError, match="not implemented for 'meta'"):
        measure_peak_memory(lambda: called.append(1), device="meta")
    assert not called


def test_calls_are_serialised():
    spans, reports = [], []

    def workload():
        start = time.perf_counter()
        data = _allocating_workload()
        time.sleep(0.05)
        spans.append((start, time.perf_counter()))
        return data

    def run():
        reports.append(measure_peak_memory(workload, device="cpu"))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(reports) == 2
    (a_start, a_end), (b_start, b_end) = sorted(spans)
    assert a_end <= b_start


# --------------------------------------------------------------------------------------------------
# CUDA with fakes (call order and messages, docs/measurement.md)


class _FakeCuda:
    def __init__(self, monkeypatch, *, available=True, count=2, current=0, missing=()):
        self.calls: list[tuple] = []
        cuda = torch.cuda
        fakes = {
            "is_available": lambda: self._log("is_available") or available,
            "current_device": lambda *a: self._log("current_device", *a) or current,
            "device_count": lambda: self._log("device_count") or count,
            "synchronize": lambda dev=None: self._log("synchronize", str(dev)),
            "memory_reserved": lambda dev=None: self._log("memory_reserved", str(dev)) or 100,
            "reset_peak_memory_stats": lambda dev=None: self._log("reset_peak_memory_stats", str(dev)),
            "max_memory_reserved": lambda dev=None: self._log("max_memory_reserved", str(dev)) or 180,
            "max_memory_allocated": lambda dev=None: self._log("max_memory_allocated", str(dev)) or 140,
        }
        for name, fake in fakes.items():
            if name in missing:
                monkeypatch.delattr(cuda, name, raising=False)
            else:
                monkeypatch.setattr(cuda, name, fake)

    def _log(self, *entry):
        self.calls.append(entry)
        return None

    def workload(self):
        self.calls.append(("workload",))


def test_cuda_call_order_and_result(monkeypatch):
    fake = _FakeCuda(monkeypatch)
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: f"Fake GPU {index}")
    report = measure_peak_memory(fake.workload, device="cuda:1")
    assert report["context"]["device_name"] == "Fake GPU 1"
    assert report["context"]["allocator"]["env"]["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert report["context"]["autocast"]["device_type"] == "cuda"
    assert fake.calls == [
        ("is_available",),
        ("device_count",),
        ("synchronize", "cuda:1"),
        ("memory_reserved", "cuda:1"),
        ("reset_peak_memory_stats", "cuda:1"),
        ("workload",),
        ("synchronize", "cuda:1"),
        ("max_memory_reserved", "cuda:1"),
        ("max_memory_allocated", "cuda:1"),
    ]
    assert {k: v for k, v in report.items() if k != "context"} == {
        "schema_version": 1,
        "device": "cuda:1",
        "metric": "pytorch_reserved_bytes",
        "baseline_bytes": 100,
        "peak_bytes": 180,
        "delta_bytes": 80,
        "allocated_peak_bytes": 140,
    }


def test_cuda_without_index_asks_current_device_once_without_arguments(monkeypatch):
    fake = _FakeCuda(monkeypatch, current=0)
    report = measure_peak_memory(fake.workload, device="cuda")
    assert [c for c in fake.calls if c[0] == "current_device"] == [("current_device",)]
    assert report["device"] == "cuda:0"


def test_cuda_unavailable_does_not_run_the_workload(monkeypatch):
    fake = _FakeCuda(monkeypatch, available=False)
    with pytest.raises(RuntimeError, match="CUDA device 'cuda:0' is unavailable"):
        measure_peak_memory(fake.workload, device="cuda:0")
    assert ("workload",) not in fake.calls


def test_cuda_index_beyond_count(monkeypatch):
    fake = _FakeCuda(monkeypatch, count=2)
    with pytest.raises(RuntimeError, match=r"CUDA device 'cuda:3' is unavailable.*2") as info:
        measure_peak_memory(fake.workload, device="cuda:3")
    assert "2" in str(info.value)
    assert ("workload",) not in fake.calls


def test_cuda_missing_apis_are_named(monkeypatch):
    fake = _FakeCuda(monkeypatch, missing=("max_memory_allocated", "reset_peak_memory_stats"))
    with pytest.raises(NotImplementedError) as info:
        measure_peak_memory(fake.workload, device="cuda:0")
    text = str(info.value)
    assert "cuda:0" in text and torch.__version__ in text
    assert "torch.cuda.max_memory_allocated" in text and "torch.cuda.reset_peak_memory_stats" in text
    assert ("workload",) not in fake.calls


def test_cuda_workload_error_propagates(monkeypatch):
    _FakeCuda(monkeypatch)
    error = ValueError("inside")

    def failing():
        raise error

    with pytest.raises(ValueError) as info:
        measure_peak_memory(failing, device="cuda:0")
    assert info.value is error


# --------------------------------------------------------------------------------------------------
# MPS with fakes (docs/measurement.md)


class _FakeMps:
    def __init__(self, monkeypatch, *, available=True, missing=(), reset_error=None):
        self.calls: list[tuple] = []
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: self._log("is_available") or available)
        monkeypatch.setattr(torch.mps, "synchronize", lambda: self._log("synchronize"))
        memory = torch.accelerator.memory

        def reset(dev):
            self._log("reset_peak_memory_stats", str(dev))
            if reset_error is not None:
                raise reset_error

        fakes = {
            "memory_reserved": lambda dev: self._log("memory_reserved", str(dev)) or 10,
            "reset_peak_memory_stats": reset,
            "max_memory_reserved": lambda dev: self._log("max_memory_reserved", str(dev)) or 50,
            "max_memory_allocated": lambda dev: self._log("max_memory_allocated", str(dev)) or 30,
        }
        for name, fake in fakes.items():
            if name in missing:
                monkeypatch.delattr(memory, name, raising=False)
            else:
                monkeypatch.setattr(memory, name, fake)

    def _log(self, *entry):
        self.calls.append(entry)
        return None

    def workload(self):
        self.calls.append(("workload",))


def test_mps_call_order_and_result(monkeypatch):
    fake = _FakeMps(monkeypatch)
    report = measure_peak_memory(fake.workload, device="mps")
    assert fake.calls == [
        ("is_available",),
        ("synchronize",),
        ("memory_reserved", "mps"),
        ("reset_peak_memory_stats", "mps"),
        ("workload",),
        ("synchronize",),
        ("max_memory_reserved", "mps"),
        ("max_memory_allocated", "mps"),
    ]
    assert report["device"] == "mps" and report["metric"] == "pytorch_reserved_bytes"
    assert (report["baseline_bytes"], report["peak_bytes"], report["delta_bytes"], report["allocated_peak_bytes"]) == (10, 50, 40, 30)


def test_mps_index_is_checked_before_availability(monkeypatch):
    fake = _FakeMps(monkeypatch)
    with pytest.raises(RuntimeError, match="MPS device 'mps:1' is unavailable"):
        measure_peak_memory(fake.workload, device="mps:1")
    assert fake.calls == []


def test_mps_unavailable(monkeypatch):
    fake = _FakeMps(monkeypatch, available=False)
    with pytest.raises(RuntimeError, match="MPS device 'mps' is unavailable"):
        measure_peak_memory(fake.workload, device="mps")
    assert ("workload",) not in fake.calls


def test_mps_missing_apis_are_named(monkeypatch):
    fake = _FakeMps(monkeypatch, missing=("max_memory_reserved",))
    monkeypatch.delattr(torch.mps, "synchronize")
    with pytest.raises(NotImplementedError) as info:
        measure_peak_memory(fake.workload, device="mps")
    text = str(info.value)
    assert "mps" in text and torch.__version__ in text
    assert "torch.accelerator.memory.max_memory_reserved" in text and "torch.mps.synchronize" in text
    assert ("workload",) not in fake.calls


@pytest.mark.parametrize("error", [NotImplementedError("no stats"), RuntimeError("backend says no")])
def test_mps_statistics_errors_become_not_implemented(monkeypatch, error):
    fake = _FakeMps(monkeypatch, reset_error=error)
    with pytest.raises(NotImplementedError) as info:
        measure_peak_memory(fake.workload, device="mps")
    for name in ("memory_reserved", "reset_peak_memory_stats", "max_memory_reserved", "max_memory_allocated"):
        assert f"torch.accelerator.memory.{name}" in str(info.value)
    assert ("workload",) not in fake.calls

"""compare_benchmarks: refusals naming each mismatch, flags, ratio/difference and the noise rule."""

from __future__ import annotations

import copy
import json
import math

import pytest

from torchscan_lsp.engine.measuring.benchmarks import compare_benchmarks
from torchscan_lsp.engine.measuring.latency import measure_latency


def synthetic(block_averages, *, per_block=10, **overrides):
    """A latency report with given block averages (seconds per call), statistics computed by hand."""
    blocks = [avg * per_block for avg in block_averages]
    ordered = sorted(block_averages)
    n = len(ordered)

    def quantile(q):  # linear interpolation, like numpy's default
        pos = (n - 1) * q
        lo, hi = math.floor(pos), math.ceil(pos)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)

    def metric(value, unit="seconds", method="torch.utils.benchmark.Timer"):
        return {"status": "complete", "value": value, "known_value": value, "unit": unit, "scope": "workload", "method": method}

    timed = per_block * n
    report = {
        "schema_version": 1,
        "kind": "latency",
        "context": {"package": "torchscan-lsp", "torchscan_version": "0.1.0", "torch_version": "2.13.0+cpu", "python_version": "3.11.7"},
        "device": "cpu",
        "device_name": "Test CPU",
        "hardware": {"machine": "x86_64", "cpu_model": "Test CPU", "cpu_count": 2},
        "threads": 1,
        "interop_threads": 1,
        "work_units": 8,
        "work_unit": "samples",
        "timing": {"warmup": 3, "min_run_time": 0.5, "min_repeats": 3},
        "inputs": {"supplied": True, "value": {"kind": "tensor", "shape": [8, 3], "dtype": "torch.float32", "device": "cpu", "requires_grad": False}, "dtypes": ["torch.float32"]},
        "block_durations": blocks,
        "calls_per_block": per_block,
        "timed_calls": timed,
        "totals": {
            "first_call_latency": metric(ordered[-1] * 3, method="synchronized_clock"),
            "latency": metric(quantile(0.5)),
            "latency_iqr": metric(quantile(0.75) - quantile(0.25)),
            "throughput": metric(8 * timed / sum(blocks), unit="samples/s"),
        },
    }
    for path, value in overrides.items():
        node = report
        keys = path.split("__")
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value
    return report


STEADY_1MS = [0.00099, 0.001, 0.001, 0.001, 0.00101]
STEADY_2MS = [0.00199, 0.002, 0.002, 0.002, 0.00201]
NOISY_1MS = [0.0005, 0.0008, 0.001, 0.0013, 0.0016]
NOISY_11MS = [0.0006, 0.0009, 0.0011, 0.0014, 0.0017]


def test_a_clear_slowdown():
    before, after = synthetic(STEADY_1MS), synthetic(STEADY_2MS)
    before_copy, after_copy = copy.deepcopy(before), copy.deepcopy(after)
    result = compare_benchmarks(before, after)
    assert before == before_copy and after == after_copy  # inputs never mutated
    assert json.loads(json.dumps(result)) == result
    assert result["kind"] == "benchmark_comparison" and result["comparable"] and result["mismatches"] == []
    latency = result["latency"]
    assert latency["before"] == pytest.approx(0.001) and latency["after"] == pytest.approx(0.002)
    assert latency["difference"] == pytest.approx(0.001)
    assert latency["ratio"] == pytest.approx(2.0)
    # noise = 1.57 * (IQR_b / sqrt(n_b) + IQR_a / sqrt(n_a)); both IQRs are 0 here
    assert latency["noise"] == pytest.approx(0.0, abs=1e-12)
    assert latency["change"] == "slower"
    assert compare_benchmarks(after, before)["latency"]["change"] == "faster"
    assert result["throughput"]["ratio"] == pytest.approx(0.5)


def test_a_change_smaller_than_the_noise_is_reported_as_such():
    before, after = synthetic(NOISY_1MS), synthetic(NOISY_11MS)
    result = compare_benchmarks(before, after)
    iqr = 0.0013 - 0.0008
    expected_noise = 1.57 * (iqr / math.sqrt(5) + iqr / math.sqrt(5))
    assert result["latency"]["noise"] == pytest.approx(expected_noise)
    assert result["latency"]["difference"] == pytest.approx(0.0001)
    assert result["latency"]["change"] == "within_noise"


def test_a_report_compared_with_itself_is_within_noise():
    report = measure_latency(lambda: None, device="cpu", warmup=0, min_run_time=0.01, min_repeats=3)
    result = compare_benchmarks(report, report)
    assert result["latency"]["difference"] == 0 and result["latency"]["ratio"] == 1
    assert result["latency"]["change"] == "within_noise"


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"device": "cuda:0"}, "device"),
        ({"device_name": "Other CPU"}, "device_name"),
        ({"hardware__cpu_count": 16}, "cpu_count"),
        ({"threads": 4}, "threads"),
        ({"inputs__value__shape": [32, 3]}, "input_shapes"),
        ({"inputs__dtypes": ["torch.float16"]}, "dtype"),
        ({"work_units": 32}, "work_units"),
        ({"work_unit": "tokens"}, "work_unit"),
        ({"context__torch_version": "2.14.1"}, "torch_version"),
        ({"context__python_version": "3.12.1"}, "python_version"),
        ({"context__torchscan_version": "0.2.0"}, "package_version"),
        ({"timing__warmup": 10}, "warmup"),
        ({"timing__min_run_time": 1.0}, "min_run_time"),
        ({"timing__min_repeats": 7}, "min_repeats"),
    ],
)
def test_each_mismatch_is_refused_by_name(override, field):
    before, after = synthetic(STEADY_1MS), synthetic(STEADY_2MS, **override)
    with pytest.raises(ValueError, match=rf"not comparable: {field} differs") as info:
        compare_benchmarks(before, after)
    assert "on_mismatch='flag'" in str(info.value)
    flagged = compare_benchmarks(before, after, on_mismatch="flag")
    assert not flagged["comparable"]
    assert [m["field"] for m in flagged["mismatches"]] == [field]
    assert flagged["latency"]["ratio"] == pytest.approx(2.0)


def test_every_mismatch_is_named():
    before = synthetic(STEADY_1MS)
    after = synthetic(STEADY_1MS, device="mps", threads=8, work_unit="tokens")
    with pytest.raises(ValueError) as info:
        compare_benchmarks(before, after)
    text = str(info.value)
    assert "device differs ('cpu' != 'mps')" in text
    assert "threads differs (1 != 8)" in text
    assert "work_unit differs ('samples' != 'tokens')" in text


def test_batch_32_against_batch_1_is_not_comparable():
    # the same model timed on a batch of 1 and a batch of 32: per-call latencies are not comparable
    one = synthetic(STEADY_1MS, inputs__value__shape=[1, 3], work_units=1)
    many = synthetic(STEADY_2MS, inputs__value__shape=[32, 3], work_units=32)
    with pytest.raises(ValueError) as info:
        compare_benchmarks(one, many)
    assert "input_shapes differs ([[1, 3]] != [[32, 3]])" in str(info.value)
    assert "work_units differs (1 != 32)" in str(info.value)


def test_inputs_supplied_on_one_side_only_is_a_dtype_mismatch():
    before = synthetic(STEADY_1MS)
    after = synthetic(STEADY_1MS, inputs={"supplied": False})
    with pytest.raises(ValueError, match="dtype differs"):
        compare_benchmarks(before, after)


def test_not_latency_reports():
    report = synthetic(STEADY_1MS)
    with pytest.raises(TypeError):
        compare_benchmarks([], report)
    with pytest.raises(ValueError, match="before is not a latency report"):
        compare_benchmarks({"schema_version": 1, "layers": [], "totals": {}}, report)
    with pytest.raises(ValueError, match="after has unsupported schema version: 2"):
        compare_benchmarks(report, {**report, "schema_version": 2})
    with pytest.raises(ValueError, match="on_mismatch"):
        compare_benchmarks(report, report, on_mismatch="ignore")


def test_incomplete_latency_gives_no_verdict():
    before = synthetic(STEADY_1MS)
    after = synthetic(STEADY_1MS)
    after["totals"]["latency"] = {"status": "unavailable", "value": None, "known_value": None, "unit": "seconds", "scope": "workload", "method": "torch.utils.benchmark.Timer"}
    result = compare_benchmarks(before, after)
    assert result["latency"]["status"] == "unavailable"
    assert result["latency"]["change"] is None and result["latency"]["ratio"] is None

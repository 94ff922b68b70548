"""Per-layer latency you can trust: calibrated blocks, at least 5 of them, median, spread and share,
and what is flagged unstable. Timing-free: a fake clock, hand-made records, or a comparison of two
identical layers against their own measured spreads (retried)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchscan_lsp.engine.measuring import timing as timing_module
from torchscan_lsp.engine.measuring.layer_latency import LAYER_MIN_BLOCKS, measure_layer_latency
from torchscan_lsp.engine.measuring.layer_latency_report import SUM_TOLERANCE, UNSTABLE_SPREAD, build_report
from torchscan_lsp.engine.measuring.timing import time_blocks


class FakeClock:
    """A clock that advances only when the timed call runs, by the durations given (then the last)."""

    def __init__(self, durations):
        self.now, self.durations, self.calls = 0.0, list(durations), 0

    def __call__(self):
        return self.now

    def call(self):
        self.now += self.durations[min(self.calls, len(self.durations) - 1)]
        self.calls += 1


CALL = 2.0**-15  # about 30.5 µs, exact in binary so that the arithmetic below is exact
BLOCK = 2.0**-9  # about 1.95 ms: 64 calls


def test_calls_per_block_reach_the_minimum_block_time(monkeypatch):
    # one call (CALL) is under the block time, so the calibration jumps to ceil(1 · BLOCK / CALL · 1.1)
    # = ceil(64 · 1.1) = 71 calls >= 64. Blocks (the 3 trials of 71 calls among them) until they
    # total min_run_time = 2^-5 s = 1024 · CALL: ceil(1024 / 71) = 15 blocks
    clock = FakeClock([CALL])
    monkeypatch.setattr(timing_module.timeit, "default_timer", clock)
    result = time_blocks(clock.call, sync=None, warmup=0, min_block_time=BLOCK, min_blocks=5, min_run_time=2.0**-5)
    assert result["calls_per_block"] == 71
    assert result["block_durations"] == pytest.approx([71 * CALL] * 15)


def test_one_slow_call_does_not_shrink_the_blocks(monkeypatch):
    # the first call takes 15 ms (a descheduled thread), then CALL each: the calibration keeps the
    # shortest of three timings at each size (CALL), so blocks still grow to 71 calls; the old
    # Timer-based calibration stopped at 1 call per block after a call over its run time
    clock = FakeClock([15e-3, CALL])
    monkeypatch.setattr(timing_module.timeit, "default_timer", clock)
    result = time_blocks(clock.call, sync=None, warmup=0, min_block_time=BLOCK, min_blocks=5, min_run_time=1e-3)
    assert result["calls_per_block"] == 71
    assert len(result["block_durations"]) == 5  # min_run_time is reached at once: 5 blocks, the minimum


def test_fewer_than_five_blocks_are_refused():
    assert LAYER_MIN_BLOCKS == 5
    with pytest.raises(ValueError, match="min_repeats must be >= 5"):
        measure_layer_latency(nn.ReLU(), (torch.rand(2),), device="cpu", min_repeats=4)
    with pytest.raises(ValueError, match="min_block_time"):
        measure_layer_latency(nn.ReLU(), (torch.rand(2),), device="cpu", min_block_time=0)


def _record(path, median, iqr):
    def seconds(value):
        return {"status": "complete", "value": value, "known_value": value, "unit": "seconds", "scope": "module_call",
                "method": "torch.utils.benchmark.Timer"}

    return {"path": path, "call_index": 0, "type": "Linear", "unit": "leaf", "input": {"args": [], "kwargs": {}},
            "metrics": {"latency": seconds(median), "latency_iqr": seconds(iqr)}, "relative_spread": iqr / median,
            "stable": iqr / median <= UNSTABLE_SPREAD, "timing": {"block_durations": [0.0] * 5, "calls_per_block": 1,
                                                                   "timed_calls": 5}}


def _model_report(median, iqr):
    def seconds(value):
        return {"status": "complete", "value": value, "known_value": value, "unit": "seconds", "scope": "workload",
                "method": "torch.utils.benchmark.Timer"}

    return {"totals": {"latency": seconds(median), "latency_iqr": seconds(iqr)}}


def _build(layers, model):
    return build_report(nn.Linear(1, 1), layers, model, None, device_name="cpu", on_meta=False,
                        inputs_meta={"args": [], "kwargs": {}}, eval_mode=True, timing={}, include_model=True)


def test_share_spread_and_a_noisy_layer():
    # layers of 1 ms (IQR 0.1 ms: 10 %) and 0.5 ms (IQR 0.2 ms: 40 % > 25 %) in a model of 2 ms
    report = _build([_record("a", 1e-3, 1e-4), _record("b", 5e-4, 2e-4)], _model_report(2e-3, 5e-5))
    a, b = report["layers"]
    assert a["metrics"]["latency_share"]["value"] == pytest.approx(0.5)  # 1 ms / 2 ms
    assert b["metrics"]["latency_share"]["value"] == pytest.approx(0.25)  # 0.5 ms / 2 ms
    assert a["stable"] is True and b["stable"] is False
    assert report["totals"]["model_latency_iqr"]["value"] == 5e-5
    # sum 1.5 ms over 2 ms = 0.75, within 1/1.5 .. 1.5
    assert report["consistency"]["layer_sum_over_model"] == pytest.approx(0.75)
    assert report["consistency"]["within_tolerance"] is True
    unstable = [d for d in report["diagnostics"] if d["code"] == "layer_latency_unstable"]
    assert [d["path"] for d in unstable] == ["b"] and "40% of its median over 5 blocks" in unstable[0]["message"]
    assert report["stable"] is False


def test_a_layer_sum_far_from_the_model_is_flagged():
    # layers summing to 3 ms in a model of 1 ms: 3x > 1.5x
    report = _build([_record("a", 1e-3, 1e-5), _record("b", 2e-3, 1e-5)], _model_report(1e-3, 1e-5))
    assert report["consistency"] == {"layer_sum_over_model": pytest.approx(3.0), "tolerance": SUM_TOLERANCE,
                                     "within_tolerance": False}
    assert [d["code"] for d in report["diagnostics"]] == ["layer_latency_sum_mismatch"]
    assert "3.00x the model's latency" in report["diagnostics"][0]["message"]
    assert report["stable"] is False
    without_model = build_report(nn.Linear(1, 1), [_record("a", 1e-3, 1e-5)], None, None, device_name="cpu",
                                 on_meta=False, inputs_meta={}, eval_mode=True, timing={}, include_model=False)
    assert without_model["layers"][0]["metrics"]["latency_share"]["status"] == "unavailable"
    assert without_model["consistency"]["within_tolerance"] is None and without_model["stable"] is True


class TwoIdentical(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.LayerNorm(256)
        self.second = nn.LayerNorm(256)

    def forward(self, x):
        return self.second(self.first(x))


def test_two_identical_layers_agree_within_their_spreads():
    """The same LayerNorm twice, on inputs of the same shape: their medians must agree within the sum
    of their measured IQRs. Timing on a shared machine is noisy, so a disagreement is retried; the
    test compares the measurements with themselves, never with a fixed time."""
    model, x = TwoIdentical(), torch.rand(16, 256)
    attempts = []
    for _ in range(5):
        report = measure_layer_latency(model, (x,), device="cpu", min_run_time=0.01, min_block_time=5e-4)
        first, second = report["layers"]
        for layer in (first, second):
            assert set(layer["metrics"]) == {"latency", "latency_iqr", "latency_share"}
            assert layer["metrics"]["latency_share"]["value"] == pytest.approx(
                layer["metrics"]["latency"]["value"] / report["totals"]["model_latency"]["value"])
            assert len(layer["timing"]["block_durations"]) >= 5
        medians = [layer["metrics"]["latency"]["value"] for layer in (first, second)]
        spreads = [layer["metrics"]["latency_iqr"]["value"] for layer in (first, second)]
        attempts.append((medians, spreads))
        if abs(medians[0] - medians[1]) <= spreads[0] + spreads[1]:
            break
    else:
        pytest.fail(f"identical layers disagreed beyond their spreads in 5 attempts: {attempts}")
    assert report["totals"]["model_latency_iqr"]["status"] == "complete"

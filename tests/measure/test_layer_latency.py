"""measure_layer_latency: capture with global hooks, replay each leaf call, trust contract."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from torch import nn
from torch.nn.modules import module as module_globals

from torchscan_lsp.engine.measuring.layer_latency import measure_layer_latency

#: diagnostics that depend on how noisy the machine was, not on the model
TIMING_FLAGS = {"layer_latency_unstable", "layer_latency_sum_mismatch"}
FAST = {"warmup": 0, "min_run_time": 0.002, "min_repeats": 5, "min_block_time": 1e-4, "include_model": False}


def _keys(report):
    return [(layer["path"], layer["call_index"]) for layer in report["layers"]]


def _status(report, path, call_index=0):
    layer = next(l for l in report["layers"] if (l["path"], l["call_index"]) == (path, call_index))
    return layer["metrics"]["latency"]["status"], layer.get("reason")


class TwiceReLU(nn.Module):
    """A container that calls one child twice: two records, call_index 0 and 1."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.act = nn.ReLU()
        self.head = nn.Linear(4 * 8 * 8, 2)

    def forward(self, x):
        x = self.act(self.bn(self.conv(x)))
        x = self.act(x)
        return self.head(torch.flatten(x, 1))


def test_leaf_calls_in_call_order_with_call_indexes():
    model = TwiceReLU()
    report = measure_layer_latency(model, (torch.rand(1, 3, 8, 8),), device="cpu", **FAST)
    assert json.loads(json.dumps(report)) == report
    assert report["kind"] == "layer_latency" and report["schema_version"] == 1
    assert _keys(report) == [("conv", 0), ("bn", 0), ("act", 0), ("act", 1), ("head", 0)]
    for layer in report["layers"]:
        metric = layer["metrics"]["latency"]
        assert metric["status"] == "complete" and metric["value"] > 0
        assert metric["unit"] == "seconds" and metric["scope"] == "module_call"
        timing = layer["timing"]
        assert timing["timed_calls"] == timing["calls_per_block"] * len(timing["block_durations"])
        assert "reason" not in layer
    assert report["layers"][0]["input"]["args"][0]["shape"] == [1, 3, 8, 8]
    layer_sum = report["totals"]["layer_latency_sum"]
    assert layer_sum["status"] == "complete"
    assert layer_sum["value"] == pytest.approx(sum(l["metrics"]["latency"]["value"] for l in report["layers"]))
    assert report["totals"]["model_latency"]["status"] == "unavailable"
    assert report["totals"]["model_latency"]["method"] == "not_requested"
    # a noisy machine may flag a call unstable (its spread, not a threshold of ours on time); nothing else
    assert {d["code"] for d in report["diagnostics"]} <= TIMING_FLAGS


def test_model_latency_is_reported_beside_the_sum():
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
    report = measure_layer_latency(model, (torch.rand(2, 8),), device="cpu", warmup=0, min_run_time=0.002, min_repeats=5, min_block_time=1e-4)
    totals = report["totals"]
    assert totals["model_latency"]["status"] == "complete"
    assert totals["model_latency"]["value"] == report["model"]["totals"]["latency"]["value"]
    assert totals["layer_latency_sum"]["status"] == "complete"
    assert report["model"]["kind"] == "latency"


def test_capture_uses_global_hooks_only_and_the_model_is_left_as_it_was():
    seen = []

    class Probe(nn.Module):
        def forward(self, x):
            seen.append((len(self._forward_pre_hooks), len(self._forward_hooks), len(module_globals._global_forward_pre_hooks)))
            return x + 1

    model = nn.Sequential(Probe(), nn.BatchNorm1d(3))
    model.train()
    stats = copy.deepcopy(model[1].state_dict())
    report = measure_layer_latency(model, (torch.rand(4, 3),), device="cpu", **FAST)
    assert seen[0] == (0, 0, 1)  # capture: one global pre-hook, no per-module hook
    assert all(entry[:2] == (0, 0) for entry in seen)
    assert not module_globals._global_forward_pre_hooks and not module_globals._global_forward_hooks
    assert model.training and model[0].training and model[1].training  # flags restored
    for key, value in model[1].state_dict().items():
        assert torch.equal(value, stats[key])  # evaluation mode: running statistics untouched
    assert report["context"]["execution_mode"] == "evaluation_no_grad"


def test_callers_tensors_are_never_passed_to_the_model():
    class Mutates(nn.Module):
        def forward(self, x):
            x.add_(1)
            return x * 2

    x = torch.zeros(3)
    report = measure_layer_latency(Mutates(), (x,), device="cpu", warmup=0, min_run_time=0.002, min_repeats=5, min_block_time=1e-4)
    assert torch.equal(x, torch.zeros(3))
    assert report["layers"][0]["metrics"]["latency"]["status"] == "complete"


def test_batchnorm_in_training_is_unavailable_with_a_reason():
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    model.train()
    stats = copy.deepcopy(model[1].state_dict())
    report = measure_layer_latency(model, (torch.rand(4, 3),), device="cpu", eval_mode=False, **FAST)
    status, reason = _status(report, "1")
    assert status == "unavailable" and "running statistics" in reason
    assert _status(report, "0")[0] == "complete"
    layer_sum = report["totals"]["layer_latency_sum"]
    assert layer_sum["status"] == "partial" and layer_sum["value"] is None
    assert layer_sum["known_value"] == pytest.approx(report["layers"][0]["metrics"]["latency"]["value"])
    assert {"code": "layer_latency_unavailable", "severity": "warning", "metric": "latency", "path": "1", "message": reason} in report["diagnostics"]
    # the one capture forward is the only training-mode call: BatchNorm was never replayed
    assert int(model[1].num_batches_tracked) == int(stats["num_batches_tracked"]) + 1
    assert report["context"]["execution_mode"] == "as_is_no_grad"


def test_dropout_in_training_is_unavailable_random_numbers():
    model = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))
    report = measure_layer_latency(model.train(), (torch.rand(4, 3),), device="cpu", eval_mode=False, **FAST)
    status, reason = _status(report, "1")
    assert status == "unavailable" and "random" in reason
    # in evaluation mode (the default) dropout is the identity and is measured
    report = measure_layer_latency(model, (torch.rand(4, 3),), device="cpu", **FAST)
    assert _status(report, "1")[0] == "complete"


def test_stateful_modules_are_unavailable():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return x

    class BufferWriter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("last", torch.zeros(3))

        def forward(self, x):
            self.last.copy_(x[0])
            return x

    model = nn.Sequential(Counter(), BufferWriter(), nn.Identity())
    report = measure_layer_latency(model, (torch.rand(2, 3),), device="cpu", **FAST)
    status, reason = _status(report, "0")
    assert status == "unavailable" and "calls" in reason
    status, reason = _status(report, "1")
    assert status == "unavailable" and "buffers" in reason
    assert _status(report, "2")[0] == "complete"
    assert model[0].calls == 1  # called once, in the capture forward, never replayed


def test_inputs_that_cannot_be_captured_are_unavailable():
    class Opaque:
        def __deepcopy__(self, memo):
            raise TypeError("not copyable")

    class TakesObject(nn.Module):
        def forward(self, x, thing):
            return x

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = TakesObject()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(self.inner(x, Opaque()))

    report = measure_layer_latency(Model(), (torch.rand(2, 3),), device="cpu", **FAST)
    status, reason = _status(report, "inner")
    assert status == "unavailable" and "could not be captured" in reason and "Opaque" in reason
    assert _status(report, "lin")[0] == "complete"


def test_keyword_arguments_are_captured_and_replayed():
    class Scaled(nn.Module):
        def forward(self, x, *, scale):
            return x * scale

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.scaled = Scaled()

        def forward(self, x):
            return self.scaled(x, scale=torch.tensor(2.0))

    report = measure_layer_latency(Model(), (torch.rand(2, 3),), device="cpu", **FAST)
    layer = report["layers"][0]
    assert layer["metrics"]["latency"]["status"] == "complete"
    assert layer["input"]["kwargs"]["scale"]["kind"] == "tensor"


def test_a_replay_that_raises_is_unavailable():
    class Once(nn.Module):
        def __init__(self):
            super().__init__()
            self.box = [0]  # mutated in place: invisible to the attribute check

        def forward(self, x):
            self.box[0] += 1
            if self.box[0] > 1:
                raise RuntimeError("only once")
            return x

    report = measure_layer_latency(nn.Sequential(Once(), nn.Identity()), (torch.rand(2),), device="cpu", **FAST)
    status, reason = _status(report, "0")
    assert status == "unavailable" and "RuntimeError: only once" in reason
    assert _status(report, "1")[0] == "complete"


def test_a_transformer_layer_is_replayed_whole():
    """A TransformerEncoderLayer is a metric leaf of the engine's leaf rule (counted whole on every
    path, its fast path calls none of its children): it is timed as one unit."""
    layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    model = nn.Sequential(nn.Linear(8, 16), layer)
    report = measure_layer_latency(model, (torch.rand(2, 5, 8),), device="cpu", **FAST)
    assert _keys(report) == [("0", 0), ("1", 0)]
    assert report["layers"][1]["unit"] == "leaf"
    assert report["layers"][1]["metrics"]["latency"]["status"] == "complete"
    # a leaf replayed whole is no container's special case
    assert [d["code"] for d in report["diagnostics"] if d["code"] not in TIMING_FLAGS] == []


def test_meta_models_are_unavailable_with_a_reason():
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    report = measure_layer_latency(model, (torch.empty(2, 4, device="meta"),), device="meta", warmup=0, min_run_time=0.002, min_repeats=5, min_block_time=1e-4)
    assert _keys(report) == [("0", 0), ("1", 0)]
    for layer in report["layers"]:
        assert layer["metrics"]["latency"]["status"] == "unavailable" and "meta" in layer["reason"]
    assert report["totals"]["layer_latency_sum"]["status"] == "unavailable"
    assert report["totals"]["model_latency"]["status"] == "unavailable"
    assert report["model"] is None


def test_bad_input():
    model = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="nn.Module"):
        measure_layer_latency(lambda x: x, (torch.rand(2),), device="cpu")
    with pytest.raises(TypeError, match="args must be a tuple"):
        measure_layer_latency(model, torch.rand(2), device="cpu")
    with pytest.raises(TypeError, match="kwargs must be a mapping"):
        measure_layer_latency(model, (), [1], device="cpu")
    with pytest.raises(ValueError, match="unknown device"):
        measure_layer_latency(model, (torch.rand(2),), device="nowhere")
    with pytest.raises(TypeError, match="kwargs keys must be strings"):
        measure_layer_latency(model, (), {1: 2}, device="cpu")
    with pytest.raises(ValueError, match="min_repeats"):
        measure_layer_latency(model, (torch.rand(2),), device="cpu", min_repeats=0)


def test_device_mismatch_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    with pytest.raises(ValueError, match="live on cpu, but device is 'cuda:0'"):
        measure_layer_latency(nn.Linear(2, 2), (torch.rand(2),), device="cuda")


def test_forward_errors_propagate_and_flags_are_restored():
    class Boom(nn.Module):
        def forward(self, x):
            raise ArithmeticError("forward failed")

    model = nn.Sequential(nn.Linear(2, 2), Boom()).train()
    with pytest.raises(ArithmeticError, match="forward failed"):
        measure_layer_latency(model, (torch.rand(2),), device="cpu", **FAST)
    assert model.training and model[0].training
    assert not module_globals._global_forward_pre_hooks and not module_globals._global_forward_hooks


def test_time_budget_marks_untimed_calls_unavailable():
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    report = measure_layer_latency(model, (torch.rand(2, 3),), device="cpu", warmup=0, min_run_time=0.002, min_repeats=5, min_block_time=1e-4, time_budget=1e-9)
    for layer in report["layers"]:
        assert layer["metrics"]["latency"]["status"] == "unavailable" and "time budget" in layer["reason"]
    assert report["totals"]["layer_latency_sum"]["status"] == "unavailable"
    assert report["totals"]["model_latency"]["status"] == "unavailable" and report["model"] is None
    assert report["diagnostics"][0]["code"] == "model_latency_unavailable"
    assert report["timing"]["time_budget"] == 1e-9
    generous = measure_layer_latency(model, (torch.rand(2, 3),), device="cpu", time_budget=60, **FAST)
    assert generous["totals"]["layer_latency_sum"]["status"] == "complete"
    with pytest.raises(ValueError, match="time_budget"):
        measure_layer_latency(model, (torch.rand(2, 3),), device="cpu", time_budget=0)
    with pytest.raises(TypeError, match="time_budget"):
        measure_layer_latency(model, (torch.rand(2, 3),), device="cpu", time_budget="1s")

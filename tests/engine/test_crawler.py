"""crawl_module: layer records, totals, statuses, strict and structure modes, one forward pass
(docs/report-schema.md)."""

import json

import pytest
import torch
from torch import nn
from torch.nn.modules import module as module_globals
from torch.utils._python_dispatch import TorchDispatchMode

from torchscan_lsp import IncompleteAnalysisError, crawl_module
from torchscan_lsp.engine.recording import module_metrics
from torchscan_lsp.engine.recording.module_metrics import ordered_inputs
from torchscan_lsp.version import package_version

from test_operators import FCM, FORMULAS  # the operator-FLOPs method and formulas context, written once
FORMULA = "torchscan_module_formula"


def metric(status, value, unit, scope="module_call", method=FORMULA):
    known = value if status != "unavailable" else None
    return {"status": status, "value": value if status == "complete" else None, "known_value": known,
            "unit": unit, "scope": scope, "method": method}


def tensor_meta(*shape, dtype="torch.float32"):
    return {"kind": "tensor", "shape": list(shape), "dtype": dtype, "device": "cpu", "requires_grad": False}


def hook_state():
    return (
        len(module_globals._global_forward_hooks),
        len(module_globals._global_forward_pre_hooks),
        len(module_globals._global_forward_hooks_always_called),
        len(module_globals._global_forward_hooks_with_kwargs),
        torch._C._len_torch_dispatch_stack(),
    )


class Unsup(nn.Module):
    def forward(self, x):
        return x * 2


def partial_model():
    """The model of docs/report-schema.md."""
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.Sequential(nn.MaxPool2d(2), Unsup()),
        nn.Flatten(),
        nn.LayerNorm(64),
        nn.Linear(64, 2),
    )


class OpRecorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(str(func._overloadpacket))
        return func(*args, **(kwargs or {}))


def observed_operators(report):
    flops = report["operator_flops"]
    return set(flops["by_operator"]) | set(flops["ignored_operators"]) | {d["operator"] for d in flops["diagnostics"]}


# --------------------------------------------------------------------------------------------------
# the worked example of docs/report-schema.md


def test_conv2d_worked_example():
    report = crawl_module(nn.Conv2d(3, 8, 3), (3, 32, 32))
    assert report["schema_version"] == 1
    assert report["context"] == {
        "torchscan_version": package_version(),
        "package": "torchscan-lsp",
        "torch_version": str(torch.__version__),
        "python_version": report["context"]["python_version"],
        "model_type": "torch.nn.modules.conv.Conv2d",
        "execution_mode": "evaluation_no_grad",
        "training_before": True,
        "devices": ["cpu"],
        "dtypes": ["torch.float32"],
        "execution_path": {"grad_mode": "no_grad", "module_hooks": "global", "fused_kernels": []},
    }
    assert report["inputs"] == {"source": "generated", "args": [tensor_meta(1, 3, 32, 32)], "kwargs": {}}
    (layer,) = report["layers"]
    assert layer == {
        "path": "", "call_index": 0, "name": "conv2d", "depth": 0, "parent": None, "type": "Conv2d",
        "input": {"args": [tensor_meta(1, 3, 32, 32)], "kwargs": {}},
        "output": tensor_meta(1, 8, 30, 30),
        "parameters": {"trainable": 224, "frozen": 0, "bytes": 896, "shared": False, "shared_elements": 0, "shared_with": []},
        "buffers": {"elements": 0, "bytes": 0, "shared": False, "shared_elements": 0, "shared_with": []},
        "metrics": {
            "calls": metric("complete", 1, "calls", method="pytorch_hook"),
            # the dispatcher's count of the call: aten.convolution, 2*8*3*9*30*30 = 388800 FLOPs
            # (PyTorch's convolution formula leaves the bias out), 8*3*9*900 = 194400 MACs
            "operator_flops": metric("complete", 388800, "FLOPs", method=FCM),
            "operator_macs": metric("complete", 194400, "MACs", method="torchscan_operator_macs"),
            "module_flops": metric("complete", 388800, "FLOPs"),
            "macs": metric("complete", 194400, "MACs"),
            "dmas": metric("complete", 201824, "DMAs"),
            # module-local and cumulative values agree on a model of one module (docs/metrics.md)
            "local_receptive_field": metric("complete", 3, "elements"),
            "local_stride": metric("complete", 1, "elements"),
            "local_padding": metric("complete", 0, "elements"),
            "receptive_field": metric("complete", 3, "elements"),
            "effective_stride": metric("complete", 1, "elements"),
            "effective_padding": metric("complete", 0, "elements"),
        },
    }
    operator_total = metric("complete", 388800, "FLOPs", "workload", FCM)
    assert report["operator_flops"] == {
        "schema_version": 1,
        "context": {"torch_version": str(torch.__version__), "method": FCM, "formulas": FORMULAS},
        "total": operator_total,
        "by_module": {"Conv2d": 388800},
        "by_operator": {"aten.convolution": 388800},
        "ignored_operators": {},
        "diagnostics": [],
    }
    assert report["totals"] == {
        "parameters": metric("complete", 224, "elements", "model", "pytorch"),
        "trainable_parameters": metric("complete", 224, "elements", "model", "pytorch"),
        "frozen_parameters": metric("complete", 0, "elements", "model", "pytorch"),
        "parameter_bytes": metric("complete", 896, "bytes", "model", "pytorch"),
        "buffer_elements": metric("complete", 0, "elements", "model", "pytorch"),
        "buffer_bytes": metric("complete", 0, "bytes", "model", "pytorch"),
        "module_flops": metric("complete", 388800, "FLOPs", "forward"),
        "operator_flops": operator_total,
        "macs": metric("complete", 194400, "MACs", "forward"),
        "dmas": metric("complete", 201824, "DMAs", "forward"),
        "operator_macs": metric("complete", 194400, "MACs", "workload", "torchscan_operator_macs"),
    }
    assert report["diagnostics"] == []
    assert json.loads(json.dumps(report)) == report


def test_bare_conv2d_passes_strict_mode():
    report = crawl_module(nn.Conv2d(3, 8, 3), (3, 32, 32), strict=True)
    assert report["totals"]["module_flops"]["value"] == 388800


# --------------------------------------------------------------------------------------------------
# the partial example of docs/report-schema.md


def test_partial_model_layers_parameters_and_buffers():
    report = crawl_module(partial_model(), (3, 8, 8))
    layers = report["layers"]
    assert [(l["path"], l["name"], l["depth"], l["type"]) for l in layers] == [
        ("", "sequential", 0, "Sequential"),
        ("0", "0", 1, "Conv2d"),
        ("1", "1", 1, "BatchNorm2d"),
        ("2", "2", 1, "ReLU"),
        ("3", "3", 1, "Sequential"),
        ("3.0", "0", 2, "MaxPool2d"),
        ("3.1", "1", 2, "Unsup"),
        ("4", "4", 1, "Flatten"),
        ("5", "5", 1, "LayerNorm"),
        ("6", "6", 1, "Linear"),
    ]
    params = {l["path"]: l["parameters"]["trainable"] for l in layers}
    assert params == {"": 0, "0": 112, "1": 8, "2": 0, "3": 0, "3.0": 0, "3.1": 0, "4": 0, "5": 128, "6": 130}
    assert layers[2]["buffers"] == {"elements": 9, "bytes": 40, "shared": False, "shared_elements": 0, "shared_with": []}
    totals = report["totals"]
    assert totals["parameters"]["value"] == 378 and totals["trainable_parameters"]["value"] == 378
    assert totals["frozen_parameters"]["value"] == 0
    assert totals["parameter_bytes"]["value"] == 1512
    assert totals["buffer_elements"]["value"] == 9 and totals["buffer_bytes"]["value"] == 40
    assert report["context"]["dtypes"] == ["torch.float32", "torch.int64"]
    # containers carry `calls` and their inclusive dispatcher counts, no module formulas
    container = {"calls", "operator_flops", "operator_macs"}
    assert set(layers[0]["metrics"]) == container and set(layers[4]["metrics"]) == container


def test_partial_model_module_metrics_and_aggregation():
    report = crawl_module(partial_model(), (3, 8, 8))
    by_path = {l["path"]: l["metrics"] for l in report["layers"]}
    expected = {  # contract values (docs/report-schema.md), module_flops / macs / dmas
        "0": (13824, 6912, 7280),
        "1": (1032, 512, 530),
        "2": (256, 0, 512),
        "4": (0, 0, 128),
        "6": (256, 128, 196),
    }
    for path, values in expected.items():
        assert tuple(by_path[path][name]["value"] for name in ("module_flops", "macs", "dmas")) == values, path
    assert [by_path["0"][n]["value"] for n in ("receptive_field", "effective_stride", "effective_padding")] == [3, 1, 1]
    unsup = by_path["3.1"]
    for name in ("module_flops", "macs", "dmas"):
        assert unsup[name]["status"] == "partial" and unsup[name]["known_value"] == 0
    for name in ("receptive_field", "effective_stride", "effective_padding"):
        assert unsup[name]["status"] == "unavailable"
    for name, unit in (("module_flops", "FLOPs"), ("macs", "MACs"), ("dmas", "DMAs")):
        known = sum(m[name]["known_value"] for m in by_path.values() if name in m)
        assert report["totals"][name] == metric("partial", known, unit, "forward"), name
    unsup_diags = [d for d in report["diagnostics"] if d.get("path") == "3.1"]
    assert unsup_diags == [
        {"code": "unsupported_module_metric", "severity": "warning", "metric": metric_name, "path": "3.1",
         "message": f"Module type not supported: {Unsup.__module__}.Unsup"}  # a class outside torch: qualified
        for metric_name in ("module_flops", "macs", "dmas", "receptive_field")
    ]


def test_module_diagnostics_come_before_operator_diagnostics(monkeypatch):
    from torchscan_lsp.engine import operator_formulas

    monkeypatch.setattr(operator_formulas, "DEFAULT_FORMULAS", {})
    monkeypatch.setattr(operator_formulas, "DECOMPOSITION_GUARDS", {}, raising=False)
    report = crawl_module(partial_model(), (3, 8, 8))
    kinds = ["operator" if "operator" in d else "module" for d in report["diagnostics"]]
    assert kinds == sorted(kinds, key=lambda kind: kind == "operator") and "operator" in kinds
    operators = [d["operator"] for d in report["diagnostics"] if "operator" in d]
    assert operators == sorted(operators)
    assert report["diagnostics"][-len(operators):] == report["operator_flops"]["diagnostics"]
    assert report["totals"]["operator_flops"] is report["operator_flops"]["total"]
    assert report["totals"]["operator_flops"]["status"] == "partial"
    assert report["totals"]["operator_flops"]["known_value"] == 14080  # convolution 13824 + addmm 256


def test_strict_headline_passes_when_one_method_counts_everything():
    # Unsup (x * 2) has no module formula, but the dispatcher counts its aten.mul: one method is
    # complete for FLOPs and for MACs, so strict="headline" (FLOPs, MACs, parameters) is satisfied.
    report = crawl_module(partial_model(), (3, 8, 8), strict="headline")
    assert report["totals"]["module_flops"]["status"] == "partial"
    assert report["totals"]["operator_flops"]["status"] == "complete"


def test_strict_true_raises_on_the_module_formulas_that_miss_work():
    # the reference's rule: Unsup has no module formula, so module FLOPs, MACs and DMAs are partial
    # (the operators counting its aten.mul do not make them complete), and the receptive field
    # stops at Unsup, one call ('3.1')
    with pytest.raises(IncompleteAnalysisError) as info:
        crawl_module(partial_model(), (3, 8, 8), strict=True)
    assert str(info.value) == ("Analysis is incomplete for: flops (module_flops partial); macs (macs partial); "
                               "dmas (dmas partial); receptive_field (incomplete in 1 call(s)).")


def test_strict_mode_raises_with_the_report():
    everything = ["flops", "macs", "parameters", "dmas", "receptive_field"]
    with pytest.raises(IncompleteAnalysisError) as info:
        crawl_module(partial_model(), (3, 8, 8), strict=everything)
    report = info.value.report
    assert report["layers"] and report["diagnostics"]
    # the DMAs have one method (module formulas), partial at Unsup; the receptive field stops at
    # Unsup, one call ('3.1'); FLOPs and MACs are complete through the operators (the headline rule)
    assert str(info.value) == (
        "Analysis is incomplete for: dmas (dmas partial); receptive_field (incomplete in 1 call(s))."
    )


def test_strict_mode_raises_after_cleanup():
    model = partial_model()
    state = hook_state()
    with pytest.raises(IncompleteAnalysisError):
        crawl_module(model, (3, 8, 8), strict=["dmas"])
    assert all(m.training for m in model.modules())
    assert hook_state() == state


# --------------------------------------------------------------------------------------------------
# structure mode


def test_structure_mode_report():
    report = crawl_module(partial_model(), (3, 8, 8), mode="structure", strict=True)
    assert report["context"]["analysis_mode"] == "structure"
    assert all(set(layer["metrics"]) == {"calls"} for layer in report["layers"])
    assert len(report["layers"]) == 10 and report["layers"][1]["output"] == tensor_meta(1, 4, 8, 8)
    assert report["operator_flops"] == {
        "schema_version": 1,
        "context": {"torch_version": str(torch.__version__), "method": "not_requested"},
        "total": metric("unavailable", None, "FLOPs", "workload", "not_requested"),
        "by_module": {}, "by_operator": {}, "ignored_operators": {}, "diagnostics": [],
    }
    totals = report["totals"]
    assert totals["module_flops"] == metric("unavailable", None, "FLOPs", "forward", "not_requested")
    assert totals["macs"] == metric("unavailable", None, "MACs", "forward", "not_requested")
    assert totals["dmas"] == metric("unavailable", None, "DMAs", "forward", "not_requested")
    assert totals["operator_flops"] == report["operator_flops"]["total"]
    assert totals["parameters"]["value"] == 378
    assert report["diagnostics"] == []
    assert "analysis_mode" not in crawl_module(partial_model(), (3, 8, 8))["context"]


def test_structure_mode_runs_no_formula_and_no_counter(monkeypatch):
    def explode(*args, **kwargs):
        raise AssertionError("no formula in structure mode")

    monkeypatch.setattr(module_metrics, "_FORMULAS", (explode, explode, explode, explode))
    recorder = OpRecorder()
    with recorder:
        report = crawl_module(nn.Linear(3, 2), (3,), mode="structure")
    assert report["layers"][0]["metrics"].keys() == {"calls"}


# --------------------------------------------------------------------------------------------------
# one forward pass, nothing left behind


class Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.linear(x)


@pytest.mark.parametrize("mode", ["full", "structure"])
def test_the_forward_runs_exactly_once(mode):
    model = Counting()
    crawl_module(model, (4,), mode=mode)
    assert model.calls == 1


def test_formula_work_is_never_seen_by_the_operator_counter(monkeypatch):
    flops, macs, dmas, rf = module_metrics._formulas()

    def tensor_flops(module, inputs, out):
        torch.ones(3).sin().sum()  # tensor work inside a formula
        return flops(module, inputs, out)

    monkeypatch.setattr(module_metrics, "_FORMULAS", (tensor_flops, macs, dmas, rf))
    report = crawl_module(nn.Conv2d(3, 8, 3), (3, 32, 32))
    assert observed_operators(report) == {"aten.convolution"}
    assert report["totals"]["module_flops"]["value"] == 388800


class Raising(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(3)
        self.inner = nn.Sequential(nn.Linear(3, 3), nn.Dropout())

    def forward(self, x):
        self.bn(x)
        raise KeyError("from the model")


@pytest.mark.parametrize("mode", ["full", "structure"])
def test_a_raising_forward_propagates_and_restores_everything(mode):
    model = Raising()
    model.inner[1].eval()  # mixed flags
    flags = [m.training for m in model.modules()]
    stats = model.bn.running_mean.clone(), int(model.bn.num_batches_tracked)
    state = hook_state()
    with pytest.raises(KeyError) as info:
        crawl_module(model, (3, 4, 4), mode=mode)
    assert info.value.args == ("from the model",)
    assert [m.training for m in model.modules()] == flags
    assert torch.equal(model.bn.running_mean, stats[0]) and int(model.bn.num_batches_tracked) == stats[1]
    assert hook_state() == state
    # a failure followed by a success: nothing leaked into the next analysis
    report = crawl_module(nn.Conv2d(3, 8, 3), (3, 32, 32))
    assert report["totals"]["operator_flops"]["value"] == 388800


def test_training_flags_are_restored_and_batchnorm_statistics_untouched():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Dropout())
    model[2].eval()
    flags = [m.training for m in model.modules()]
    mean = model[1].running_mean.clone()
    report = crawl_module(model, (3, 8, 8))
    assert [m.training for m in model.modules()] == flags
    assert torch.equal(model[1].running_mean, mean) and int(model[1].num_batches_tracked) == 0
    assert report["context"]["training_before"] is True


def test_three_back_to_back_crawls_are_identical():
    model = partial_model()
    state = hook_state()
    dumps = [json.dumps(crawl_module(model, (3, 8, 8)), sort_keys=True) for _ in range(3)]
    assert dumps[0] == dumps[1] == dumps[2]
    assert hook_state() == state


def test_measuring_does_not_switch_off_the_transformer_fast_path():
    """Global hooks keep `TransformerEncoderLayer`'s fused kernel; a per-module hook would not."""
    layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True).eval()
    x = torch.rand(1, 4, 8)
    plain = OpRecorder()
    with torch.no_grad(), plain:
        layer(x)
    assert "aten._transformer_encoder_layer_fwd" in plain.ops  # the fused path, without analysis
    report = crawl_module(layer, args=(x,))
    assert observed_operators(report) == plain.ops
    # the test is meaningful: one per-module hook on a child does change the kernels
    handle = layer.linear1.register_forward_hook(lambda *a: None)
    try:
        hooked = OpRecorder()
        with torch.no_grad(), hooked:
            layer(x)
    finally:
        handle.remove()
    assert "aten._transformer_encoder_layer_fwd" not in hooked.ops


def test_a_fused_container_is_measured_as_one_unit():
    layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True).eval()
    report = crawl_module(layer, args=(torch.rand(1, 4, 8),))
    (record,) = report["layers"]  # the children never ran as modules
    assert record["parameters"]["trainable"] == report["totals"]["parameters"]["value"]
    assert "module_flops" in record["metrics"]
    assert report["totals"]["module_flops"]["status"] in ("complete", "partial")


# --------------------------------------------------------------------------------------------------
# calls, sharing, inputs and outputs


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Linear(4, 4)
        self.alias = self.block
        self.head = nn.Linear(4, 4, bias=False)
        self.head.weight = self.block.weight  # tied

    def forward(self, x):
        return self.head(self.alias(self.block(x)))


def test_shared_modules_and_tied_weights():
    report = crawl_module(Shared(), (4,))
    records = [(l["path"], l["call_index"], l["parameters"]) for l in report["layers"]]
    # block's weight (4x4 = 16) and bias (4) are counted once, by its first call; its second call
    # and the head (whose weight is block's) say with whom they share: 20 and 16 elements
    def params(trainable, nbytes, shared_elements=0, shared_with=()):
        return {"trainable": trainable, "frozen": 0, "bytes": nbytes, "shared": bool(shared_elements),
                "shared_elements": shared_elements, "shared_with": list(shared_with)}  # fmt: skip

    assert records == [
        ("", 0, params(0, 0)),
        ("block", 0, params(20, 80)),
        ("block", 1, params(0, 0, 20, ["block"])),
        ("head", 0, params(0, 0, 16, ["block"])),
    ]
    assert report["totals"]["parameters"]["value"] == 20
    # compute is counted once per call
    flops = [l["metrics"]["module_flops"]["value"] for l in report["layers"][1:]]
    assert flops[0] == flops[1] and report["totals"]["module_flops"]["value"] == sum(flops)


def test_frozen_parameters():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    model[0].requires_grad_(False)
    report = crawl_module(model, (2,))
    assert report["totals"]["frozen_parameters"]["value"] == 6
    assert report["totals"]["trainable_parameters"]["value"] == 6
    assert report["layers"][1]["parameters"]["frozen"] == 6


class KwargsOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)

    def forward(self, *, features, mask=None, scale=1.0):
        out = self.proj(features)
        return {"out": out, "mask": mask, "extra": [None, (out,)]}


def test_kwargs_only_call_with_dict_output_and_none():
    features = torch.rand(2, 3)
    report = crawl_module(KwargsOnly(), kwargs={"features": features, "mask": None})
    root = report["layers"][0]
    assert root["input"] == {"args": [], "kwargs": {"features": tensor_meta(2, 3), "mask": {"kind": "none"}}}
    assert root["output"] == {
        "kind": "mapping", "type": "dict", "items": [
            {"key": "out", "key_type": "str", "value": tensor_meta(2, 3)},
            {"key": "mask", "key_type": "str", "value": {"kind": "none"}},
            {"key": "extra", "key_type": "str", "value": {"kind": "list", "items": [
                {"kind": "none"}, {"kind": "tuple", "items": [tensor_meta(2, 3)]}]}},
        ],
    }
    assert report["layers"][1]["metrics"]["module_flops"]["status"] == "complete"
    assert json.loads(json.dumps(report)) == report


class NoTensorOut(nn.Module):
    def forward(self, x):
        return None


def test_a_call_without_output_tensor_is_unavailable():
    report = crawl_module(NoTensorOut(), (2,))
    metrics = report["layers"][0]["metrics"]
    for name in ("module_flops", "macs", "dmas"):
        assert metrics[name]["status"] == "unavailable"
    assert "receptive_field" not in metrics
    assert [(d["code"], d["metric"]) for d in report["diagnostics"]] == [
        ("missing_metric_tensor", "module_flops"), ("missing_metric_tensor", "macs"), ("missing_metric_tensor", "dmas"),
    ]
    assert report["diagnostics"][0]["message"] == "The module call did not expose both an input and output tensor."
    assert report["totals"]["module_flops"]["status"] == "unavailable"
    # no operator ran: the dispatcher's complete 0 FLOPs makes strict="headline" pass; the DMAs have
    # the module formulas only, and those could not run; strict=True wants the module formulas too
    assert crawl_module(NoTensorOut(), (2,), strict="headline")["totals"]["operator_flops"]["value"] == 0
    with pytest.raises(IncompleteAnalysisError, match=r"for: flops \(module_flops unavailable\); macs \(macs "
                       r"unavailable\); dmas \(dmas unavailable\)\.$"):
        crawl_module(NoTensorOut(), (2,), strict=True)
    with pytest.raises(IncompleteAnalysisError, match=r"Analysis is incomplete for: dmas \(dmas unavailable\)\."):
        crawl_module(NoTensorOut(), (2,), strict=["dmas"])


class Repeated(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU()

    def forward(self, x):
        for _ in range(3):
            x = self.act(x)
        return x


def test_repeated_calls_get_call_indexes_in_call_order():
    report = crawl_module(Repeated(), (5,))
    assert [(l["path"], l["call_index"]) for l in report["layers"]] == [("", 0), ("act", 0), ("act", 1), ("act", 2)]
    assert report["totals"]["module_flops"]["value"] == 3 * report["layers"][1]["metrics"]["module_flops"]["value"]


class Outsider(nn.Module):
    def forward(self, x):
        return nn.ReLU()(x)  # a module that is not part of the model


def test_modules_outside_the_model_are_not_recorded():
    report = crawl_module(Outsider(), (3,))
    assert [l["path"] for l in report["layers"]] == [""]


class Failing(nn.Module):
    def forward(self, x):
        return x @ torch.ones(5, 5)  # shapes do not match: raises


class Catching(nn.Module):
    def __init__(self):
        super().__init__()
        self.bad = Failing()
        self.good = nn.ReLU()

    def forward(self, x):
        try:
            self.bad(x)
        except RuntimeError:
            pass
        return self.good(x)


def test_a_caught_child_failure_is_reported_not_hidden():
    report = crawl_module(Catching(), (3, 4))
    bad = report["layers"][1]
    assert bad["path"] == "bad" and bad["output"] == {"kind": "pending"}
    assert bad["metrics"]["module_flops"]["status"] == "unavailable"
    codes = {(d["code"], d.get("path")) for d in report["diagnostics"]}
    assert ("module_call_failed", "bad") in codes
    assert report["layers"][2]["metrics"]["module_flops"]["status"] == "complete"
    assert report["totals"]["module_flops"]["status"] == "partial"


def test_multihead_attention_is_a_metric_leaf_with_recursive_statistics():
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    q = torch.rand(1, 4, 8)
    report = crawl_module(mha, args=(q, q, q))
    (layer,) = report["layers"]
    assert layer["parameters"]["trainable"] == sum(p.numel() for p in mha.parameters())
    assert layer["metrics"]["module_flops"]["status"] == "complete"
    assert layer["output"]["kind"] == "tuple"


def test_transformer_root_is_one_unit():
    model = nn.Transformer(d_model=4, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=8,
                           dropout=0.0, batch_first=True)
    report = crawl_module(model, args=(torch.rand(1, 3, 4), torch.rand(1, 2, 4)))
    (layer,) = report["layers"]
    assert layer["type"] == "Transformer" and layer["name"] == "transformer"
    assert layer["parameters"]["trainable"] == report["totals"]["parameters"]["value"]
    assert layer["metrics"]["module_flops"]["status"] == "complete"
    assert report["operator_flops"]["by_module"]  # children still label operator work


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
def test_script_modules_do_not_crash_and_count_operators():
    scripted = torch.jit.script(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()))
    state = hook_state()
    report = crawl_module(scripted, (3, 8, 8))
    assert hook_state() == state
    (layer,) = report["layers"]
    assert layer["parameters"]["trainable"] == 112
    assert {d["code"] for d in report["diagnostics"] if "path" in d} == {"unsupported_script_module"}
    assert report["totals"]["module_flops"]["status"] == "unavailable"
    assert report["operator_flops"]["by_operator"]["aten.convolution"] == 2 * 4 * 36 * 27


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
def test_scripted_child_inside_a_python_model():
    model = nn.Sequential(nn.Linear(3, 3), torch.jit.script(nn.Sequential(nn.Linear(3, 2))))
    report = crawl_module(model, (3,))
    assert [l["path"] for l in report["layers"]] == ["", "0", "1"]
    assert report["layers"][2]["parameters"]["trainable"] == 8
    assert report["layers"][1]["metrics"]["module_flops"]["status"] == "complete"
    assert report["operator_flops"]["by_operator"]["aten.addmm"] > 0


def test_generated_dtype_and_provided_int_ids():
    model = nn.Embedding(10, 4)
    ids = torch.tensor([[1, 2, 3]])
    report = crawl_module(model, args=(ids,))
    assert report["inputs"]["args"][0] == tensor_meta(1, 3, dtype="torch.int64")
    assert report["layers"][0]["output"] == tensor_meta(1, 3, 4)


# --------------------------------------------------------------------------------------------------
# ordered inputs (docs/report-schema.md)


class TwoArgs(nn.Module):
    def forward(self, first, _second=None):
        return first


class Star(nn.Module):
    def forward(self, *inputs):
        return inputs[0]


class Defaults(nn.Module):
    def forward(self, x, y=3, *, z=4, **extra):
        return x


def test_ordered_inputs_examples():
    assert ordered_inputs(TwoArgs(), (1,), {}) == (1, None)
    assert ordered_inputs(TwoArgs(), (), {"unexpected": 2}) == (2,)
    assert ordered_inputs(Star(), (1, 2), {}) == (1, 2)
    assert ordered_inputs(Defaults(), (1,), {}) == (1, 3, 4)
    assert ordered_inputs(Defaults(), (1,), {"z": 5, "w": 6}) == (1, 3, 5, 6)
    assert ordered_inputs(Defaults(), (1, 2, 3), {}) == (1, 2, 3)  # too many: falls back


def test_ordered_inputs_without_a_signature():
    module = nn.Identity()
    module.forward = print  # a builtin: inspect cannot read it
    assert ordered_inputs(module, (1,), {"extra": 2}) == (1, 2)


def test_ordered_inputs_per_instance_forward():
    module = nn.Identity()
    module.forward = lambda a, b=7: a  # instance attribute, not cached per class
    assert ordered_inputs(module, (1,), {}) == (1, 7)
    assert ordered_inputs(nn.Identity(), (1,), {}) == (1,)


def test_a_transformers_model_with_token_ids_and_mask():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, n_positions=64, vocab_size=100)
    torch.manual_seed(0)
    model = transformers.GPT2Model(config)
    ids = torch.randint(0, 100, (1, 12))
    mask = torch.ones(1, 12, dtype=torch.long)
    flags = [m.training for m in model.modules()]
    state = hook_state()
    report = crawl_module(model, kwargs={"input_ids": ids, "attention_mask": mask})
    assert hook_state() == state and [m.training for m in model.modules()] == flags
    assert report["inputs"]["kwargs"]["input_ids"] == tensor_meta(1, 12, dtype="torch.int64")
    paths = [layer["path"] for layer in report["layers"]]
    assert paths[0] == "" and "h.0.attn" in paths and "h.1.mlp" in paths
    assert report["totals"]["parameters"]["value"] == sum(p.numel() for p in model.parameters())
    assert report["totals"]["operator_flops"]["known_value"] > 0
    assert json.loads(json.dumps(report)) == report
    structure = crawl_module(model, kwargs={"input_ids": ids, "attention_mask": mask}, mode="structure")
    assert [l["path"] for l in structure["layers"]] == paths


@pytest.mark.parametrize("enabled", [True, False])
def test_the_garbage_collector_state_is_restored(enabled):
    import gc

    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        crawl_module(nn.Linear(2, 2), (2,))
        assert gc.isenabled() is enabled
        with pytest.raises(KeyError):
            crawl_module(Raising(), (3, 4, 4))
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_warning_capture_leaves_the_warnings_module_as_it_was():
    import warnings

    filters, show = warnings.filters, warnings.showwarning
    snapshot = list(filters)
    crawl_module(partial_model(), (3, 8, 8))  # its Unsup layer makes the formulas warn
    assert warnings.filters is filters and list(warnings.filters) == snapshot
    assert warnings.showwarning is show
    with pytest.warns(UserWarning, match="still visible"):
        warnings.warn("still visible")

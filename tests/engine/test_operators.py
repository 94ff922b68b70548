"""Operator FLOPs: measure_flops over FlopCounterMode's formulas (docs/operator-formulas.md).

The default formula table (``operator_formulas.DEFAULT_FORMULAS``) grows over time; tests that need
an operator without a formula replace the table by an explicit one with ``monkeypatch`` instead of
assuming which operators are uncounted.
"""

import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from torchscan_lsp import measure_flops
from torchscan_lsp.engine import operator_formulas
from torchscan_lsp.engine.recording.operator_counter import OperatorCounter
from torchscan_lsp.engine.recording.operator_table import default_mapping
from torchscan_lsp.engine.recording.operators import (
    IGNORED_OPERATORS,
    REFERENCE_IGNORED,
    counter_report,
    not_requested_flop_report,
)
from torchscan_lsp.version import package_version

aten = torch.ops.aten
FCM = "torch.utils.flop_counter.FlopCounterMode+torchscan_lsp.operator_formulas"
#: context["formulas"] of a report counted with this package's formulas only
FORMULAS = {
    "engine": "torchscan-lsp operator formulas",
    "version": package_version(),
    "replaces_pytorch": ["aten.convolution_backward"],
    "custom": [],
}


@pytest.fixture
def no_default_formulas(monkeypatch):
    """Behave as if this project shipped no operator formulas (PyTorch's own only)."""
    monkeypatch.setattr(operator_formulas, "DEFAULT_FORMULAS", {})
    monkeypatch.setattr(operator_formulas, "DECOMPOSITION_GUARDS", {}, raising=False)


@pytest.fixture
def sin_formula(monkeypatch):
    """A default table with one known formula: 5 FLOPs per aten.sin call."""
    monkeypatch.setattr(operator_formulas, "DEFAULT_FORMULAS", {aten.sin: lambda *a, out_shape=None, **k: 5})
    monkeypatch.setattr(operator_formulas, "DECOMPOSITION_GUARDS", {}, raising=False)


def dispatch_depth() -> int:
    return torch._C._len_torch_dispatch_stack()


def test_contract_example_linear_of_a_matrix_product():
    left, right, linear = torch.rand(2, 3), torch.rand(3, 4), nn.Linear(4, 2)
    report = measure_flops(lambda: linear(left @ right))
    assert report == {
        "schema_version": 1,
        "context": {"torch_version": str(torch.__version__), "method": FCM, "formulas": FORMULAS},
        "total": {"status": "complete", "value": 80, "known_value": 80, "unit": "FLOPs", "scope": "workload", "method": FCM},
        "by_module": {"Linear": 32},
        "by_operator": {"aten.addmm": 32, "aten.mm": 48},
        "ignored_operators": {"aten.t": {"calls": 1, "reason": "Metadata-only tensor view."}},
        "diagnostics": [],
    }
    assert json.loads(json.dumps(report)) == report


def test_operator_without_formula_is_uncounted(no_default_formulas):
    ones = torch.ones(8)
    report = measure_flops(lambda: torch.sin(ones))
    assert report["total"] == {
        "status": "partial", "value": None, "known_value": 0, "unit": "FLOPs", "scope": "workload", "method": FCM,
    }
    assert report["by_operator"] == {} and report["by_module"] == {} and report["ignored_operators"] == {}
    assert report["diagnostics"] == [
        {
            "code": "uncounted_operator",
            "severity": "warning",
            "metric": "flops",
            "operator": "aten.sin",
            "message": "aten.sin was observed 1 time(s), but no FLOP formula is registered.",
        }
    ]


def test_default_formulas_are_used(sin_formula):
    ones = torch.ones(8)
    report = measure_flops(lambda: (torch.sin(ones), torch.sin(ones)))
    assert report["by_operator"] == {"aten.sin": 10}
    assert report["total"]["status"] == "complete"


def test_caller_mapping_wins_over_defaults_and_pytorch(sin_formula):
    ones, a = torch.ones(8), torch.rand(2, 2)
    mapping = {aten.sin: lambda *args, out_shape=None, **kwargs: 9, aten.mm: lambda *args, out_shape=None, **kwargs: 1}
    copy = dict(mapping)
    report = measure_flops(lambda: (torch.sin(ones), a @ a), custom_mapping=mapping)
    assert report["by_operator"] == {"aten.mm": 1, "aten.sin": 9}
    assert mapping == copy  # never mutated


def test_custom_formula_receives_shapes_like_flop_counter_mode():
    seen = {}

    def formula(x_shape, *args, out_shape=None, **kwargs):
        seen["x"], seen["out"] = x_shape, out_shape
        return 0

    ones = torch.ones(2, 3)
    report = measure_flops(lambda: torch.cos(ones), custom_mapping={aten.cos: formula})
    assert seen == {"x": torch.Size([2, 3]), "out": torch.Size([2, 3])}
    assert report["by_operator"] == {"aten.cos": 0}  # a zero formula still appears
    method = FCM + "+custom(aten.cos)"
    assert report["total"] == {"status": "complete", "value": 0, "known_value": 0, "unit": "FLOPs", "scope": "workload", "method": method}


def test_reports_name_the_formulas_that_counted():
    """Two reports that counted differently never look alike: the method names the caller's
    operators, the context describes each caller formula and this package's version."""

    def cheap_cos(*args, out_shape=None, **kwargs):
        """cos as one FLOP per element."""
        return 6

    ones = torch.ones(2, 3)
    plain = measure_flops(lambda: torch.cos(ones))
    custom = measure_flops(lambda: torch.cos(ones), custom_mapping={aten.cos: cheap_cos, aten.sin: lambda *a, **k: 0})
    assert plain["total"]["method"] == plain["context"]["method"] == FCM
    assert plain["context"]["formulas"] == FORMULAS
    assert custom["total"]["method"] == FCM + "+custom(aten.cos,aten.sin)"
    described = custom["context"]["formulas"]["custom"]
    assert [entry["operator"] for entry in described] == ["aten.cos", "aten.sin"]
    assert described[0]["description"] == f"{__name__}.test_reports_name_the_formulas_that_counted.<locals>.cheap_cos: cos as one FLOP per element."
    assert described[1]["description"].endswith("<lambda>")
    assert custom["context"]["formulas"]["version"] == package_version()


def test_raw_formulas_receive_values():
    seen = {}

    def formula(*args, out_val=None, **kwargs):
        seen["arg"] = args[0]
        return 1

    formula._get_raw = True
    ones = torch.ones(3)
    measure_flops(lambda: torch.tan(ones), custom_mapping={aten.tan: formula})
    assert isinstance(seen["arg"], torch.Tensor)


def test_overload_keys_are_rejected_before_running():
    calls = []
    with pytest.raises(TypeError) as info:
        measure_flops(lambda: calls.append(1), custom_mapping={aten.sin.default: lambda *a, **k: 0})
    assert "operator packets such as torch.ops.aten.sin, not overloads such as torch.ops.aten.sin.default" in str(info.value)
    assert calls == []


def test_workload_runs_once_and_its_exception_propagates():
    calls = []
    error = RuntimeError("boom")

    def workload():
        calls.append(1)
        raise error

    depth = dispatch_depth()
    with pytest.raises(RuntimeError) as info:
        measure_flops(workload)
    assert info.value is error and calls == [1]
    assert dispatch_depth() == depth  # no dispatch mode left behind


def test_workload_must_be_callable():
    with pytest.raises(TypeError, match="workload must be a zero-argument callable"):
        measure_flops(42)  # type: ignore[arg-type]


def test_ignore_list_has_the_reference_entries_with_reasons():
    assert len(REFERENCE_IGNORED) == 30
    reasons = {
        "aten.view": "Metadata-only tensor view.",
        "aten.cat": "Data movement is excluded from FLOPs.",
        "aten.empty": "Tensor allocation is excluded from FLOPs.",
        "aten.zeros": "Tensor creation is excluded from FLOPs.",
    }
    for op, reason in reasons.items():
        assert IGNORED_OPERATORS[op] == reason
    for op, reason in REFERENCE_IGNORED.items():
        assert IGNORED_OPERATORS[op] == reason
    assert all(isinstance(reason, str) and reason for reason in IGNORED_OPERATORS.values())


def test_ignored_operators_are_reported_with_calls_and_reason():
    x = torch.rand(2, 3)
    report = measure_flops(lambda: (x.view(3, 2), x.view(6), torch.cat([x, x])))
    assert report["ignored_operators"]["aten.view"] == {"calls": 2, "reason": "Metadata-only tensor view."}
    assert report["ignored_operators"]["aten.cat"] == {"calls": 1, "reason": "Data movement is excluded from FLOPs."}
    assert report["diagnostics"] == [] and report["total"]["status"] == "complete"


def test_diagnostics_are_sorted_by_operator(no_default_formulas):
    x = torch.rand(4)
    report = measure_flops(lambda: (torch.tan(x), torch.cos(x), torch.cos(x), torch.abs(x)))
    assert [d["operator"] for d in report["diagnostics"]] == ["aten.abs", "aten.cos", "aten.tan"]
    assert report["diagnostics"][1]["message"] == "aten.cos was observed 2 time(s), but no FLOP formula is registered."


def test_by_module_labels():
    model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 2)))
    x = torch.rand(1, 4)
    report = measure_flops(lambda: model(x), modules=model)
    assert report["by_module"] == {"Sequential": 48, "Sequential.0": 32, "Sequential.1": 16, "Sequential.1.0": 16}


def _workloads():
    torch.manual_seed(0)
    conv = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1)).eval()
    image = torch.rand(1, 3, 16, 16)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    q = torch.rand(1, 4, 8)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, batch_first=True), 2).eval()
    src = torch.rand(1, 5, 16)
    gru = nn.GRU(4, 6, batch_first=True)
    seq = torch.rand(1, 3, 4)
    return {
        "cnn": lambda: conv(image),
        "sdpa": lambda: F.scaled_dot_product_attention(q, q, q),
        "mha": lambda: mha(q, q, q),
        "encoder": lambda: encoder(src),
        "gru": lambda: gru(seq),
        "matmuls": lambda: torch.baddbmm(q @ q.transpose(1, 2), q, q.transpose(1, 2)) @ q,
    }


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("name", list(_workloads()))
def test_counts_equal_pytorch_flop_counter_mode(name, grad):
    """The single-mode counter gives exactly what a stock FlopCounterMode gives with the same formulas."""
    workload = _workloads()[name]
    with torch.set_grad_enabled(grad):
        with FlopCounterMode(display=False, custom_mapping=default_mapping()) as stock:
            workload()
        ours = measure_flops(workload)
    raw = stock.get_flop_counts()
    assert ours["by_operator"] == dict(sorted((str(k), v) for k, v in raw.get("Global", {}).items()))
    assert ours["by_module"] == dict(sorted((k, sum(v.values())) for k, v in raw.items() if k != "Global"))


@pytest.mark.parametrize("name", list(_workloads()))
def test_stock_fallback_gives_the_same_report(name):
    workload = _workloads()[name]
    fallback = OperatorCounter(stock=True)
    with torch.no_grad():
        with fallback:
            workload()
        ours = measure_flops(workload)
    report = counter_report(fallback)
    for key in ("by_operator", "by_module", "ignored_operators", "diagnostics", "total"):
        assert report[key] == ours[key], key


def test_composite_operators_are_counted_through_their_decomposition(no_default_formulas):
    linear = nn.Linear(3, 2)
    x = torch.rand(1, 3)
    with torch.inference_mode():  # aten.linear reaches the dispatcher here
        report = measure_flops(lambda: linear(x))
    assert report["by_operator"] == {"aten.addmm": 12}
    assert "aten.linear" not in json.dumps(report)  # what ran was counted: no false "uncounted"


def test_a_guarded_composite_is_counted_by_its_own_formula(monkeypatch):
    linear = nn.Linear(3, 2)
    x = torch.rand(1, 3)
    formula = lambda *args, out_shape=None, **kwargs: 7  # noqa: E731
    monkeypatch.setattr(operator_formulas, "DEFAULT_FORMULAS", {aten.linear: formula})
    monkeypatch.setattr(operator_formulas, "DECOMPOSITION_GUARDS", {aten.linear.default: formula}, raising=False)
    with torch.inference_mode():
        report = measure_flops(lambda: linear(x))
    assert report["by_operator"] == {"aten.linear": 7}


def test_paused_counter_neither_records_nor_counts():
    a = torch.rand(2, 2)
    for stock in (False, True):
        counter = OperatorCounter(stock=stock)
        with counter:
            a @ a
            counter.pause()
            a @ a, torch.sin(a)
            counter.resume()
            torch.cos(a)
        report = counter_report(counter)
        assert report["by_operator"]["aten.mm"] == 16
        assert "aten.sin" not in json.dumps(report) and "aten.cos" in json.dumps(report)


def test_counter_is_not_reentrant_and_leaves_no_mode():
    counter = OperatorCounter()
    depth = dispatch_depth()
    with counter:
        with pytest.raises(RuntimeError, match="one workload at a time"):
            counter.__enter__()
    assert dispatch_depth() == depth


def test_not_requested_placeholder():
    assert not_requested_flop_report() == {
        "schema_version": 1,
        "context": {"torch_version": str(torch.__version__), "method": "not_requested"},
        "total": {"status": "unavailable", "value": None, "known_value": None, "unit": "FLOPs", "scope": "workload", "method": "not_requested"},
        "by_module": {},
        "by_operator": {},
        "ignored_operators": {},
        "diagnostics": [],
    }


def test_repeated_measurements_are_identical_and_leak_nothing():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(2))
    x = torch.rand(1, 3, 8, 8)
    model(x)  # materialise the lazy layer
    reports = [measure_flops(lambda: model(x)) for _ in range(3)]
    assert reports[0] == reports[1] == reports[2]
    hooks = torch.nn.modules.module
    assert not hooks._global_forward_hooks and not hooks._global_forward_pre_hooks

"""The report contract: metric_result, IncompleteAnalysisError, vocabulary (docs/report-schema.md)."""

import json
import pickle

import pytest

from torchscan_lsp.contract.strict import StrictFailure
from torchscan_lsp.engine import report as report_module
from torchscan_lsp.engine.report import (
    METHODS,
    SCHEMA_VERSION,
    SCOPES,
    STATUSES,
    UNITS,
    IncompleteAnalysisError,
    make_diagnostic,
    metric_result,
)

COMMON = {"unit": "FLOPs", "scope": "forward", "method": "torchscan_module_formula"}


def test_schema_version_and_vocabulary():
    assert SCHEMA_VERSION == 1
    assert STATUSES == ("complete", "partial", "unavailable")
    assert set(UNITS) == {"calls", "FLOPs", "MACs", "DMAs", "elements", "bytes", "samples", "tokens"}
    assert set(SCOPES) == {"module_call", "forward", "model", "workload"}
    assert set(METHODS) == {
        "pytorch_hook",
        "forward_frame",
        "torchscan_module_formula",
        "pytorch",
        "torch.utils.flop_counter.FlopCounterMode+torchscan_lsp.operator_formulas",
        "torchscan_operator_macs",
        "not_requested",
    }


def test_complete_copies_value_to_known_value():
    result = metric_result(status="complete", value=12, known_value=3, **COMMON)
    assert result == {"status": "complete", "value": 12, "known_value": 12, **COMMON}
    assert list(result) == ["status", "value", "known_value", "unit", "scope", "method"]


def test_complete_zero_is_a_number_not_missing():
    assert metric_result(status="complete", value=0, **COMMON) == {
        "status": "complete",
        "value": 0,
        "known_value": 0,
        **COMMON,
    }


def test_partial_keeps_only_the_lower_bound():
    result = metric_result(status="partial", value=99, known_value=7, **COMMON)
    assert result["value"] is None
    assert result["known_value"] == 7


def test_unavailable_clears_both_numbers():
    result = metric_result(status="unavailable", value=5, known_value=5, **COMMON)
    assert result["value"] is None and result["known_value"] is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"status": "complete"}, "A complete metric requires a value."),
        ({"status": "partial"}, "A partial metric requires a known_value lower bound."),
        ({"status": "partial", "value": 3}, "A partial metric requires a known_value lower bound."),
    ],
)
def test_missing_numbers_are_rejected(kwargs, message):
    with pytest.raises(ValueError) as info:
        metric_result(**kwargs, **COMMON)
    assert str(info.value) == message


def test_unknown_status_is_rejected():
    with pytest.raises(ValueError) as info:
        metric_result(status="done", value=1, **COMMON)
    assert str(info.value).startswith("status must be 'complete', 'partial', or 'unavailable'.")


def test_arguments_are_keyword_only():
    with pytest.raises(TypeError):
        metric_result("complete", "FLOPs", "forward", "x", 1)  # type: ignore[misc]


def test_metric_results_are_json_safe():
    for status, extra in (("complete", {"value": 1.5}), ("partial", {"known_value": 2}), ("unavailable", {})):
        result = metric_result(status=status, **extra, **COMMON)
        assert json.loads(json.dumps(result)) == result


def test_diagnostic_shapes():
    module_diag = make_diagnostic("missing_metric_tensor", "macs", "text", path="")
    assert module_diag == {
        "code": "missing_metric_tensor",
        "severity": "warning",
        "metric": "macs",
        "path": "",
        "message": "text",
    }
    operator_diag = make_diagnostic("uncounted_operator", "flops", "text", operator="aten.sin")
    assert operator_diag["operator"] == "aten.sin" and "path" not in operator_diag


def _report(totals, diagnostics):
    return {"schema_version": 1, "totals": totals, "diagnostics": diagnostics}


def test_incomplete_error_names_each_failed_count_with_its_methods():
    failures = [StrictFailure("flops", "module_flops partial, operator_flops partial"), StrictFailure("dmas", "dmas unavailable")]
    report = _report({}, [])
    error = IncompleteAnalysisError(report, failures)
    assert isinstance(error, RuntimeError)
    assert error.report is report and error.failures == tuple(failures)
    assert str(error) == (
        "Analysis is incomplete for: flops (module_flops partial, operator_flops partial); dmas (dmas unavailable)."
    )


def test_incomplete_error_without_failures():
    assert str(IncompleteAnalysisError(_report({}, []))) == "Analysis is incomplete for: unknown counts."


def test_incomplete_error_survives_pickling_with_its_report_and_failures():
    report = _report({}, [make_diagnostic("uncounted_operator", "flops", "x", operator="aten.sin")])
    failures = (StrictFailure("flops", "module_flops partial, operator_flops partial"),)
    clone = pickle.loads(pickle.dumps(IncompleteAnalysisError(report, failures)))
    assert clone.report == report and clone.failures == failures
    assert str(clone) == "Analysis is incomplete for: flops (module_flops partial, operator_flops partial)."


def test_public_names():
    for name in ("MetricResult", "Diagnostic", "LayerReport", "AnalysisReport"):
        assert hasattr(report_module, name)
    import torchscan_lsp

    for name in ("crawl_module", "summary", "measure_flops", "compare_reports", "metric_result", "IncompleteAnalysisError"):
        assert getattr(torchscan_lsp, name) is getattr(__import__("torchscan_lsp.engine", fromlist=[name]), name)

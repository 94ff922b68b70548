"""Values read back from storage, checked against the contract's types (``contract/conformance.py``):
what is wrong is named by its place in the value, and a result that is not an analysis never
passes for one."""

from typing import Literal, TypedDict

import pytest

from torchscan_lsp.contract.conformance import result_problem, type_problem
from torchscan_lsp.contract.metrics import MetricResult

COMPLETE = {"status": "complete", "value": 224, "known_value": 224, "unit": "elements", "scope": "model",
            "method": "pytorch"}


class Point(TypedDict, total=False):
    x: int
    label: str | None


def test_json_values_against_hints():
    assert type_problem(COMPLETE, MetricResult) is None
    assert type_problem({**COMPLETE, "status": "done"}, MetricResult, "totals.parameters") == (
        "totals.parameters.status: expected one of ['complete', 'partial', 'unavailable'], got 'done'")
    missing = dict(COMPLETE)
    del missing["method"]
    assert type_problem(missing, MetricResult) == "the value: MetricResult without method"
    assert type_problem([1, 2, "3"], list[int], "ids") == "ids[2]: expected int, got str '3'"
    assert type_problem({"a": True}, dict[str, int]) == "a: expected int, got a boolean (True)"  # JSON keeps them apart
    assert type_problem(3, float) is None and type_problem(3.5, int) == "the value: expected int, got float 3.5"
    assert type_problem({"x": 1, "other": []}, Point) is None          # keys the type does not name are allowed
    assert type_problem({"label": 4}, Point, "p") == "p.label: expected str, got int 4"
    assert type_problem("b", Literal["a", "b"]) is None
    with pytest.raises(TypeError, match="cannot check"):
        type_problem(1, set[int])


def test_a_result_without_its_report_is_no_result():
    # issue 20: valid JSON that no analysis wrote
    assert result_problem({"ok": True}) == "the result has no report"
    assert result_problem({"ok": False}) == "ok: expected true, got a boolean (False)"
    assert result_problem([]) == "the result: expected an object, got a list"
    report = {"schema_version": 2, "context": {}, "inputs": {}, "layers": [], "operator_flops": {}, "totals": {},
              "diagnostics": []}
    assert result_problem({"ok": True, "report": report}) == "report.schema_version: expected 1, got int 2"
    report["schema_version"] = 1
    source_map = {"modules": [], "operators": [], "under": [], "outputs": [], "classes": [], "uncalled": [],
                  "parameters": []}
    whole = {"ok": True, "report": report, "source_map": source_map, "imported_files": ["net.py"],
             "library_stamps": {"/site/torch/__init__.py": 1}}
    assert result_problem(whole) is None
    assert result_problem({**whole, "imported_files": ["net.py", None]}) == (
        "imported_files[1]: expected str, got null")
    layer = {"path": "", "call_index": 0, "name": "Net", "depth": 0, "parent": None, "type": "Net", "input": {},
             "output": {}, "parameters": {}, "buffers": {}, "metrics": {"macs": {**COMPLETE, "value": None}}}
    assert result_problem({**whole, "report": {**report, "layers": [layer]}}) is None  # value: Any, as typed
    del layer["parent"]
    assert result_problem({**whole, "report": {**report, "layers": [layer]}}) == (
        "report.layers[0]: LayerReport without parent")

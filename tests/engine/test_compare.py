"""compare_reports (docs/report-schema.md)."""

import copy
import json
import re

import pytest
from torch import nn

from torchscan_lsp import compare_reports, crawl_module, measure_flops, measure_latency, measure_peak_memory, metric_result

FORMULA = {"scope": "forward", "method": "torchscan_module_formula"}


def minimal(totals=None, layers=None, version=1):
    return {"schema_version": version, "totals": totals or {}, "layers": layers or []}


def layer(path, call_index=0, **metrics):
    return {"path": path, "call_index": call_index, "metrics": metrics}


def flops(value, status="complete"):
    if status == "partial":
        return metric_result(status="partial", known_value=value, unit="FLOPs", **FORMULA)
    if status == "unavailable":
        return metric_result(status="unavailable", unit="FLOPs", **FORMULA)
    return metric_result(status="complete", value=value, unit="FLOPs", **FORMULA)


def test_conv_width_change_example():
    before = crawl_module(nn.Conv2d(3, 8, 3), (3, 32, 32))
    after = crawl_module(nn.Conv2d(3, 12, 3), (3, 32, 32))
    diff = compare_reports(before, after)
    assert diff["schema_version"] == 1
    assert list(diff["totals"]) == [
        "buffer_bytes", "buffer_elements", "dmas", "frozen_parameters", "macs", "module_flops",
        "operator_flops", "operator_macs", "parameter_bytes", "parameters", "trainable_parameters",
    ]
    assert diff["totals"]["parameters"]["status"] == "complete" and diff["totals"]["parameters"]["delta"] == 112
    assert diff["totals"]["module_flops"] == {
        "status": "complete",
        "delta": 194400,
        "before": {"status": "complete", "value": 388800, "known_value": 388800, "unit": "FLOPs", **FORMULA},
        "after": {"status": "complete", "value": 583200, "known_value": 583200, "unit": "FLOPs", **FORMULA},
    }
    assert diff["layers"]["added"] == [] and diff["layers"]["removed"] == []
    (changed,) = diff["layers"]["changed"]
    assert changed["path"] == "" and set(changed["metrics"]) == {"dmas", "macs", "module_flops", "operator_flops", "operator_macs"}
    assert json.loads(json.dumps(diff)) == diff


def test_layer_level_example():
    before = crawl_module(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), (4,))
    after = crawl_module(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), (4,))
    diff = compare_reports(before, after)
    (added,) = diff["layers"]["added"]
    assert added["path"] == "2" and added["call_index"] == 0
    assert added["metrics"] == after["layers"][3]["metrics"]
    values = {name: added["metrics"][name]["value"] for name in ("module_flops", "macs", "dmas")}
    assert values == {"module_flops": 32, "macs": 16, "dmas": 28}
    assert [added["metrics"][n]["value"] for n in ("receptive_field", "effective_stride", "effective_padding")] == [1.0, 1.0, 0.0]
    assert diff["layers"]["removed"] == []
    changed = {entry["path"]: entry["metrics"] for entry in diff["layers"]["changed"]}
    assert list(changed) == ["", "0", "1"]  # the root's inclusive operator counts changed too
    assert list(changed["0"]) == ["dmas", "macs", "module_flops", "operator_flops", "operator_macs"]
    # Linear(4, 4) -> Linear(4, 8) on (1, 4): aten.addmm 2*4*4 = 32 -> 2*4*8 = 64 FLOPs, 16 -> 32 MACs
    assert {name: changed["0"][name]["delta"] for name in changed["0"]} == {
        "dmas": 24, "macs": 16, "module_flops": 32, "operator_flops": 32, "operator_macs": 16,
    }  # fmt: skip
    assert changed["0"]["dmas"]["before"]["value"] == 28 and changed["0"]["dmas"]["after"]["value"] == 52
    # the operator total is partial exactly when one side is
    operator = diff["totals"]["operator_flops"]
    sides = {before["totals"]["operator_flops"]["status"], after["totals"]["operator_flops"]["status"]}
    assert operator["status"] == ("partial" if "partial" in sides else "complete")
    assert (operator["delta"] is None) == (operator["status"] != "complete")


def test_comparing_a_report_with_itself():
    class Unsup(nn.Module):
        def forward(self, x):
            return x * 2

    report = crawl_module(nn.Sequential(nn.Linear(4, 4), Unsup()), (4,))
    diff = compare_reports(report, report)
    assert diff["layers"] == {"added": [], "removed": [], "changed": []}
    for name, entry in diff["totals"].items():
        if report["totals"][name]["status"] == "complete":
            assert entry["delta"] == 0 and entry["status"] == "complete", name
        else:
            assert entry["delta"] is None and entry["status"] != "complete", name
    assert diff["totals"]["module_flops"]["status"] == "partial"


def test_statuses_and_missing_sides():
    before = minimal({"a": flops(1), "b": flops(2, "partial"), "c": flops(3), "d": flops(4)})
    after = minimal({"a": flops(5), "b": flops(2), "c": flops(0, "unavailable"), "e": flops(1)})
    totals = compare_reports(before, after)["totals"]
    assert [(name, entry["status"], entry["delta"]) for name, entry in totals.items()] == [
        ("a", "complete", 4),
        ("b", "partial", None),
        ("c", "unavailable", None),
        ("d", "unavailable", None),
        ("e", "unavailable", None),
    ]
    assert totals["d"]["after"] is None and totals["e"]["before"] is None


def test_added_removed_changed_are_sorted_by_path_and_call():
    before = minimal(layers=[layer("b", module_flops=flops(1)), layer("a", 1, module_flops=flops(1)), layer("x")])
    after = minimal(layers=[layer("a", 1, module_flops=flops(2)), layer("a", 0), layer("b", module_flops=flops(1)), layer("c")])
    diff = compare_reports(before, after)["layers"]
    assert [(e["path"], e["call_index"]) for e in diff["added"]] == [("a", 0), ("c", 0)]
    assert [(e["path"], e["call_index"]) for e in diff["removed"]] == [("x", 0)]
    assert [(e["path"], e["call_index"], list(e["metrics"])) for e in diff["changed"]] == [("a", 1, ["module_flops"])]


def test_inputs_are_never_mutated_and_results_are_copies():
    before = minimal({"a": flops(1)}, [layer("p", module_flops=flops(1))])
    after = minimal({"a": flops(2)}, [layer("q", module_flops=flops(1))])
    snapshot = copy.deepcopy((before, after))
    diff = compare_reports(before, after)
    assert (before, after) == snapshot
    diff["totals"]["a"]["before"]["value"] = 99
    diff["layers"]["added"][0]["metrics"]["module_flops"]["value"] = 99
    assert (before, after) == snapshot


@pytest.mark.parametrize(
    ("before", "after", "message"),
    [
        (minimal(version=1), minimal(version=2), "schema versions differ: 1 != 2"),
        (minimal(version=2), minimal(version=2), "unsupported schema version: 2"),
        (minimal(layers=[layer("block"), layer("block")]), minimal(), "before contains duplicate layer call ('block', 0)"),
        (minimal(), minimal(layers=[layer("block"), layer("block")]), "after contains duplicate layer call ('block', 0)"),
        (minimal({"a": flops(1)}), minimal({"a": {**flops(1), "unit": "MACs"}}), "metric 'a' has incompatible unit"),
        (minimal({"a": flops(1)}), minimal({"a": {**flops(1), "scope": "workload"}}), "metric 'a' has incompatible scope"),
        (minimal({"a": flops(1)}), minimal({"a": {**flops(1), "method": "x"}}), "metric 'a' has incompatible method"),
        (
            minimal(layers=[layer("p", m=flops(1))]),
            minimal(layers=[layer("p", m={**flops(2), "unit": "MACs"})]),
            "metric 'm' has incompatible unit",
        ),
    ],
)
def test_incompatible_reports_are_refused(before, after, message):
    with pytest.raises(ValueError) as info:
        compare_reports(before, after)
    assert str(info.value).startswith(message)


def test_structure_and_full_reports_do_not_compare():
    model = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="incompatible method"):
        compare_reports(crawl_module(model, (2,), mode="structure"), crawl_module(model, (2,)))


@pytest.mark.parametrize(("before", "after", "name"), [(minimal(), "x", "after"), (None, minimal(), "before")])
def test_a_report_that_is_not_a_dict_is_a_type_error_naming_the_argument(before, after, name):
    with pytest.raises(TypeError, match=f"argument '{name}' must be an analysis report"):
        compare_reports(before, after)


def _latency_report():
    return measure_latency(lambda: None, device="cpu", min_run_time=0.001)


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (_latency_report, "is a latency report from measure_latency; compare latency reports with compare_benchmarks"),
        (lambda: measure_peak_memory(lambda: None, device="cpu"), "is a peak-memory report from measure_peak_memory"),
        (lambda: measure_flops(lambda: None), "is a FLOP report from measure_flops"),
        (lambda: {"schema_version": 1, "kind": "layer_latency", "layers": [], "totals": {}}, "is a per-layer latency report"),
    ],
    ids=["latency", "memory", "flops", "layer_latency"],
)
def test_reports_of_other_kinds_are_refused_by_name(make, says):
    analysis = crawl_module(nn.Linear(2, 2), (2,))
    other = make()
    with pytest.raises(ValueError, match=f"argument 'after' {re.escape(says)}"):
        compare_reports(analysis, other)
    with pytest.raises(ValueError, match="argument 'before'"):
        compare_reports(other, analysis)


def test_differing_torch_and_package_versions_are_flagged():
    report = crawl_module(nn.Linear(2, 2), (2,))
    assert compare_reports(report, report)["mismatches"] == []
    older = copy.deepcopy(report)
    older["context"].update(torch_version="2.12.0+cpu", torchscan_version="0.0.9")
    assert compare_reports(older, report)["mismatches"] == [
        {"field": "torch_version", "before": "2.12.0+cpu", "after": report["context"]["torch_version"]},
        {"field": "torchscan_version", "before": "0.0.9", "after": report["context"]["torchscan_version"]},
    ]
    assert compare_reports(minimal(), minimal())["mismatches"] == []  # no context: nothing to flag

"""A module line's totals follow the one status rule: its subtree holding work no formula counted
(a residual add in a block's own forward) makes them lower bounds, as the engine's totals are."""

from torchscan_lsp.session.results import ResultView


def _flops(value, unit="FLOPs"):
    return {"status": "complete", "value": value, "known_value": value, "unit": unit, "scope": "module_call",
            "method": "torchscan_module_formula"}


def _layer(path, metrics, trainable=0):
    return {"path": path, "call_index": 0, "type": "M", "parameters": {"trainable": trainable, "frozen": 0, "bytes": 0},
            "buffers": {"elements": 0}, "metrics": metrics}


def test_block_with_a_residual_add_is_partial_and_keeps_its_method():
    report = {
        "layers": [
            _layer("", {}),
            _layer("block", {}),
            _layer("block.fc", {"module_flops": _flops(100), "macs": _flops(48, "MACs"), "dmas": _flops(60, "DMAs")}, 52),
            _layer("head", {"module_flops": _flops(20), "macs": _flops(10, "MACs"), "dmas": _flops(30, "DMAs")}, 11),
        ],
        "totals": {},
        "diagnostics": [
            # block's own forward ran aten.add: module_flops and dmas did not count it (no MACs)
            {"code": "container_work", "severity": "warning", "metric": "module_flops", "path": "block", "message": "…"},
            {"code": "container_work", "severity": "warning", "metric": "dmas", "path": "block", "message": "…"},
        ],
    }
    view = ResultView({"ok": True, "report": report, "source_map": {}})
    block = view.module_summary(["block"])
    assert (block["module_flops"]["status"], block["module_flops"]["known_value"]) == ("partial", 100)
    assert block["module_flops"]["method"] == "torchscan_module_formula"
    assert (block["macs"]["status"], block["macs"]["value"]) == ("complete", 48)   # the add has no MACs
    assert block["dmas"]["status"] == "partial"
    assert block["parameters"] == 52
    head = view.module_summary(["head"])
    assert head["module_flops"]["status"] == "complete" and head["module_flops"]["value"] == 20
    # both: 100 + 20 = 120 known, partial because of the block
    both = view.module_summary(["block", "head"])
    assert (both["module_flops"]["status"], both["module_flops"]["known_value"]) == ("partial", 120)

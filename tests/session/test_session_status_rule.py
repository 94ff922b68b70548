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


def _ops(value, status="complete"):
    return {"status": status, "value": value if status == "complete" else None, "known_value": value, "unit": "FLOPs",
            "scope": "module_call", "method": "torch.utils.flop_counter.FlopCounterMode"}


def test_dispatched_counts_are_summed_over_the_outermost_calls_only():
    # Each call's operator count includes its children's and its own forward's work: block (130) =
    # block.fc (100) + its own residual add (30). Summing block and block.fc would count fc twice.
    report = {
        "layers": [
            _layer("", {"operator_flops": _ops(150)}),
            _layer("block", {"operator_flops": _ops(130)}),
            _layer("block.fc", {"operator_flops": _ops(100)}),
            _layer("heads.a", {"operator_flops": _ops(10)}),
            _layer("heads.b", {"operator_flops": _ops(10, "partial")}),   # ran an operator without a formula
        ],
        "totals": {}, "diagnostics": [],
    }
    view = ResultView({"ok": True, "report": report,
                       "source_map": {"uncalled": [{"path": "heads", "type": "ModuleDict", "defined_at": None}]}})
    assert view.module_summary(["block"])["operator_flops"]["value"] == 130
    assert view.module_summary(["block", "block.fc"])["operator_flops"]["value"] == 130
    # a container never called itself: its called children, 10 + ≥ 10, a lower bound
    heads = view.module_summary(["heads"])["operator_flops"]
    assert (heads["status"], heads["known_value"]) == ("partial", 20)
    # the partial child makes precisely the calls above it partial, not its siblings
    assert view.module_summary(["heads.a"])["operator_flops"]["status"] == "complete"
    assert view.module_summary([""])["operator_flops"]["value"] == 150
    # a call without the metric (structure mode) is an unknown part, never a silent 0
    report["layers"][2]["metrics"] = {}
    assert ResultView({"ok": True, "report": report, "source_map": {}}).module_summary(["block.fc"])["operator_flops"][
        "status"] == "unavailable"


def _module(layer, line, library=False):
    site = {"file": "net.py", "line": line}
    return {"layer": layer, "defined_at": site, "called_at": None,
            "library_defined_at": [{"file": "/site/lib/model.py", "line": 7}] if library else []}


def test_a_line_that_built_a_library_model_stands_for_the_model():
    # model = LibModel(config) on line 3 (its children built inside the library), returned on line 4
    layers = [_layer("", {}), _layer("body", {}), _layer("body.fc", {}), _layer("head", {})]
    view = ResultView({"ok": True, "report": {"layers": layers, "totals": {}, "diagnostics": []}, "source_map": {
        "modules": [_module(0, 4), _module(1, 3, True), _module(2, 3, True), _module(3, 3, True)]}})
    assert view.line_modules(view.line("net.py", 3).defined) == [""]
    assert view.children("") == ["body", "head"] and view.children("body") == ["body.fc"]
    # the same children built by workspace code on one line (no library line): the outermost of them
    view = ResultView({"ok": True, "report": {"layers": layers, "totals": {}, "diagnostics": []}, "source_map": {
        "modules": [_module(0, 4), _module(1, 3), _module(2, 3), _module(3, 3)]}})
    assert view.line_modules(view.line("net.py", 3).defined) == ["body", "head"]

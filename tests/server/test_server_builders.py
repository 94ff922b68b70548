"""Inlay hints, hovers, code lenses and diagnostics built from a hand-written worker result.

The model the result describes (file ``net.py``)::

    1  import torch.nn as nn
    2
    3  # torchscan: input_shape=(3, 32, 32)
    4  class Net(nn.Module):
    5      def __init__(self):
    6          super().__init__()
    7          self.conv = nn.Conv2d(3, 8, 3)
    8          self.heads = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])
    9          self.odd = Odd()
    10     def forward(self, x):
    11         x = self.conv(x).mean((2, 3))
    12         for head in self.heads:
    13             x = head(x)
    14         return self.odd(x)

Numbers, derived by hand:
- Conv2d(3, 8, 3) on (1, 3, 32, 32): output (1, 8, 30, 30), 7200 elements; parameters
  8·3·3·3 + 8 = 224; FLOPs per output 2·27 − 1 + 1 (bias) = 54 → 388,800; MACs 7200·27 = 194,400.
- Linear(8, 8) on (1, 8): parameters 64 + 8 = 72; FLOPs 8·1·(2·8 − 1) + 8 = 128; MACs 8·8 = 64.
  Two instances built on line 8: 144 parameters, 256 FLOPs, 128 MACs.
- Odd: no module formula, FLOPs/MACs partial with known 0 (one diagnostic per metric); it computes
  ``x * 2``: the dispatcher counts 8 multiplies, 0 MACs.
Module-formula totals: parameters 224 + 144 = 368; MACs ≥ 194,400 + 128 = 194,528 (partial: Odd);
module FLOPs ≥ 388,800 + 256 = 389,056 (partial).

Dispatched operators (PyTorch's convention: a product of K terms is 2·K FLOPs, a convolution's bias
is not counted): the convolution 2·194,400 = 388,800 FLOPs and 194,400 MACs; each Linear's addmm
2·8·8 = 128 FLOPs, 64 MACs; Odd's mul 8 FLOPs. Line 11's ``mean`` (in the root's own forward) has
no formula here: the root's counts and the totals are lower bounds, ≥ 388,800 + 256 + 8 = 389,064
FLOPs and ≥ 194,400 + 128 = 194,528 MACs.
"""

import copy

from lsprotocol import types

from torchscan_lsp.server.code_lens import build_code_lenses
from torchscan_lsp.server.diagnostics import build_diagnostics
from torchscan_lsp.server.hover import build_hover
from torchscan_lsp.server.inlay_hints import build_inlay_hints, module_label
from torchscan_lsp.server.positions import Lines
from torchscan_lsp.session.results import ResultView, outermost
from torchscan_lsp.session.settings import InlayHintSettings
from torchscan_lsp.session.state import TargetKey, TargetState

SOURCE = """import torch.nn as nn

# torchscan: input_shape=(3, 32, 32)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.heads = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])
        self.odd = Odd()
    def forward(self, x):
        x = self.conv(x).mean((2, 3))
        for head in self.heads:
            x = head(x)
        return self.odd(x)
"""


def _m(status, value, unit):
    if status == "complete":
        return {"status": status, "value": value, "known_value": value, "unit": unit, "scope": "module_call",
                "method": "torchscan_module_formula"}
    return {"status": status, "value": None, "known_value": value, "unit": unit, "scope": "module_call",
            "method": "torchscan_module_formula"}


def _t(shape):
    return {"kind": "tensor", "shape": shape, "dtype": "torch.float32", "device": "cpu", "requires_grad": False}


def _ops(status, flops, macs):
    return {"operator_flops": {**_m(status, flops, "FLOPs"), "method": "torch.utils.flop_counter.FlopCounterMode"},
            "operator_macs": {**_m(status, macs, "MACs"), "method": "torchscan_operator_macs"}}


def _layer(path, type_, out, params, flops=None, macs=None, status="complete", inp=None, ops=None):
    metrics = {"calls": _m("complete", 1, "calls")}
    if flops is not None:
        metrics["module_flops"] = _m(status, flops, "FLOPs")
        metrics["macs"] = _m(status, macs, "MACs")
    metrics.update(ops or _ops("complete", flops, macs))
    return {"path": path, "call_index": 0, "name": path.split(".")[-1] or "net", "depth": 0 if not path else path.count(".") + 1,
            "type": type_, "input": {"args": [inp or _t([1, 8])], "kwargs": {}}, "output": out,
            "parameters": {"trainable": params, "frozen": 0, "bytes": 4 * params, "shared": False},
            "buffers": {"elements": 0, "bytes": 0, "shared": False}, "metrics": metrics}


def _total(status, value, unit):
    metric = _m(status, value, unit)
    metric["scope"] = "forward"
    return metric


RESULT = {
    "ok": True,
    "target": "Net",
    "report": {
        "layers": [
            _layer("", "Net", _t([1, 8]), 0, ops=_ops("partial", 389_064, 194_528)),
            _layer("conv", "Conv2d", _t([1, 8, 30, 30]), 224, 388_800, 194_400, inp=_t([1, 3, 32, 32])),
            _layer("heads.0", "Linear", _t([1, 8]), 72, 128, 64),
            _layer("heads.1", "Linear", _t([1, 8]), 72, 128, 64),
            _layer("odd", "Odd", _t([1, 8]), 0, 0, 0, status="partial", ops=_ops("complete", 8, 0)),
        ],
        "totals": {
            "parameters": {"status": "complete", "value": 368, "known_value": 368, "unit": "elements",
                           "scope": "model", "method": "pytorch"},
            "module_flops": _total("partial", 389_056, "FLOPs"),
            "macs": _total("partial", 194_528, "MACs"),
            "operator_flops": {**_total("partial", 389_064, "FLOPs"), "scope": "workload",
                               "method": "torch.utils.flop_counter.FlopCounterMode"},
            "operator_macs": {**_total("partial", 194_528, "MACs"), "scope": "workload", "method": "torchscan_operator_macs"},
        },
        "diagnostics": [
            {"code": "unsupported_module_metric", "severity": "warning", "metric": "module_flops", "path": "odd",
             "message": "Module type not supported: Odd"},
            {"code": "unsupported_module_metric", "severity": "warning", "metric": "macs", "path": "odd",
             "message": "Module type not supported: Odd"},
            {"code": "uncounted_operator", "severity": "warning", "metric": "flops", "operator": "aten.mean",
             "message": "aten.mean was observed 1 time(s), but no FLOP formula is registered."},
        ],
    },
    "source_map": {
        "modules": [
            {"path": "", "call_index": 0, "type": "Net", "defined_at": None, "called_at": None},
            {"path": "conv", "call_index": 0, "type": "Conv2d", "defined_at": {"file": "net.py", "line": 7},
             "called_at": {"file": "net.py", "line": 11}},
            {"path": "heads.0", "call_index": 0, "type": "Linear", "defined_at": {"file": "net.py", "line": 8},
             "called_at": {"file": "net.py", "line": 13}},
            {"path": "heads.1", "call_index": 0, "type": "Linear", "defined_at": {"file": "net.py", "line": 8},
             "called_at": {"file": "net.py", "line": 13}},
            {"path": "odd", "call_index": 0, "type": "Odd", "defined_at": {"file": "net.py", "line": 9},
             "called_at": {"file": "net.py", "line": 14}},
        ],
        "operators": [{"file": "net.py", "line": 11, "operator": "aten.mean", "calls": 1, "flops": None, "layer": 0}],
    },
    "imported_files": ["net.py"],
}


RESULT["report"]["layers"][0]["uncounted_operators"] = {"flops": {"aten.mean": 1}, "macs": {"aten.mean": 1}}


class _Target:
    name, line, column, annotation_line, options = "Net", 4, 0, 3, {}


def _state(**changes):
    state = TargetState(key=TargetKey("/ws", "net.py", "Net"), target=_Target(), view=ResultView(copy.deepcopy(RESULT)))
    for name, value in changes.items():
        setattr(state, name, value)
    return state


def _labels(hints):
    return {(h.position.line + 1, h.label) for h in hints}


def test_inlay_hints_exact_labels():
    hints = build_inlay_hints("net.py", Lines(SOURCE), [_state()], InlayHintSettings())
    assert _labels(hints) == {
        (4, "368 params · ≥ 195 kMACs · ≥ 389 kFLOPs"),   # totals, partial → lower bounds
        (7, "224 params · 389 kFLOPs"),                     # Conv2d
        (8, "×2 · 144 params · 256 FLOPs"),                 # two Linear(8, 8) from one line
        (9, "0 params · 8 FLOPs"),                          # no formula, but the dispatcher counted its mul
        (11, "→ (1, 8, 30, 30)"),
        (13, "→ (1, 8)"),
        (14, "→ (1, 8)"),
    }
    # the module formulas on request: Odd's count is then a lower bound, not a zero
    modules = _labels(build_inlay_hints("net.py", Lines(SOURCE), [_state()], InlayHintSettings(), headline="modules"))
    assert (9, "0 params · ≥ 0 FLOPs") in modules and (7, "224 params · 389 kFLOPs") in modules
    assert (4, "368 params · ≥ 195 kMACs · ≥ 389 kFLOPs") in modules
    # hints sit at the end of their line, in UTF-16 units
    conv = next(h for h in hints if h.position.line == 6)
    assert conv.position.character == len("        self.conv = nn.Conv2d(3, 8, 3)")


def test_inlay_hint_kinds_can_be_switched_off():
    hints = build_inlay_hints("net.py", Lines(SOURCE), [_state()], InlayHintSettings(modules=False, shapes=False))
    assert _labels(hints) == {(4, "368 params · ≥ 195 kMACs · ≥ 389 kFLOPs")}


def test_stale_hints_keep_labels_and_say_so():
    hints = build_inlay_hints("net.py", Lines(SOURCE), [_state(stale=True)], InlayHintSettings())
    assert all("Stale" in h.tooltip.value for h in hints)
    # the label itself says so (editors show labels, tooltips only on demand), kept short
    assert (7, "224 params · 389 kFLOPs (stale)") in _labels(hints)
    assert all(h.label.endswith(" (stale)") for h in hints)


def test_utf16_columns():
    source = SOURCE.replace("self.conv = nn.Conv2d(3, 8, 3)", "self.conv = nn.Conv2d(3, 8, 3)  # 𝛼")
    hints = build_inlay_hints("net.py", Lines(source), [_state()], InlayHintSettings())
    conv = next(h for h in hints if h.position.line == 6)
    # "𝛼" lies beyond the BMP: one code point, two UTF-16 code units
    assert conv.position.character == len("        self.conv = nn.Conv2d(3, 8, 3)  # ") + 2


def test_diagnostics():
    # the shown numbers are the dispatched operators': Odd's missing formula is hover detail
    found = build_diagnostics("net.py", Lines(SOURCE), [], [_state()])
    by_line = {(d.range.start.line + 1, d.severity) for d in found}
    assert by_line == {
        (11, types.DiagnosticSeverity.Warning),      # aten.mean ran on line 11 without a formula
        (4, types.DiagnosticSeverity.Information),   # partial totals on the target line
    }
    mean = next(d for d in found if d.range.start.line == 10)
    # how much is known: the totals' lower bounds (194,528 MACs, 389,064 FLOPs)
    assert mean.message.startswith("aten.mean has no FLOP formula (1 call, in the root module)")
    assert "Net: ≥ 195 kMACs · ≥ 389 kFLOPs known" in mean.message
    assert mean.range.start.character == 8  # from the first non-blank character
    note = next(d for d in found if d.range.start.line == 3)
    assert "aten.mean (1 call), without a FLOP formula" in note.message and "net.py:11" in note.message


def test_diagnostics_of_the_module_formulas_when_they_are_shown():
    found = build_diagnostics("net.py", Lines(SOURCE), [], [_state()], headline="modules")
    assert {(d.range.start.line + 1, d.severity) for d in found} == {
        (9, types.DiagnosticSeverity.Warning),       # Odd's FLOPs and MACs, one diagnostic
        (4, types.DiagnosticSeverity.Information),
    }
    odd = next(d for d in found if d.range.start.line == 8)
    assert odd.message.startswith("Module type not supported: Odd (`odd`): its module FLOPs and MACs are not counted")


def test_failure_diagnostic_at_raising_line_and_target():
    failure = {"ok": False, "target": "Net", "error": {"kind": "forward", "type": "RuntimeError",
                                                        "message": "shape mismatch", "file": "net.py", "line": 13}}
    found = build_diagnostics("net.py", Lines(SOURCE), [], [_state(error=failure, stale=True)])
    errors = sorted(d.range.start.line + 1 for d in found if d.severity == types.DiagnosticSeverity.Error)
    assert errors == [4, 13]
    assert all("RuntimeError: shape mismatch" in d.message for d in found)


def test_a_plan_option_the_inputs_contradict_is_an_error_at_the_annotation_without_a_type():
    # the plan job's options error (a sequence naming no input), at the pragma (line 3); a model's
    # error in a measurement stays on the target line with its type
    option = {"error": {"kind": "options", "type": "OptionError", "message": "plan option 'sequence': 'idx:1' names "
                        "no tensor input of the step", "file": "net.py", "line": 3}, "requested": True}
    model = {"error": {"kind": "forward", "type": "RuntimeError", "message": "boom", "file": "net.py", "line": 4},
             "requested": True}
    for measured, line, message in ((option, 3, "Net: the training plan failed: plan option 'sequence': 'idx:1'"),
                                    (model, 4, "Net: the training plan failed: RuntimeError: boom")):
        found = [d for d in build_diagnostics("net.py", Lines(SOURCE), [], [_state(measurements={"plan": measured})])
                 if d.code == "plan-failed"]
        assert [(d.range.start.line + 1, d.severity) for d in found] == [(line, types.DiagnosticSeverity.Error)]
        assert found[0].message.startswith(message)


def test_a_line_that_built_modules_of_different_types_counts_modules_not_copies():
    # conv (Conv2d(3, 8, 3): 224 params, 388,800 FLOPs) and heads.0 (Linear(8, 8): 72 params,
    # 8·(2·8 − 1) + 8 = 128 FLOPs): 296 params, 388,928 FLOPs ≈ 389 kFLOPs, two different types
    label, _ = module_label(ResultView(copy.deepcopy(RESULT)), ["conv", "heads.0"])
    assert label == "2 modules · 296 params · 389 kFLOPs"


def test_wrong_return_value_is_reported_on_the_target_with_the_returning_line():
    # the factory returned an int: nothing raised, so the error on the target (line 4 of SOURCE) says
    # what was returned and where, "returned at", not "raised at"
    failure = {"ok": False, "target": "Net", "error": {
        "kind": "result", "type": "TypeError", "file": "other.py", "line": 2,
        "message": "'Net' returned an int (3), not an nn.Module"}}
    (found,) = build_diagnostics("net.py", Lines(SOURCE), [], [_state(error=failure, view=None)])
    assert found.range.start.line + 1 == 4
    assert "did not return a model" in found.message and "raised at" not in found.message
    assert found.message.endswith("(returned at other.py:2)")


def test_strict_failure_says_strict_mode_refused():
    failure = {"ok": False, "target": "Net", "error": {
        "kind": "strict", "type": "IncompleteAnalysisError", "file": None, "line": None,
        "message": "analysis is incomplete: container_work in 'block' (aten.relu ×1)"}}
    (found,) = build_diagnostics("net.py", Lines(SOURCE), [], [_state(error=failure, view=None)])
    assert "strict" in found.message and "aten.relu" in found.message


def test_untrusted_information():
    found = build_diagnostics("net.py", Lines(SOURCE), [], [_state(view=None, untrusted=True)])
    assert [(d.range.start.line + 1, d.severity) for d in found] == [(4, types.DiagnosticSeverity.Information)]
    assert "torchscan.allowExecution" in found[0].message
    # an unknown client: the setting, and the names the shipped Neovim and Emacs set-ups give it
    assert "Neovim plugin: allow_execution = true; Emacs: torchscan-allow-execution" in found[0].message
    for client, words in (("Neovim", "set allow_execution = true in require('torchscan').setup{...}"),
                          ("Eglot", "set the variable torchscan-allow-execution to t"),
                          ("emacs", "set the variable torchscan-allow-execution to t")):
        (told,) = build_diagnostics("net.py", Lines(SOURCE), [], [_state(view=None, untrusted=True)], client=client)
        assert words in told.message and "torchscan.allowExecution" in told.message
        assert words in build_hover("net.py", 4, [_state(view=None, untrusted=True)], client=client)
    # VS Code ignores the setting in an untrusted workspace: its users are told to trust it instead
    (told,) = build_diagnostics("net.py", Lines(SOURCE), [], [_state(view=None, untrusted=True)], client="vscode")
    assert "Trust the workspace: click Restricted Mode in the status bar, or run Workspaces: Manage Workspace Trust" in told.message
    assert "set torchscan.allowExecution" not in told.message


def test_hover_cards():
    state = _state()
    target = build_hover("net.py", 4, [state])
    assert "Parameters: 368" in target
    # both methods in one table, the headline first, each named
    assert "| **dispatched operators** (shown) | ≥ 389 kFLOPs | ≥ 195 kMACs | — |" in target
    assert "| module formulas | ≥ 389 kFLOPs | ≥ 195 kMACs | ? DMAs |" in target
    assert ("_Methods: dispatched operators: `torch.utils.flop_counter.FlopCounterMode`, `torchscan_operator_macs`; "
            "module formulas: `torchscan_module_formula`._") in target
    # where they differ, and why: each misses what the other counted
    assert "Module formulas miss modules without a formula: Odd" in target
    assert "Dispatched operators miss aten.mean (1 call), without a FLOP formula." in target
    assert "| `conv` | Conv2d | 389 kFLOPs | (1, 8, 30, 30) |" in target   # top module first
    odd = build_hover("net.py", 9, [state])
    assert "| **dispatched operators** (shown) | 8 FLOPs | 0 MACs |" in odd and "| module formulas | ≥ 0 FLOPs | ≥ 0 MACs |" in odd
    assert "Module formulas miss modules without a formula: Odd: the dispatched operators count it." in odd
    assert "complete" not in odd   # no status word contradicts the table
    heads = build_hover("net.py", 8, [state])
    assert "Linear ×2" in heads and "`heads.0`, `heads.1`" in heads
    assert "Parameters: 144 (144 trainable, 0 frozen, 576 B)" in heads   # 144 · 4 bytes
    line11 = build_hover("net.py", 11, [state])
    assert "| aten.mean | 1 | not counted |" in line11
    assert build_hover("net.py", 2, [state]) is None


def test_code_lenses():
    lenses = build_code_lenses("file:///ws/net.py", Lines(SOURCE), [_state()])
    assert [lens.command.title for lens in lenses] == [
        "368 params · ≥ 195 kMACs · ≥ 389 kFLOPs", "Re-analyse", "Show report", "Measure latency", "Measure memory",
        "Measure training step", "Plan training"]
    assert {lens.range.start.line for lens in lenses} == {3}
    assert lenses[1].command.command == "torchscan.reanalyze" and lenses[1].command.arguments == ["file:///ws/net.py", "Net"]


def test_untrusted_target_gets_the_summary_lens_only():
    # the other four lenses would run the workspace's code, which an untrusted workspace refuses
    lenses = build_code_lenses("file:///ws/net.py", Lines(SOURCE), [_state(view=None, untrusted=True)])
    assert [lens.command.title for lens in lenses] == ["torchscan: not analysed (untrusted workspace)"]


def test_memory_lens_after_measuring():
    # 3 MiB above a 1 MiB baseline: peak 4 MiB, delta 3 MiB = 3,145,728 bytes
    memory = {"device": "cpu", "metric": "pytorch_tensor_bytes", "baseline_bytes": 1 << 20,
              "peak_bytes": 4 << 20, "delta_bytes": 3 << 20}
    lens = build_code_lenses("file:///ws/net.py", Lines(SOURCE), [_state(measurements={"memory": memory})])[0]
    assert lens.command.title == "368 params · ≥ 195 kMACs · ≥ 389 kFLOPs · peak memory +3.00 MiB"


def _seconds(value):
    return {"status": "complete", "value": value, "known_value": value, "unit": "seconds", "scope": "module_call",
            "method": "torch.utils.benchmark.Timer"}


def test_latency_hints_and_lens_after_measuring():
    measured = {"layer_latency": {
        "layers": [{"path": "heads.0", "call_index": 0, "metrics": {"latency": _seconds(0.0002)}},
                   {"path": "heads.1", "call_index": 0, "metrics": {"latency": _seconds(0.0003)}}],
        "totals": {"model_latency": _seconds(0.0021)}}}
    state = _state(measurements=measured)
    hints = build_inlay_hints("net.py", Lines(SOURCE), [state], InlayHintSettings(latency=True))
    # line 8 built heads.0 and heads.1: 0.2 ms + 0.3 ms = 500 µs
    assert (8, "500 µs") in _labels(hints)
    assert not [h for h in hints if h.position.line + 1 == 7 and h.label.endswith("s") and "params" not in h.label]
    lens = build_code_lenses("file:///ws/net.py", Lines(SOURCE), [state])[0]
    assert lens.command.title == "368 params · ≥ 195 kMACs · ≥ 389 kFLOPs · 2.10 ms"
    # off by default
    assert (8, "500 µs") not in _labels(build_inlay_hints("net.py", Lines(SOURCE), [state], InlayHintSettings()))


def test_module_hover_shows_latency_median_spread_and_share():
    def share(value):
        return {**_seconds(value), "unit": "fraction of model latency"}

    measured = {"layer_latency": {
        "layers": [{"path": "heads.0", "call_index": 0, "stable": True, "relative_spread": 0.05,
                    "metrics": {"latency": _seconds(0.0002), "latency_iqr": _seconds(0.00001), "latency_share": share(0.2)}},
                   {"path": "heads.1", "call_index": 0, "stable": False, "relative_spread": 0.4,
                    "metrics": {"latency": _seconds(0.0003), "latency_iqr": _seconds(0.00012), "latency_share": share(0.3)}}],
        "totals": {"model_latency": _seconds(0.001), "model_latency_iqr": _seconds(0.00002)},
        "consistency": {"layer_sum_over_model": 0.5, "tolerance": 1.5, "within_tolerance": True}}}
    card = build_hover("net.py", 8, [_state(measurements=measured)])  # the line that built heads.0 and heads.1
    assert "**Latency** (each call replayed alone; model 1.00 ms, IQR 20.0 µs)" in card
    assert "| `heads.0` | 200 µs | 10.0 µs | 20.0% |  |" in card
    assert "| `heads.1` | 300 µs | 120 µs | 30.0% | unstable: spread 40% of the median |" in card
    assert "Latency" not in build_hover("net.py", 8, [_state()])  # nothing measured: nothing said
    target = build_hover("net.py", _state().line, [_state(measurements=measured)])
    assert "Latency: 1.00 ms per call, IQR 20.0 µs" in target


def test_module_hover_shows_operator_flops_of_its_call_line():
    card = build_hover("net.py", 7, [_state()])   # the Conv2d, called on line 11
    assert "Operators dispatched from its call lines (net.py:11)" in card
    assert "| aten.mean | 1 | not counted |" in card


def test_ignored_operator_is_neither_a_warning_nor_not_counted():
    result = copy.deepcopy(RESULT)
    result["report"]["operator_flops"] = {"ignored_operators": {"aten.view": {"calls": 1, "reason": "Metadata-only tensor view."}}}
    result["source_map"]["operators"].append({"file": "net.py", "line": 13, "operator": "aten.view", "calls": 1, "flops": None})
    state = _state(view=ResultView(result))
    assert "| aten.view | 1 | ignored: Metadata-only tensor view. |" in build_hover("net.py", 13, [state])
    assert not [d for d in build_diagnostics("net.py", Lines(SOURCE), [], [state]) if d.range.start.line == 12]


def test_call_line_shows_the_outermost_call():
    # "x = self.stage1(x)": Sequential stage1 and the two blocks it ran; then a loop over heads
    assert outermost([("stage1", 0), ("stage1.0", 0), ("stage1.1", 0)]) == [("stage1", 0)]
    assert outermost([("conv", 0), ("flat", 0)]) == [("conv", 0), ("flat", 0)]
    assert outermost([("heads.0", 0), ("heads.1", 0)]) == [("heads.0", 0), ("heads.1", 0)]


def test_target_hover_shows_measured_memory():
    memory = {"device": "cpu", "metric": "rss", "baseline_bytes": 1024, "peak_bytes": 1024 + 3 * 1024 * 1024,
              "delta_bytes": 3 * 1024 * 1024}
    card = build_hover("net.py", 4, [_state(measurements={"memory": memory})])
    assert "Peak memory: 3.00 MiB above the baseline (peak 3.00 MiB, rss on cpu)" in card


def test_receptive_field_notes_are_information_only_when_asked_for_and_where_one_applies():
    result = copy.deepcopy(RESULT)
    result["report"]["diagnostics"] += [
        {"code": "unsupported_module_metric", "severity": "warning", "metric": "receptive_field", "path": "heads.0",
         "message": "Receptive field is not defined for Linear: it mixes every input feature"},
        {"code": "receptive_field_path", "severity": "warning", "metric": "receptive_field", "path": "conv",
         "message": "The cumulative receptive field of 'conv' is partial: padding."},
        {"code": "unsupported_module_metric", "severity": "warning", "metric": "receptive_field", "path": "odd",
         "message": "Module type not supported: Odd"},
    ]

    def notes(view, **asked):
        found = build_diagnostics("net.py", Lines(SOURCE), [], [_state(view=view)], **asked)
        return {d.range.start.line + 1: d for d in found if d.code != "uncounted_operator" and d.range.start.line + 1 != 4}

    # not asked for: nothing (no count is missing, so never a warning either)
    assert notes(ResultView(copy.deepcopy(result))) == {}
    # asked for, but the model has no spatial kernel (no layer's own field is wider than 1): nothing
    assert notes(ResultView(copy.deepcopy(result)), receptive_field_notes=True) == {}
    # the 3x3 convolution makes it a model where a receptive field applies
    result["report"]["layers"][1]["metrics"]["local_receptive_field"] = _m("complete", 3.0, "elements")
    found = notes(ResultView(result), receptive_field_notes=True)
    assert sorted(found) == [7, 8, 9]   # conv, heads.0 and odd were built there
    assert {d.severity for d in found.values()} == {types.DiagnosticSeverity.Information}
    assert found[8].message == ("Receptive field is not defined for Linear: it mixes every input feature (`heads.0`): "
                                "receptive field not derived")
    assert found[7].message.startswith("The cumulative receptive field of … is partial")


def _line(source, marker):
    """The 1-based line of ``source`` holding ``marker`` (exactly once)."""
    (found,) = [n for n, text in enumerate(source.splitlines(), start=1) if marker in text]
    return found


def test_hints_hovers_and_warnings_follow_an_unsaved_edit():
    # two comment lines on top, and the heads line rewritten: unchanged lines move down by two,
    # the rewritten line loses what the old result said about it
    edited = "# one\n# two\n" + SOURCE.replace("nn.Linear(8, 8) for _ in range(2)", "nn.Linear(8, 8) for _ in range(3)")
    state = _state(stale=True)
    state.set_analysed_texts({"net.py": SOURCE})
    state.target = type("_Moved", (_Target,), {"line": _line(edited, "class Net")})()
    lines = Lines(edited)
    found = _labels(build_inlay_hints("net.py", lines, [state], InlayHintSettings()))
    assert found == {
        (_line(edited, "class Net"), "368 params · ≥ 195 kMACs · ≥ 389 kFLOPs (stale)"),
        (_line(edited, "self.conv ="), "224 params · 389 kFLOPs (stale)"),
        (_line(edited, "self.odd ="), "0 params · 8 FLOPs (stale)"),
        (_line(edited, "x = self.conv(x)"), "→ (1, 8, 30, 30) (stale)"),
        (_line(edited, "x = head(x)"), "→ (1, 8) (stale)"),
        (_line(edited, "return self.odd(x)"), "→ (1, 8) (stale)"),
    }
    assert "Conv2d" in build_hover("net.py", _line(edited, "self.conv ="), [state], lines.lines)
    assert build_hover("net.py", _line(edited, "self.heads ="), [state], lines.lines) is None      # changed
    assert build_hover("net.py", _line(edited, "def __init__"), [state], lines.lines) is None      # the old conv line
    warnings = {d.range.start.line + 1 for d in build_diagnostics("net.py", lines, [], [state])
                if d.severity == types.DiagnosticSeverity.Warning}
    assert warnings == {_line(edited, "x = self.conv(x)")}   # aten.mean, moved with its line


def test_unchanged_text_maps_every_line_to_itself():
    state = _state()
    state.set_analysed_texts({"net.py": SOURCE})
    assert _labels(build_inlay_hints("net.py", Lines(SOURCE), [state], InlayHintSettings())) == _labels(
        build_inlay_hints("net.py", Lines(SOURCE), [_state()], InlayHintSettings()))


def test_failure_diagnostic_follows_an_unsaved_edit():
    failure = {"ok": False, "target": "Net", "error": {"kind": "forward", "type": "RuntimeError",
                                                        "message": "shape mismatch", "file": "net.py", "line": 13}}
    state = _state(error=failure, stale=True)
    state.set_error_texts({"net.py": SOURCE})
    edited = "# one\n# two\n" + SOURCE
    state.target = type("_Moved", (_Target,), {"line": _line(edited, "class Net")})()
    errors = sorted(d.range.start.line + 1 for d in build_diagnostics("net.py", Lines(edited), [], [state])
                    if d.severity == types.DiagnosticSeverity.Error)
    assert errors == [_line(edited, "class Net"), _line(edited, "x = head(x)")]   # line 13 of SOURCE
    # the raising line rewritten: only the target line keeps the error
    rewritten = edited.replace("x = head(x)", "x = head(x) + 1")
    errors = [d.range.start.line + 1 for d in build_diagnostics("net.py", Lines(rewritten), [], [state])
              if d.severity == types.DiagnosticSeverity.Error]
    assert errors == [_line(rewritten, "class Net")]


def test_container_work_sits_where_the_work_ran_folded_by_line():
    # the root's own forward added on line 14 and multiplied matrices on line 13: with the module
    # formulas shown, the escaped work is reported there, one diagnostic per line, each naming only
    # the operators of its own line
    result = copy.deepcopy(RESULT)
    result["source_map"]["operators"] += [
        {"file": "net.py", "line": 14, "operator": "aten.add", "calls": 1, "flops": 8, "ignored": None, "module": ""},
        {"file": "net.py", "line": 13, "operator": "aten.mm", "calls": 2, "flops": 256, "ignored": None, "module": ""},
        # the same operator on the same line inside a child call: the hover sums the two
        {"file": "net.py", "line": 13, "operator": "aten.mm", "calls": 1, "flops": 128, "ignored": None, "module": "heads.0"},
    ]
    work = "Operators ran in the own forward of the root module, outside every child module call, and no module " \
           "formula counts them: aten.add x1, aten.mm x2."
    macs = "Matrix, convolution or attention work ran in the own forward of the root module: aten.mm x2."
    result["report"]["diagnostics"] += [
        {"code": "container_work", "severity": "warning", "metric": "module_flops", "path": "", "message": work},
        {"code": "container_work", "severity": "warning", "metric": "dmas", "path": "", "message": work},
        {"code": "container_work", "severity": "warning", "metric": "macs", "path": "", "message": macs},
    ]
    state = _state(view=ResultView(result))
    found = {d.range.start.line + 1: d.message for d in build_diagnostics("net.py", Lines(SOURCE), [], [state], headline="modules")
             if d.code == "container_work"}
    assert sorted(found) == [13, 14]
    assert found[13].startswith("aten.mm ×2 in the own forward of the root module: no module formula counts it, so the module "
                                "FLOPs and MACs shown are lower bounds")
    assert found[14].startswith("aten.add in the own forward of the root module")   # not told about the mm of line 13
    # the dispatched operators counted that work: with them shown, nothing to warn about
    assert not [d for d in build_diagnostics("net.py", Lines(SOURCE), [], [state]) if d.code == "container_work"]
    assert "| aten.mm | 3 | 384 FLOPs |" in build_hover("net.py", 13, [state])   # 2 + 1 calls, 256 + 128


def test_repeats_are_folded_into_one_diagnostic_per_line_and_cause():
    # twelve layers built on one line, each without a formula, and an operator without one that ran
    # in each of them on one line: one warning each, with the count
    layers = [_layer("", "Net", _t([1, 8]), 0, ops=_ops("partial", 0, 0))]
    modules, operators, diagnostics = [], [], []
    for index in range(12):
        path = f"blocks.{index}"
        layers.append(_layer(path, "Odd", _t([1, 8]), 0, 0, 0, status="partial", ops=_ops("partial", 0, 0)))
        modules.append({"layer": index + 1, "defined_at": {"file": "net.py", "line": 8},
                        "called_at": {"file": "net.py", "line": 13}})
        operators.append({"file": "net.py", "line": 14, "operator": "aten.sin", "calls": 1, "flops": None, "layer": index + 1})
        diagnostics += [{"code": "unsupported_module_metric", "severity": "warning", "metric": metric, "path": path,
                         "message": "Module type not supported: Odd"} for metric in ("module_flops", "macs", "dmas")]
    diagnostics.append({"code": "uncounted_operator", "severity": "warning", "metric": "flops", "operator": "aten.sin",
                        "message": "aten.sin was observed 12 time(s), but no FLOP formula is registered."})
    totals = {name: {**_total("partial", 0, unit), "scope": "workload"} for name, unit in (
        ("operator_flops", "FLOPs"), ("operator_macs", "MACs"), ("module_flops", "FLOPs"), ("macs", "MACs"))}
    result = {"ok": True, "target": "Net", "imported_files": ["net.py"],
              "report": {"layers": layers, "diagnostics": diagnostics, "totals": totals},
              "source_map": {"modules": modules, "operators": operators}}
    state = _state(view=ResultView(result))
    for headline, line, start in (
            ("operators", 14, "aten.sin has no FLOP formula (12 calls, ×12 layers: `blocks.0`, `blocks.1`, `blocks.2` and 9 more)"),
            ("modules", 8, "Module type not supported: Odd (×12 layers: `blocks.0`, `blocks.1`, `blocks.2` and 9 more)")):
        warnings = [d for d in build_diagnostics("net.py", Lines(SOURCE), [], [state], headline=headline)
                    if d.severity == types.DiagnosticSeverity.Warning]
        assert [(d.range.start.line + 1, d.message[:len(start)]) for d in warnings] == [(line, start)], headline

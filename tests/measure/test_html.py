"""render_report: kinds, escaping, offline-only markup, atomic writes."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from torchscan_lsp import compare_reports, crawl_module
from torchscan_lsp.engine.measuring.benchmarks import compare_benchmarks
from torchscan_lsp.engine.reporting.html import CONTENT_SECURITY_POLICY, render_report, report_kind
from torchscan_lsp.engine.measuring.latency import measure_latency
from torchscan_lsp.engine.measuring.layer_latency import measure_layer_latency
from torchscan_lsp.engine.measuring.memory import measure_peak_memory

URL_ATTRIBUTE = re.compile(r"""\b(?:src|href|action|srcset|poster|data)\s*=\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)


def _offline_checks(text: str) -> None:
    assert text.startswith("<!DOCTYPE html>")
    assert f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY.replace(chr(39), "&#x27;")}">' in text
    assert "default-src 'none'" in CONTENT_SECURITY_POLICY
    assert not URL_ATTRIBUTE.search(text)
    assert "<script" not in text.lower()
    assert "<link" not in text.lower() and "@import" not in text and "url(" not in text


def test_analysis_report(tmp_path, conv_report):
    path = render_report(conv_report, tmp_path / "conv.html")
    text = path.read_text(encoding="utf-8")
    _offline_checks(text)
    assert "Analysis of torch.nn.modules.conv.Conv2d" in text
    assert "388,800 FLOPs" in text and "194,400 MACs" in text and "224 elements" in text
    assert report_kind(conv_report) == "analysis"
    # the docs' example has no per-call operator counts: by the module formulas, the only call has
    # all the FLOPs
    text = render_report(conv_report, tmp_path / "conv.html", headline="modules").read_text(encoding="utf-8")
    assert "100.0%" in text and "<th>FLOPs (module formulas)</th>" in text


def test_the_module_table_headlines_the_method_asked_for_and_names_both(tmp_path):
    # Conv2d(3, 8, 3) then ReLU on (1, 3, 8, 8): 6·6 = 36 positions, 8·36 = 288 outputs.
    # Conv: 288·27 = 7,776 MACs, 2·7,776 = 15,552 FLOPs dispatched; ReLU one comparison per
    # element, 288 FLOPs dispatched
    report = crawl_module(nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU()), (3, 8, 8))
    operators = render_report(report, tmp_path / "o.html").read_text(encoding="utf-8")
    assert ("<th>FLOPs (dispatched operators)</th><th>share of FLOPs</th><th>MACs (dispatched operators)</th>"
            "<th>FLOPs (module formulas)</th><th>MACs (module formulas)</th>") in operators
    # the root's row, its children's work included: 15,552 + 288 = 15,840 FLOPs, 100% of the total
    assert '<td class="num">15,840 FLOPs</td><td><span class="share">100.0%</span>' in operators
    modules = render_report(report, tmp_path / "m.html", headline="modules").read_text(encoding="utf-8")
    assert "<th>FLOPs (module formulas)</th><th>share of FLOPs</th><th>MACs (module formulas)</th>" in modules
    with pytest.raises(ValueError, match="headline must be one of 'operators', 'modules', got 'both'"):
        render_report(report, tmp_path / "x.html", headline="both")


def test_findings_replace_the_reports_own_diagnostics(tmp_path, evil_report):
    finding = {"file": "net.py", "line": 7, "severity": "warning", "code": "uncounted_operator",
               "message": "aten.sin has no FLOP formula"}
    text = render_report(evil_report, tmp_path / "f.html", findings=[finding]).read_text(encoding="utf-8")
    assert "Diagnostics, as the editor shows them (1)" in text and "<code>net.py:7</code>" in text
    assert "aten.sin has no FLOP formula" in text
    assert "Module type not supported" not in text  # the report's own list is not shown beside them
    empty = render_report(evil_report, tmp_path / "e.html", findings=[]).read_text(encoding="utf-8")
    assert "None: every number shown is complete." in empty


def test_model_provided_strings_are_escaped(tmp_path, evil_report, evil_text):
    text = render_report(evil_report, tmp_path / "evil.html").read_text(encoding="utf-8")
    _offline_checks(text)
    assert evil_text not in text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in text
    assert "onerror=" not in text.replace("onerror=&quot;", "")
    assert "≥ 10 FLOPs" in text  # partial total shown as a lower bound


def test_custom_title_is_escaped(tmp_path, conv_report):
    text = render_report(conv_report, tmp_path / "t.html", title="<b>mine</b>").read_text(encoding="utf-8")
    assert "<title>&lt;b&gt;mine&lt;/b&gt;</title>" in text


def test_layer_latency_attached_to_an_analysis_report(tmp_path):
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
    x = torch.rand(1, 3, 16, 16)
    layer_latency = measure_layer_latency(model, (x,), device="cpu", warmup=0, min_run_time=0.002, min_block_time=1e-4, include_model=False)
    analysis = {
        "schema_version": 1,
        "context": {"model_type": "torch.nn.modules.container.Sequential"},
        "inputs": {"source": "provided", "args": [], "kwargs": {}},
        "layers": [
            {"path": "", "call_index": 0, "type": "Sequential", "metrics": {}},
            {"path": "0", "call_index": 0, "type": "Conv2d", "metrics": {}},
            {"path": "1", "call_index": 0, "type": "ReLU", "metrics": {}},
        ],
        "totals": {},
        "diagnostics": [],
    }
    text = render_report(analysis, tmp_path / "a.html", layer_latency=layer_latency).read_text(encoding="utf-8")
    _offline_checks(text)
    assert "share of layer latency" in text and "layer_latency_sum" in text
    assert text.count('class="bar lat"') == 2


@pytest.mark.parametrize("kind", ["latency", "layer_latency", "benchmark_comparison", "peak_memory"])
def test_each_measurement_kind_renders(tmp_path, kind):
    fast = {"warmup": 0, "min_run_time": 0.005, "min_repeats": 2}
    if kind == "latency":
        document = measure_latency(lambda: None, device="cpu", inputs=torch.rand(2, 3), **fast)
        expected = ["Latency benchmark", "first_call_latency", "(2, 3) torch.float32"]
    elif kind == "layer_latency":
        document = measure_layer_latency(nn.Sequential(nn.Linear(2, 2)), (torch.rand(1, 2),), device="cpu",
                                         **{**fast, "min_repeats": 5, "min_block_time": 1e-4})
        expected = ["Per-layer latency of torch.nn.modules.container.Sequential", "model_latency"]
    elif kind == "benchmark_comparison":
        report = measure_latency(lambda: None, device="cpu", **fast)
        other = {**report, "threads": report["threads"] + 1}
        document = compare_benchmarks(report, other, on_mismatch="flag")
        expected = ["Latency comparison", "measured under different conditions", "<code>threads</code>"]
    else:
        document = measure_peak_memory(lambda: torch.ones(1000), device="cpu")
        expected = ["Peak memory", "pytorch_tensor_bytes", "delta_bytes"]
    assert report_kind(document) == kind
    text = render_report(document, tmp_path / f"{kind}.html").read_text(encoding="utf-8")
    _offline_checks(text)
    for snippet in expected:
        assert snippet in text


def test_report_comparison_renders(tmp_path, conv_report):
    diff = {
        "schema_version": 1,
        "totals": {"parameters": {"status": "complete", "delta": 112, "before": conv_report["totals"]["parameters"], "after": {**conv_report["totals"]["parameters"], "value": 336, "known_value": 336}}},
        "layers": {"added": [], "removed": [], "changed": [{"path": "<b>", "call_index": 0, "metrics": {"<i>macs": {"status": "complete", "delta": 16}}}]},
    }
    text = render_report(diff, tmp_path / "diff.html").read_text(encoding="utf-8")
    _offline_checks(text)
    assert "Analysis comparison" in text and "112 elements" in text and "&lt;b&gt;" in text
    assert "<b>" not in text and "<i>" not in text and "&lt;i&gt;macs" in text


def test_report_comparison_deltas_carry_sign_and_unit(tmp_path):
    before = crawl_module(nn.Conv2d(3, 8, 3), (3, 32, 32))
    after = crawl_module(nn.Conv2d(3, 16, 3), (3, 32, 32))
    text = render_report(compare_reports(before, after), tmp_path / "diff.html").read_text(encoding="utf-8")
    # twice the output channels: FLOPs 8·30·30·(2·27 − 1) + 8·30·30 = 388,800 more; parameters
    # 8·(27 + 1) = 224 more; the one changed call (the root) says the same with its unit
    assert '<td class="num">+388,800 FLOPs</td>' in text
    assert '<td class="num">+224 elements</td>' in text
    assert "module_flops: complete Δ +388,800 FLOPs" in text


def test_unknown_documents_are_refused(tmp_path, conv_report):
    target = tmp_path / "x.html"
    with pytest.raises(ValueError, match="cannot tell what kind of document"):
        render_report({"hello": 1}, target)
    with pytest.raises(TypeError):
        render_report([conv_report], target)
    with pytest.raises(ValueError, match="unsupported schema version: 2"):
        render_report({**conv_report, "schema_version": 2}, target)
    with pytest.raises(ValueError, match="layer_latency= must be a layer_latency report"):
        render_report(conv_report, target, layer_latency=conv_report)
    latency = measure_latency(lambda: None, device="cpu", warmup=0, min_run_time=0.005, min_repeats=2)
    with pytest.raises(ValueError, match="only be attached to an analysis report"):
        render_report(latency, target, latency=latency)
    assert not target.exists()


def test_writes_are_atomic(tmp_path, conv_report):
    target = tmp_path / "missing-dir" / "x.html"
    with pytest.raises(FileNotFoundError) as raised:
        render_report(conv_report, target)
    assert raised.value.filename == str(target)  # the path asked for, not the temporary file
    good = tmp_path / "r.html"
    good.write_text("old", encoding="utf-8")
    render_report(conv_report, good)
    assert good.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]  # no temporary file left behind


def _poison(node, evil, keep=("kind", "metric", "schema_version")):
    """Every string value and every mapping key (except what identifies the document) gets HTML."""
    if isinstance(node, dict):
        out = {key: value if key in keep else _poison(value, evil, keep) for key, value in node.items()}
        for name in ("totals", "metrics", "context", "hardware", "timing"):
            if isinstance(out.get(name), dict):
                out[name] = {f"{k}{evil}": v for k, v in out[name].items()}
        return out
    if isinstance(node, list):
        return [_poison(item, evil, keep) for item in node]
    if isinstance(node, str):
        return node + evil
    return node


@pytest.mark.parametrize("kind", ["analysis", "latency", "layer_latency", "benchmark_comparison", "report_comparison", "peak_memory"])
def test_every_string_in_every_kind_is_escaped(tmp_path, conv_report, evil_text, kind):
    fast = {"warmup": 0, "min_run_time": 0.005, "min_repeats": 2}
    if kind == "analysis":
        document = conv_report
    elif kind == "latency":
        document = measure_latency(lambda: None, device="cpu", inputs={"ids": torch.zeros(2, dtype=torch.long)}, **fast)
    elif kind == "layer_latency":
        model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)).train()
        document = measure_layer_latency(model, (torch.rand(3, 2),), device="cpu", eval_mode=False,
                                         **{**fast, "min_repeats": 5, "min_block_time": 1e-4})
    elif kind == "benchmark_comparison":
        report = measure_latency(lambda: None, device="cpu", **fast)
        document = compare_benchmarks(report, {**report, "device_name": "other"}, on_mismatch="flag")
    elif kind == "report_comparison":
        document = {"schema_version": 1, "totals": {"parameters": {"status": "complete", "delta": 0, "before": conv_report["totals"]["parameters"], "after": conv_report["totals"]["parameters"]}},
                    "layers": {"added": [{"path": "a", "call_index": 0, "metrics": {"calls": {}}}], "removed": [], "changed": []}}  # fmt: skip
    else:
        document = measure_peak_memory(lambda: torch.ones(10), device="cpu")
    poisoned = _poison(document, evil_text)
    if kind == "benchmark_comparison":
        for side in ("before", "after"):
            poisoned[side]["kind"] = "latency"
    assert report_kind(poisoned) == kind
    text = render_report(poisoned, tmp_path / "p.html").read_text(encoding="utf-8")
    _offline_checks(text)
    assert "<img" not in text and evil_text not in text
    assert "&lt;script&gt;" in text


def _analysis_of(layers, total):
    return {"schema_version": 1, "context": {"model_type": "m.Net"}, "inputs": {"source": "provided", "args": [], "kwargs": {}},
            "layers": layers, "totals": {"module_flops": total}, "diagnostics": []}


def _flops(status, value):
    return {"status": status, "value": value if status == "complete" else None,
            "known_value": None if status == "unavailable" else value, "unit": "FLOPs", "scope": "module_call",
            "method": "torchscan_module_formula"}


def test_shares_of_a_complete_total(tmp_path):
    # fc 300 of 400 FLOPs = 75.0%, relu 100 of 400 = 25.0%
    layers = [{"path": "fc", "call_index": 0, "type": "Linear", "metrics": {"module_flops": _flops("complete", 300)}},
              {"path": "relu", "call_index": 0, "type": "ReLU", "metrics": {"module_flops": _flops("complete", 100)}}]
    text = render_report(_analysis_of(layers, {**_flops("complete", 400), "scope": "forward"}),
                         tmp_path / "r.html", headline="modules").read_text(encoding="utf-8")
    assert '<span class="share">75.0%</span>' in text and '<span class="share">25.0%</span>' in text
    assert "lower bound" not in text


def test_shares_of_a_lower_bound_say_so_and_work_not_counted_shows_no_percentage(tmp_path):
    # fc counted 600; odd (no formula) counted in part, known 0; the total is partial, known 600.
    # fc's share of the counted part is 600 / 600 = 100.0%, of the true total at most that: "≤ 100.0%"
    layers = [{"path": "fc", "call_index": 0, "type": "Linear", "metrics": {"module_flops": _flops("complete", 600)}},
              {"path": "odd", "call_index": 0, "type": "Odd", "metrics": {"module_flops": _flops("partial", 0)}},
              {"path": "gone", "call_index": 0, "type": "Gone", "metrics": {"module_flops": _flops("unavailable", None)}}]
    text = render_report(_analysis_of(layers, {**_flops("partial", 600), "scope": "forward"}),
                         tmp_path / "r.html", headline="modules").read_text(encoding="utf-8")
    assert '<span class="share">≤ 100.0%</span>' in text
    assert not re.search(r"(?<![\d.])0\.0%", text)  # neither odd nor gone gets a percentage
    assert "counted in part: no share" in text and "not counted: no share" in text
    assert "is a lower bound" in text and "at most the one shown" in text

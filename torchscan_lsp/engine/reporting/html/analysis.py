"""The HTML page of an analysis report (``crawl_module``), with the measurements that can be
attached to it: per-layer latency (joined to the layers by ``(path, call_index)``), whole-model
latency and peak memory.

The module table tells the editor's story: each call's FLOPs and MACs by the *headline* method first
(the dispatched operators unless the caller says otherwise: the editor's ``torchscan.headline``),
named in its headers, the other method beside them, named too; each call's work includes its
children's (a container's row is its subtree, as its line's hover says), and its parameters are its
module's subtree's (each tensor once). The diagnostics are the ones the caller gives, as the editor
folded them (its warnings only where a number shown is partial), or, for a report alone, the
report's own.
"""

from __future__ import annotations

from typing import Any

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.contract.methods import OPERATORS, Method, method, other
from torchscan_lsp.contract.report import call_total, layer_key, subtree_layers
from torchscan_lsp.engine.reporting.html.measurements import latency_summary, memory_table
from torchscan_lsp.engine.reporting.html.page import (context_section, diagnostics_section, escape, key_values, metric_cell,
    num, plain, share_cell, share_note, shares, status_badge, table, totals_table)

__all__ = ["render_analysis"]


def _mono(meta: Any) -> str:
    return f'<span class="mono">{escape(fmt.shape_text(meta, detail=True))}</span>'


def _latency_cells(layers: list[dict[str, Any]], layer_latency: dict[str, Any]) -> list[list[str]]:
    """The latency and share cells of each analysis layer (``—`` for a call that was not timed)."""
    timed = {layer_key(r): r for r in layer_latency.get("layers") or [] if isinstance(r, dict)}
    records = list(timed.values())
    total = (layer_latency.get("totals") or {}).get("layer_latency_sum")
    parts = [(r.get("metrics") or {}).get("latency") for r in records]
    record_shares, largest = shares(parts, total)
    share_of = {id(r): s for r, s in zip(records, record_shares, strict=True)}
    cells = []
    for layer in layers:
        record = timed.get(layer_key(layer))
        if record is None:
            cells.append([num("—"), ""])
            continue
        latency = (record.get("metrics") or {}).get("latency")
        cell = metric_cell(latency)
        if record.get("reason"):
            cell = f'<span title="{escape(record["reason"])}">{cell} {status_badge("unavailable")}</span>'
        cells.append([num(cell), share_cell(latency, share_of[id(record)], largest, total, "lat")])
    return cells


def _parameters_cell(layers: list[dict[str, Any]], path: str) -> str:
    """The parameters of module ``path``'s subtree (each tensor counted once, in the first call that
    saw it), marked when some of them are shared with another module."""
    inside = subtree_layers(layers, (path,))
    count = sum((layer.get("parameters") or {}).get("trainable", 0) + (layer.get("parameters") or {}).get("frozen", 0)
                for layer in inside)
    shared = any((layer.get("parameters") or {}).get("shared") for layer in inside)
    return num(escape(fmt.exact(count)) + (" (shared)" if shared else ""))


def _work_cell(metric: Any) -> str:
    cell = metric_cell(metric)
    if isinstance(metric, dict) and metric.get("status") in ("partial", "unavailable"):
        cell += " " + status_badge(metric["status"])
    return num(cell)


def _module_rows(report: dict[str, Any], layers: list[dict[str, Any]], shown: Method, beside: Method) -> list[list[str]]:
    """One row per call: its identity, output and parameters, then its FLOPs (with their share of
    the model's) and MACs by ``shown``, then by ``beside``; each call's work with its children's
    (:func:`~torchscan_lsp.contract.report.call_total`)."""
    diagnostics = report.get("diagnostics") or []
    work = [{name: call_total(layers, diagnostics, index, name) for name in (shown.flops, shown.macs, beside.flops,
                                                                              beside.macs)}
            for index in range(len(layers))]
    total_flops = (report.get("totals") or {}).get(shown.flops)
    flop_shares, largest = shares([row[shown.flops] for row in work], total_flops)
    rows = []
    for layer, metrics, share in zip(layers, work, flop_shares, strict=True):
        path = str(layer.get("path", ""))
        rows.append([
            (f"<code>{escape(path)}</code>" if path else fmt.ROOT_MODULE),
            num(escape(fmt.exact(layer.get("call_index")))),
            escape(layer.get("type", "")),
            _mono(layer.get("output")),
            _parameters_cell(layers, path),
            _work_cell(metrics[shown.flops]),
            share_cell(metrics[shown.flops], share, largest, total_flops),
            _work_cell(metrics[shown.macs]),
            _work_cell(metrics[beside.flops]),
            _work_cell(metrics[beside.macs]),
        ])
    return rows


def _findings_section(findings: list[dict[str, Any]]) -> str:
    """The diagnostics as the editor shows them (``findings``: ``file``, ``line``, ``severity``,
    ``code``, ``message``), in file and line order."""
    heading = "Diagnostics, as the editor shows them"
    if not findings:
        return f"<h2>{heading}</h2><p>None: every number shown is complete.</p>"
    rows = [[f'<span class="{escape(f.get("severity"))}">{escape(f.get("severity"))}</span>',
             f"<code>{escape(f.get('file'))}:{escape(f.get('line'))}</code>", f"<code>{escape(f.get('code'))}</code>",
             escape(f.get("message"))] for f in findings]
    return (f"<h2>{heading} ({len(rows)})</h2>" + table(["severity", "where", "code", "message"], rows, "findings")
            + "<p>The report's diagnostics in full: <code>scan --format json</code>.</p>")


def render_analysis(report: dict[str, Any], layer_latency: dict | None, latency: dict | None,
                    memory: dict | None, headline: str = OPERATORS.name,
                    findings: list[dict[str, Any]] | None = None) -> tuple[str, str, str]:
    """Title, escaped subtitle and body of an analysis report's page.

    ``headline``: the method whose FLOPs and MACs come first in the module table (``"operators"``
    or ``"modules"``: :func:`~torchscan_lsp.contract.methods.method`); each call's share is of that
    method's FLOPs total, a share of a partial total is marked as at most (``≤``) and explained, and
    a call not counted in full shows no share. ``findings``: the diagnostics to show instead of the
    report's own (the editor's, folded by line and cause).
    """
    context = report.get("context") or {}
    title = f"Analysis of {context.get('model_type', 'model')}"
    subtitle = escape(
        f"{len(report.get('layers') or [])} module calls · schema version {report.get('schema_version')} · "
        f"{context.get('execution_mode', '')}"
    )
    totals = report.get("totals") or {}
    body = ['<h2>Totals</h2><div id="totals">', totals_table(totals), "</div>"]
    if latency is not None:
        body += ["<h2>Measured latency (whole model)</h2>", latency_summary(latency)]
    if memory is not None:
        body += ["<h2>Measured peak memory</h2>", memory_table(memory)]
    layers = [layer for layer in report.get("layers") or [] if isinstance(layer, dict)]
    shown, beside = method(headline), other(headline)
    rows = _module_rows(report, layers, shown, beside)
    headers = ["path", "call", "type", "output", "parameters", f"FLOPs ({shown.title})", "share of FLOPs",
               f"MACs ({shown.title})", f"FLOPs ({beside.title})", f"MACs ({beside.title})"]
    if layer_latency is not None:
        headers += ["latency", "share of layer latency"]
        rows = [row + cells for row, cells in zip(rows, _latency_cells(layers, layer_latency), strict=True)]
    body += [f"<h2>Modules ({len(rows)} calls)</h2>",
             f'<p id="headline">FLOPs and MACs of each call, its children\'s included, by the {escape(shown.title)} '
             f"first (the headline), then by the {escape(beside.title)}; parameters of each module with its "
             "children's, each tensor once.</p>",
             table(headers, rows, "modules"), share_note(totals.get(shown.flops), shown.flops)]
    if layer_latency is not None:
        body += [
            "<p>Latency: each call replayed alone through <code>torch.utils.benchmark.Timer</code> on "
            f"{escape(layer_latency.get('device', '?'))} ({escape(layer_latency.get('device_name', '?'))}), "
            f"{plain(layer_latency.get('threads'))} thread(s). Calls without a latency were not replayed "
            "(their reason is in the per-layer diagnostics below).</p>",
            totals_table(layer_latency.get("totals") or {}),
            share_note((layer_latency.get("totals") or {}).get("layer_latency_sum"), "layer_latency_sum"),
        ]
    body.append(_findings_section(findings) if findings is not None else diagnostics_section(report.get("diagnostics")))
    if layer_latency is not None and layer_latency.get("diagnostics"):
        body.append(diagnostics_section(layer_latency.get("diagnostics"), "Per-layer latency diagnostics"))
    inputs = report.get("inputs") or {}
    body.append("<h2>Inputs</h2>" + key_values(
        [("source", plain(inputs.get("source")))]
        + [(f"args[{i}]", _mono(m)) for i, m in enumerate(inputs.get("args") or [])]
        + [(f"kwargs[{k}]", _mono(m)) for k, m in (inputs.get("kwargs") or {}).items()]
    ))
    body.append(context_section(context))
    return title, subtitle, "".join(body)

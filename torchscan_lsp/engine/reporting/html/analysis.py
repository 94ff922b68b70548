"""The HTML page of an analysis report (``crawl_module``), with the measurements that can be
attached to it: per-layer latency (joined to the layers by ``(path, call_index)``), whole-model
latency and peak memory."""

from __future__ import annotations

from typing import Any

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.contract.report import layer_key
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


def _module_rows(layers: list[dict[str, Any]], total_flops: Any) -> list[list[str]]:
    flops = [(layer.get("metrics") or {}).get("module_flops") for layer in layers]
    flop_shares, largest = shares(flops, total_flops)
    rows = []
    for layer, metric, share in zip(layers, flops, flop_shares, strict=True):
        metrics = layer.get("metrics") or {}
        params = layer.get("parameters") or {}
        count = (params.get("trainable") or 0) + (params.get("frozen") or 0)
        flop_cell = metric_cell(metric) if metric is not None else "—"
        if isinstance(metric, dict) and metric.get("status") in ("partial", "unavailable"):
            flop_cell += " " + status_badge(metric["status"])
        rows.append([
            (f"<code>{escape(layer.get('path'))}</code>" if layer.get('path') else fmt.ROOT_MODULE),
            num(escape(fmt.exact(layer.get("call_index")))),
            escape(layer.get("type", "")),
            _mono(layer.get("output")),
            num(escape(fmt.exact(count)) + (" (shared)" if params.get("shared") else "")),
            num(flop_cell),
            share_cell(metric, share, largest, total_flops),
            num(metric_cell(metrics["macs"]) if "macs" in metrics else "—"),
        ])
    return rows


def render_analysis(report: dict[str, Any], layer_latency: dict | None, latency: dict | None,
                    memory: dict | None) -> tuple[str, str, str]:
    """Title, escaped subtitle and body of an analysis report's page.

    Each layer's share of module FLOPs is of the report's ``module_flops`` total; shares of a
    partial total are marked as at most (``≤``) and explained, and a layer not counted in full
    shows no share.
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
    total_flops = totals.get("module_flops")
    rows = _module_rows(layers, total_flops)
    headers = ["path", "call", "type", "output", "parameters", "module FLOPs", "share of FLOPs", "MACs"]
    if layer_latency is not None:
        headers += ["latency", "share of layer latency"]
        rows = [row + cells for row, cells in zip(rows, _latency_cells(layers, layer_latency), strict=True)]
    body += [f"<h2>Modules ({len(rows)} calls)</h2>", table(headers, rows, "modules"),
             share_note(total_flops, "module_flops")]
    if layer_latency is not None:
        body += [
            "<p>Latency: each call replayed alone through <code>torch.utils.benchmark.Timer</code> on "
            f"{escape(layer_latency.get('device', '?'))} ({escape(layer_latency.get('device_name', '?'))}), "
            f"{plain(layer_latency.get('threads'))} thread(s). Calls without a latency were not replayed "
            "(their reason is in the per-layer diagnostics below).</p>",
            totals_table(layer_latency.get("totals") or {}),
            share_note((layer_latency.get("totals") or {}).get("layer_latency_sum"), "layer_latency_sum"),
        ]
    body.append(diagnostics_section(report.get("diagnostics")))
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

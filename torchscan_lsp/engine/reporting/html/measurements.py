"""The HTML pages of measurements: a latency benchmark (``measure_latency``), per-layer latency
(``measure_layer_latency``) and peak memory (``measure_peak_memory``)."""

from __future__ import annotations

from typing import Any

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.engine.reporting.html.page import (context_section, diagnostics_section, escape, key_values, metric_cell,
    num, plain, share_cell, share_note, shares, status_badge, table, totals_table, value_cell)

__all__ = ["latency_summary", "memory_table", "render_latency", "render_layer_latency", "render_memory"]

_SHOWN_BLOCKS = 400
"""Block averages drawn at most (a long benchmark has thousands)."""


def latency_summary(report: dict[str, Any]) -> str:
    """A latency report's totals and the conditions it was measured under."""
    return totals_table(report.get("totals") or {}) + key_values([
        ("device", plain(report.get("device"))),
        ("device name", plain(report.get("device_name"))),
        ("threads (intra-op / inter-op)", f"{plain(report.get('threads'))} / {plain(report.get('interop_threads'))}"),
        ("work units per call", f"{plain(report.get('work_units'))} {escape(report.get('work_unit', ''))}"),
        ("timed blocks", plain(len(report.get("block_durations") or []))),
        ("calls per block", plain(report.get("calls_per_block"))),
        ("timed calls", plain(report.get("timed_calls"))),
    ])


def memory_table(report: dict[str, Any]) -> str:
    """A peak-memory report's device, metric and byte counts."""
    pairs = [("device", plain(report.get("device"))), ("metric", f"<code>{escape(report.get('metric'))}</code>")]
    for key in ("baseline_bytes", "peak_bytes", "delta_bytes", "allocated_peak_bytes"):
        if key in report:
            pairs.append((key, value_cell(report[key], "bytes")))
    return key_values(pairs)


def _blocks(report: dict[str, Any]) -> list[str]:
    blocks = [b for b in report.get("block_durations") or [] if isinstance(b, (int, float))]
    if not blocks:
        return []
    per_block = report.get("calls_per_block") or 1
    shown = blocks[:_SHOWN_BLOCKS]
    top = max(shown) or 1.0
    bars = "".join(f'<span style="height:{100.0 * b / top:.1f}%" title="{escape(fmt.duration(b / per_block))} per call">'
                   "</span>" for b in shown)
    note = f" (first {len(shown)} of {len(blocks)})" if len(shown) < len(blocks) else ""
    return [
        f"<h2>Block averages{note}</h2>",
        f'<div class="blocks">{bars}</div>',
        f"<p>Fastest block average {escape(fmt.duration(min(blocks) / per_block))}, slowest "
        f"{escape(fmt.duration(max(blocks) / per_block))}; total timed {escape(fmt.duration(sum(blocks)))}.</p>",
    ]


def render_latency(report: dict[str, Any]) -> tuple[str, str, str]:
    """Title, escaped subtitle and body of a latency report's page."""
    subtitle = escape(f"{report.get('device', '?')} · {report.get('device_name', '?')}")
    body = ['<h2>Totals</h2><div id="totals">', latency_summary(report), "</div>"]
    body += ["<h2>Timing options</h2>", key_values((key, plain(value)) for key, value in (report.get("timing") or {}).items())]
    body += _blocks(report)
    inputs = report.get("inputs") or {}
    if inputs.get("supplied"):
        value = f'<span class="mono">{escape(fmt.shape_text(inputs.get("value"), detail=True))}</span>'
        body += ["<h2>Inputs (metadata only)</h2>", key_values([("value", value), ("dtypes", plain(inputs.get("dtypes")))])]
    else:
        body.append("<h2>Inputs</h2><p>Not supplied.</p>")
    body.append("<h2>Hardware</h2>" + key_values((k, plain(v)) for k, v in (report.get("hardware") or {}).items()))
    body.append(context_section(report.get("context")))
    return "Latency benchmark", subtitle, "".join(body)


def render_layer_latency(report: dict[str, Any]) -> tuple[str, str, str]:
    """Title, escaped subtitle and body of a per-layer latency report's page; each layer's share is
    of the report's ``layer_latency_sum``."""
    context = report.get("context") or {}
    title = f"Per-layer latency of {context.get('model_type', 'model')}"
    subtitle = escape(f"{report.get('device', '?')} · {report.get('device_name', '?')} · {report.get('threads', '?')} thread(s)")
    layers = [layer for layer in report.get("layers") or [] if isinstance(layer, dict)]
    total = (report.get("totals") or {}).get("layer_latency_sum")
    latencies = [(layer.get("metrics") or {}).get("latency") for layer in layers]
    layer_shares, largest = shares(latencies, total)
    rows = []
    for layer, latency, share in zip(layers, latencies, layer_shares, strict=True):
        metrics = layer.get("metrics") or {}
        rows.append([
            (f"<code>{escape(layer.get('path'))}</code>" if layer.get('path') else fmt.ROOT_MODULE),
            num(escape(fmt.exact(layer.get("call_index")))),
            escape(layer.get("type", "")),
            escape(layer.get("unit", "")),
            status_badge((latency or {}).get("status")),
            num(metric_cell(latency)),
            num(metric_cell(metrics.get("latency_iqr"))),
            share_cell(latency, share, largest, total, "lat"),
            num(plain((layer.get("timing") or {}).get("timed_calls"))),
            escape(layer.get("reason", "")),
        ])
    body = [
        '<h2>Totals</h2><div id="totals">',
        totals_table(report.get("totals") or {}),
        "</div><p>The sum of layer latencies and the whole-model latency are separate measurements: "
        "they differ by work outside the replayed calls and by per-call overhead.</p>",
        f"<h2>Layers ({len(rows)} calls)</h2>",
        table(["path", "call", "type", "unit", "status", "latency", "IQR", "share", "timed calls", "reason"], rows, "modules"),
        share_note(total, "layer_latency_sum"),
        diagnostics_section(report.get("diagnostics")),
        "<h2>Timing options</h2>",
        key_values((key, plain(value)) for key, value in (report.get("timing") or {}).items()),
        context_section(context),
    ]
    return title, subtitle, "".join(body)


def render_memory(report: dict[str, Any]) -> tuple[str, str, str]:
    """Title, escaped subtitle and body of a peak-memory report's page."""
    subtitle = escape(f"{report.get('device', '?')} · {report.get('metric', '?')}")
    body = ['<h2>Totals</h2><div id="totals">', memory_table(report), "</div>", context_section(report.get("context"))]
    return "Peak memory", subtitle, "".join(body)

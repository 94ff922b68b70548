"""Offline HTML evidence for reports (spec §13.6, A.7).

:func:`render_report` writes **one self-contained HTML file**: inline CSS, no script, no external
style sheet, font, image or link, and a ``Content-Security-Policy`` that forbids every network
fetch (``default-src 'none'``), so opening it can never reach the network. It renders:

* an **analysis report** (``crawl_module``): totals with their statuses, the module table with a bar
  for each layer's share of module FLOPs, the diagnostics, the inputs and the execution context.
  Per-layer latency is attached with the optional ``layer_latency=`` argument (a report from
  ``measure_layer_latency``): its records are joined to the analysis layers by ``(path,
  call_index)`` and add a latency column with a bar for each call's share of the layer-latency sum.
  ``latency=`` (a ``measure_latency`` report of the whole model) and ``memory=`` (a
  ``measure_peak_memory`` report) add their totals beside the analysis totals;
* a **latency report** (``measure_latency``), a **per-layer latency report**
  (``measure_layer_latency``), a **benchmark comparison** (``compare_benchmarks``), a **report
  comparison** (``compare_reports``) or a **peak-memory report** (``measure_peak_memory``).

The kind of document is detected from its keys; anything else raises ``ValueError`` (``TypeError``
for a non-dict). Every string that comes from the model or the report (names, paths, types,
messages, versions) is escaped with :func:`html.escape`. The file is written atomically (a
temporary file in the same directory, then renamed), so a failure never leaves half a file.
"""

from __future__ import annotations

import html
import math
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from torchscan_lsp.engine.report import SCHEMA_VERSION
from torchscan_lsp.version import package_version

__all__ = ["render_report", "report_kind", "CONTENT_SECURITY_POLICY", "KINDS"]

#: The page's policy: nothing may be fetched; only the inline style sheet and style attributes apply.
CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

#: Document kinds :func:`render_report` understands.
KINDS = ("analysis", "latency", "layer_latency", "benchmark_comparison", "report_comparison", "peak_memory")

_MEMORY_METRICS = ("pytorch_tensor_bytes", "pytorch_reserved_bytes")

_CSS = """
:root { color-scheme: light dark; --fg: #1d1f23; --bg: #ffffff; --muted: #5f6570; --line: #d9dce1;
  --head: #f3f4f6; --bar: #3b82f6; --bar2: #f59e0b; --ok: #15803d; --part: #b45309; --na: #6b7280; --bad: #b91c1c; }
@media (prefers-color-scheme: dark) { :root { --fg: #e5e7eb; --bg: #111318; --muted: #9ca3af; --line: #2d3139;
  --head: #1b1e24; --ok: #4ade80; --part: #fbbf24; --na: #9ca3af; --bad: #f87171; } }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg);
  margin: 0 auto; padding: 24px; max-width: 1280px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; }
.sub { color: var(--muted); margin: 0 0 16px; }
table { border-collapse: collapse; width: 100%; margin: 4px 0 12px; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: var(--head); font-weight: 600; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
.status { font-size: 11.5px; font-weight: 600; padding: 1px 6px; border-radius: 8px; border: 1px solid currentColor; }
.complete { color: var(--ok); } .partial { color: var(--part); } .unavailable { color: var(--na); }
.warning { color: var(--part); } .error { color: var(--bad); }
.bar { position: relative; height: 8px; min-width: 90px; background: var(--head); border-radius: 4px; margin-top: 3px; }
.bar > span { position: absolute; left: 0; top: 0; bottom: 0; background: var(--bar); border-radius: 4px; }
.bar.lat > span { background: var(--bar2); }
.share { font-size: 11.5px; color: var(--muted); font-variant-numeric: tabular-nums; }
.note { border-left: 4px solid var(--part); background: var(--head); padding: 8px 12px; margin: 8px 0; }
.note.bad { border-color: var(--bad); }
.kv th { width: 260px; position: static; }
.blocks { display: flex; align-items: flex-end; gap: 1px; height: 60px; border-bottom: 1px solid var(--line); }
.blocks > span { flex: 1 1 0; background: var(--bar); min-width: 1px; }
footer { color: var(--muted); margin-top: 32px; font-size: 12px; }
"""


# --------------------------------------------------------------------------------------------------
# detection


def report_kind(document: Any) -> str:
    """Which of :data:`KINDS` ``document`` is.

    Raises:
        TypeError: ``document`` is not a dict.
        ValueError: the kind cannot be recognised, or the schema version is not supported.
    """
    if not isinstance(document, dict):
        raise TypeError(f"render_report needs a report dict, got {type(document).__name__}.")
    declared = document.get("kind")
    if declared in ("latency", "layer_latency", "benchmark_comparison"):
        kind = declared
    elif "metric" in document and "peak_bytes" in document and document.get("metric") in _MEMORY_METRICS:
        kind = "peak_memory"
    elif isinstance(document.get("layers"), list) and isinstance(document.get("totals"), dict) and "inputs" in document:
        kind = "analysis"
    elif (
        isinstance(document.get("layers"), dict)
        and {"added", "removed", "changed"} <= set(document["layers"])
        and isinstance(document.get("totals"), dict)
    ):
        kind = "report_comparison"
    else:
        keys = ", ".join(sorted(map(str, document)))[:300]
        raise ValueError(
            "render_report cannot tell what kind of document this is: expected an analysis report "
            "(crawl_module), a latency report (measure_latency), a per-layer latency report "
            "(measure_layer_latency), a benchmark comparison (compare_benchmarks), a report comparison "
            f"(compare_reports) or a peak-memory report (measure_peak_memory); got a dict with keys [{keys}]."
        )
    version = document.get("schema_version", SCHEMA_VERSION if kind == "peak_memory" else None)
    if version != SCHEMA_VERSION:
        raise ValueError(f"unsupported schema version: {version!r}")
    return kind


# --------------------------------------------------------------------------------------------------
# formatting


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _fmt_number(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return _e(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return _e(value)
        if value.is_integer() and abs(value) < 1e15:
            return f"{value:,.1f}" if abs(value) < 1e6 else f"{value:,.0f}"
        return f"{value:.6g}"
    return _e(value)


def _fmt_seconds(value: Any) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return _e(value)
    magnitude = abs(value)
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if magnitude >= scale:
            return f"{value / scale:.4g} {unit}"
    return f"{value / 1e-9:.4g} ns" if value else "0 s"


def _fmt_bytes(value: Any) -> str:
    if not isinstance(value, int) or isinstance(value, bool):
        return _e(value)
    text = f"{value:,} B"
    for scale, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if abs(value) >= scale:
            return f"{text} ({value / scale:.2f} {unit})"
    return text


def _fmt_value(value: Any, unit: Any) -> str:
    if unit == "seconds":
        return _fmt_seconds(value)
    if unit == "bytes":
        return _fmt_bytes(value)
    text = _fmt_number(value)
    return f"{text} {_e(unit)}" if unit else text


def _status(status: Any) -> str:
    cls = status if status in ("complete", "partial", "unavailable") else "unavailable"
    return f'<span class="status {cls}">{_e(status)}</span>'


def _metric_value(metric: Any) -> str:
    """A MetricResult as text: the value, ``≥ known`` for partial, ``—`` when unavailable."""
    if not isinstance(metric, dict):
        return "—"
    status, unit = metric.get("status"), metric.get("unit")
    if status == "complete":
        return _fmt_value(metric.get("value"), unit)
    if status == "partial" and metric.get("known_value") is not None:
        return "≥ " + _fmt_value(metric.get("known_value"), unit)
    return "—"


def _known(metric: Any) -> float | None:
    if isinstance(metric, dict) and metric.get("status") in ("complete", "partial"):
        value = metric.get("known_value")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


def _bar(share: float | None, largest: float | None, cls: str = "") -> str:
    """The share as a percentage and a bar scaled so that the largest share fills it."""
    if share is None:
        return ""
    width = 100.0 * share / largest if largest else 0.0
    width = max(0.0, min(100.0, width))
    return (
        f'<span class="share">{100.0 * share:.1f}%</span>'
        f'<div class="bar {cls}"><span style="width:{width:.2f}%"></span></div>'
    )


def _shares(values: list[float | None]) -> tuple[list[float | None], float | None]:
    """Each value's share of the sum of the known values, and the largest share."""
    total = sum(v for v in values if v is not None)
    shares = [v / total if v is not None and total else None for v in values]
    known = [v for v in shares if v is not None]
    return shares, (max(known) if known else None)


def _meta_text(meta: Any) -> str:
    """Value metadata (§3.3) as short text: ``[1, 3, 32, 32] torch.float32``, ``(…, …)``."""
    if not isinstance(meta, dict):
        return "?"
    kind = meta.get("kind")
    if kind == "tensor":
        shape = meta.get("shape")
        shape_text = "?" if shape is None else "[" + ", ".join(str(s) for s in shape) + "]"
        return f"{shape_text} {meta.get('dtype', '')}".strip()
    if kind in ("tuple", "list"):
        items = ", ".join(_meta_text(item) for item in meta.get("items", ()))
        return f"({items})" if kind == "tuple" else f"[{items}]"
    if kind == "mapping":
        parts = [f"{entry.get('key', '…')}: {_meta_text(entry.get('value'))}" for entry in meta.get("items", ())]
        return "{" + ", ".join(parts) + "}"
    if kind in ("scalar", "object"):
        return str(meta.get("type", kind))
    return str(kind)


class _Num(str):
    """A pre-escaped table cell to right-align (numbers)."""


def _table(headers: Iterable[str], rows: Iterable[Iterable[str]], cls: str = "") -> str:
    """Rows are pre-escaped HTML cells; :class:`_Num` cells are right-aligned."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for cell in row:
            if isinstance(cell, _Num):
                cells.append(f'<td class="num">{cell}</td>')
            else:
                cells.append(f"<td>{cell}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    class_attr = f' class="{cls}"' if cls else ""
    return f"<table{class_attr}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _num(text: str) -> str:
    return _Num(text)


def _kv(pairs: Iterable[tuple[str, Any]]) -> str:
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in pairs)
    return f'<table class="kv"><tbody>{rows}</tbody></table>'


def _plain(value: Any) -> str:
    """Any JSON value as escaped text (lists joined with commas)."""
    if isinstance(value, list):
        return _e(", ".join(str(v) for v in value)) if value else "—"
    if value is None:
        return "—"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _fmt_number(value)
    return _e(value)


def _totals_table(totals: dict[str, Any]) -> str:
    rows = []
    for name, metric in totals.items():
        metric = metric if isinstance(metric, dict) else {}
        rows.append(
            [
                f"<code>{_e(name)}</code>",
                _status(metric.get("status")),
                _num(_metric_value(metric)),
                _e(metric.get("scope", "")),
                f"<code>{_e(metric.get('method', ''))}</code>",
            ]
        )
    return _table(["metric", "status", "value", "scope", "method"], rows, "totals")


def _context(context: Any) -> str:
    if not isinstance(context, dict) or not context:
        return ""
    return "<h2>Execution context</h2>" + _kv((key, _plain(value)) for key, value in context.items())


def _diagnostics(diagnostics: Any) -> str:
    if not diagnostics:
        return "<h2>Diagnostics</h2><p>None.</p>"
    rows = []
    for diag in diagnostics:
        if not isinstance(diag, dict):
            continue
        where = diag.get("path", diag.get("operator", ""))
        severity = diag.get("severity", "")
        rows.append(
            [
                f'<span class="{_e(severity)}">{_e(severity)}</span>',
                f"<code>{_e(diag.get('code', ''))}</code>",
                _e(diag.get("metric", "")),
                f"<code>{_e(where if where != '' else '(root)')}</code>",
                _e(diag.get("message", "")),
            ]
        )
    return f"<h2>Diagnostics ({len(rows)})</h2>" + _table(["severity", "code", "metric", "where", "message"], rows)


def _page(title: str, subtitle: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_e(CONTENT_SECURITY_POLICY)}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        f'<h1 id="title">{_e(title)}</h1><p class="sub">{subtitle}</p>'
        f"{body}"
        f"<footer>Written by torchscan-lsp {_e(package_version())}. An offline document: it loads "
        "nothing from the network and runs no script.</footer>"
        "</body></html>\n"
    )


# --------------------------------------------------------------------------------------------------
# renderers


def _analysis(report: dict[str, Any], layer_latency: dict | None, latency: dict | None, memory: dict | None) -> tuple[str, str, str]:
    context = report.get("context") or {}
    model_type = context.get("model_type", "model")
    title = f"Analysis of {model_type}"
    subtitle = _e(
        f"{len(report.get('layers') or [])} module calls · schema version {report.get('schema_version')} · "
        f"{context.get('execution_mode', '')}"
    )
    body = ['<h2>Totals</h2><div id="totals">', _totals_table(report.get("totals") or {}), "</div>"]
    if latency is not None:
        body += ["<h2>Measured latency (whole model)</h2>", _latency_summary(latency)]
    if memory is not None:
        body += ["<h2>Measured peak memory</h2>", _memory_table(memory)]
    layers = [layer for layer in report.get("layers") or [] if isinstance(layer, dict)]
    flop_shares, flop_max = _shares([_known((layer.get("metrics") or {}).get("module_flops")) for layer in layers])
    timed: dict[tuple[Any, Any], dict[str, Any]] = {}
    if layer_latency is not None:
        for record in layer_latency.get("layers") or []:
            if isinstance(record, dict):
                timed[(record.get("path"), record.get("call_index"))] = record
    records = list(timed.values())
    latency_shares, latency_max = _shares([_known((r.get("metrics") or {}).get("latency")) for r in records])
    latency_share = {id(record): share for record, share in zip(records, latency_shares, strict=True)}
    headers = ["path", "call", "type", "output", "parameters", "module FLOPs", "share of FLOPs", "MACs"]
    if layer_latency is not None:
        headers += ["latency", "share of layer latency"]
    rows = []
    for layer, flop_share in zip(layers, flop_shares, strict=True):
        metrics = layer.get("metrics") or {}
        params = layer.get("parameters") or {}
        count = (params.get("trainable") or 0) + (params.get("frozen") or 0)
        flop_cell = _metric_value(metrics.get("module_flops")) if "module_flops" in metrics else "—"
        status = (metrics.get("module_flops") or {}).get("status")
        if status in ("partial", "unavailable"):
            flop_cell += " " + _status(status)
        row = [
            f"<code>{_e(layer.get('path') or '(root)')}</code>",
            _num(_fmt_number(layer.get("call_index"))),
            _e(layer.get("type", "")),
            f'<span class="mono">{_e(_meta_text(layer.get("output")))}</span>',
            _num(_fmt_number(count) + (" (shared)" if params.get("shared") else "")),
            _num(flop_cell),
            _bar(flop_share, flop_max),
            _num(_metric_value(metrics.get("macs")) if "macs" in metrics else "—"),
        ]
        if layer_latency is not None:
            record = timed.get((layer.get("path"), layer.get("call_index")))
            if record is None:
                row += [_num("—"), ""]
            else:
                lat = (record.get("metrics") or {}).get("latency")
                cell = _metric_value(lat)
                if record.get("reason"):
                    cell = f'<span title="{_e(record["reason"])}">{cell} {_status("unavailable")}</span>'
                row += [_num(cell), _bar(latency_share[id(record)], latency_max, "lat")]
        rows.append(row)
    body += [f"<h2>Modules ({len(rows)} calls)</h2>", _table(headers, rows, "modules")]
    if layer_latency is not None:
        body += [
            "<p>Latency: each call replayed alone through <code>torch.utils.benchmark.Timer</code> on "
            f"{_e(layer_latency.get('device', '?'))} ({_e(layer_latency.get('device_name', '?'))}), "
            f"{_fmt_number(layer_latency.get('threads'))} thread(s). Calls without a latency were not replayed "
            "(their reason is in the per-layer diagnostics below).</p>",
            _totals_table(layer_latency.get("totals") or {}),
        ]
    body.append(_diagnostics(report.get("diagnostics")))
    if layer_latency is not None and layer_latency.get("diagnostics"):
        body.append(_diagnostics(layer_latency.get("diagnostics")).replace("<h2>Diagnostics", "<h2>Per-layer latency diagnostics", 1))
    inputs = report.get("inputs") or {}
    body.append(
        "<h2>Inputs</h2>"
        + _kv(
            [("source", _plain(inputs.get("source")))]
            + [(f"args[{i}]", f'<span class="mono">{_e(_meta_text(m))}</span>') for i, m in enumerate(inputs.get("args") or [])]
            + [(f"kwargs[{k}]", f'<span class="mono">{_e(_meta_text(m))}</span>') for k, m in (inputs.get("kwargs") or {}).items()]
        )
    )
    body.append(_context(context))
    return title, subtitle, "".join(body)


def _latency_summary(report: dict[str, Any]) -> str:
    return _totals_table(report.get("totals") or {}) + _kv(
        [
            ("device", _plain(report.get("device"))),
            ("device name", _plain(report.get("device_name"))),
            ("threads (intra-op / inter-op)", f"{_plain(report.get('threads'))} / {_plain(report.get('interop_threads'))}"),
            ("work units per call", f"{_plain(report.get('work_units'))} {_e(report.get('work_unit', ''))}"),
            ("timed blocks", _plain(len(report.get("block_durations") or []))),
            ("calls per block", _plain(report.get("calls_per_block"))),
            ("timed calls", _plain(report.get("timed_calls"))),
        ]
    )


def _latency(report: dict[str, Any]) -> tuple[str, str, str]:
    title = "Latency benchmark"
    subtitle = _e(f"{report.get('device', '?')} · {report.get('device_name', '?')}")
    blocks = [b for b in report.get("block_durations") or [] if isinstance(b, (int, float))]
    per_block = report.get("calls_per_block") or 1
    body = ['<h2>Totals</h2><div id="totals">', _latency_summary(report), "</div>"]
    timing = report.get("timing") or {}
    body += ["<h2>Timing options</h2>", _kv((key, _plain(value)) for key, value in timing.items())]
    if blocks:
        shown = blocks[:400]
        top = max(shown) or 1.0
        bars = "".join(
            f'<span style="height:{100.0 * b / top:.1f}%" title="{_e(_fmt_seconds(b / per_block))} per call"></span>'
            for b in shown
        )
        note = f" (first {len(shown)} of {len(blocks)})" if len(shown) < len(blocks) else ""
        body += [
            f"<h2>Block averages{note}</h2>",
            f'<div class="blocks">{bars}</div>',
            f"<p>Fastest block average {_fmt_seconds(min(blocks) / per_block)}, slowest "
            f"{_fmt_seconds(max(blocks) / per_block)}; total timed {_fmt_seconds(sum(blocks))}.</p>",
        ]
    inputs = report.get("inputs") or {}
    if inputs.get("supplied"):
        body += [
            "<h2>Inputs (metadata only)</h2>",
            _kv([("value", f'<span class="mono">{_e(_meta_text(inputs.get("value")))}</span>'), ("dtypes", _plain(inputs.get("dtypes")))]),
        ]
    else:
        body.append("<h2>Inputs</h2><p>Not supplied.</p>")
    body.append("<h2>Hardware</h2>" + _kv((k, _plain(v)) for k, v in (report.get("hardware") or {}).items()))
    body.append(_context(report.get("context")))
    return title, subtitle, "".join(body)


def _layer_latency(report: dict[str, Any]) -> tuple[str, str, str]:
    context = report.get("context") or {}
    title = f"Per-layer latency of {context.get('model_type', 'model')}"
    subtitle = _e(f"{report.get('device', '?')} · {report.get('device_name', '?')} · {report.get('threads', '?')} thread(s)")
    layers = [layer for layer in report.get("layers") or [] if isinstance(layer, dict)]
    shares, largest = _shares([_known((layer.get("metrics") or {}).get("latency")) for layer in layers])
    rows = []
    for layer, share in zip(layers, shares, strict=True):
        metrics = layer.get("metrics") or {}
        timing = layer.get("timing") or {}
        rows.append(
            [
                f"<code>{_e(layer.get('path') or '(root)')}</code>",
                _num(_fmt_number(layer.get("call_index"))),
                _e(layer.get("type", "")),
                _e(layer.get("unit", "")),
                _status((metrics.get("latency") or {}).get("status")),
                _num(_metric_value(metrics.get("latency"))),
                _num(_metric_value(metrics.get("latency_iqr"))),
                _bar(share, largest, "lat"),
                _num(_plain(timing.get("timed_calls"))),
                _e(layer.get("reason", "")),
            ]
        )
    body = [
        '<h2>Totals</h2><div id="totals">',
        _totals_table(report.get("totals") or {}),
        "</div><p>The sum of layer latencies and the whole-model latency are separate measurements: "
        "they differ by work outside the replayed calls and by per-call overhead.</p>",
        f"<h2>Layers ({len(rows)} calls)</h2>",
        _table(["path", "call", "type", "unit", "status", "latency", "IQR", "share", "timed calls", "reason"], rows, "modules"),
        _diagnostics(report.get("diagnostics")),
        "<h2>Timing options</h2>",
        _kv((key, _plain(value)) for key, value in (report.get("timing") or {}).items()),
        _context(context),
    ]
    return title, subtitle, "".join(body)


def _comparison(report: dict[str, Any]) -> tuple[str, str, str]:
    title = "Latency comparison"
    latency = report.get("latency") or {}
    change = latency.get("change")
    verdict = {
        "slower": "slower, beyond the noise",
        "faster": "faster, beyond the noise",
        "within_noise": "no change beyond the noise",
    }.get(change, "not comparable (a latency is not complete)")
    subtitle = _e(f"after vs before: {verdict}")
    body = []
    mismatches = report.get("mismatches") or []
    if mismatches:
        items = "".join(
            f"<li><code>{_e(m.get('field'))}</code>: {_plain(m.get('before'))} → {_plain(m.get('after'))}</li>"
            for m in mismatches
            if isinstance(m, dict)
        )
        body.append(
            '<div class="note bad"><strong>These reports were measured under different conditions; '
            f"the comparison is flagged, not trustworthy:</strong><ul>{items}</ul></div>"
        )
    rows = []
    for name in ("latency", "first_call_latency", "throughput"):
        entry = report.get(name) or {}
        unit = entry.get("unit")
        rows.append(
            [
                f"<code>{_e(name)}</code>",
                _status(entry.get("status")),
                _num(_fmt_value(entry.get("before"), unit) if entry.get("before") is not None else "—"),
                _num(_fmt_value(entry.get("after"), unit) if entry.get("after") is not None else "—"),
                _num(_fmt_value(entry.get("difference"), unit) if entry.get("difference") is not None else "—"),
                _num(f"{entry['ratio']:.4f}" if isinstance(entry.get("ratio"), (int, float)) else "—"),
                _num(_fmt_seconds(entry["noise"]) if isinstance(entry.get("noise"), (int, float)) else ""),
                _e(entry.get("change") or ""),
            ]
        )
    body += [
        '<h2>Totals</h2><div id="totals">',
        _table(["metric", "status", "before", "after", "after − before", "after / before", "noise", "change"], rows),
        "</div><p>Noise: 1.57 · (IQR<sub>before</sub>/√n<sub>before</sub> + IQR<sub>after</sub>/√n<sub>after</sub>) "
        "over the block averages (the notched box-plot rule); a change no larger than it is reported as within noise.</p>",
    ]
    for side in ("before", "after"):
        sub = report.get(side)
        if isinstance(sub, dict):
            body += [f"<h2>{side.capitalize()}</h2>", _latency_summary(sub), _context(sub.get("context")).replace("<h2>Execution context</h2>", "")]
    return title, subtitle, "".join(body)


def _report_comparison(report: dict[str, Any]) -> tuple[str, str, str]:
    title = "Analysis comparison"
    layers = report.get("layers") or {}
    added, removed, changed = (layers.get(k) or [] for k in ("added", "removed", "changed"))
    subtitle = _e(f"{len(added)} added, {len(removed)} removed, {len(changed)} changed module calls")
    rows = []
    for name, diff in (report.get("totals") or {}).items():
        diff = diff if isinstance(diff, dict) else {}
        before, after = diff.get("before"), diff.get("after")
        unit = (after or before or {}).get("unit")
        delta = diff.get("delta")
        rows.append(
            [
                f"<code>{_e(name)}</code>",
                _status(diff.get("status")),
                _num(_metric_value(before)),
                _num(_metric_value(after)),
                _num(_fmt_value(delta, unit) if delta is not None else "—"),
            ]
        )
    body = ['<h2>Totals</h2><div id="totals">', _table(["metric", "status", "before", "after", "delta"], rows), "</div>"]

    def layer_rows(entries: list[Any], with_metrics: bool) -> str:
        out = []
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            metrics = entry.get("metrics") or {}
            if with_metrics:
                detail = "; ".join(
                    f"{_e(name)}: {_e(_plain_delta(diff))}" for name, diff in metrics.items() if isinstance(diff, dict)
                )
            else:
                detail = _e(", ".join(sorted(metrics)))
            out.append([f"<code>{_e(entry.get('path') or '(root)')}</code>", _num(_fmt_number(entry.get("call_index"))), detail])
        return _table(["path", "call", "metrics"], out) if out else "<p>None.</p>"

    body += ["<h2>Added calls</h2>", layer_rows(added, False), "<h2>Removed calls</h2>", layer_rows(removed, False)]
    body += ["<h2>Changed calls</h2>", layer_rows(changed, True)]
    return title, subtitle, "".join(body)


def _plain_delta(diff: dict[str, Any]) -> str:
    delta = diff.get("delta")
    return f"{diff.get('status')} Δ {delta}" if delta is not None else f"{diff.get('status')}"


def _memory_table(report: dict[str, Any]) -> str:
    pairs = [("device", _plain(report.get("device"))), ("metric", f"<code>{_e(report.get('metric'))}</code>")]
    for key in ("baseline_bytes", "peak_bytes", "delta_bytes", "allocated_peak_bytes"):
        if key in report:
            pairs.append((key, _fmt_bytes(report[key])))
    return _kv(pairs)


def _memory(report: dict[str, Any]) -> tuple[str, str, str]:
    title = "Peak memory"
    subtitle = _e(f"{report.get('device', '?')} · {report.get('metric', '?')}")
    body = ['<h2>Totals</h2><div id="totals">', _memory_table(report), "</div>", _context(report.get("context"))]
    return title, subtitle, "".join(body)


def render_report(
    document: dict[str, Any],
    path: str | os.PathLike[str],
    *,
    layer_latency: dict[str, Any] | None = None,
    latency: dict[str, Any] | None = None,
    memory: dict[str, Any] | None = None,
    title: str | None = None,
) -> Path:
    """Write ``document`` as one self-contained, offline HTML file at ``path``; return the path.

    Args:
        document: an analysis report, a latency report, a per-layer latency report, a benchmark
            comparison, a report comparison or a peak-memory report (detected from its keys).
        path: where to write (parent directories must exist); replaced atomically.
        layer_latency: with an analysis report only: a ``measure_layer_latency`` report whose
            records are joined to the layers by ``(path, call_index)``.
        latency: with an analysis report only: a ``measure_latency`` report of the whole model.
        memory: with an analysis report only: a ``measure_peak_memory`` report.
        title: the page title (escaped); by default derived from the document.

    Raises:
        TypeError: ``document`` is not a dict.
        ValueError: unknown document kind or schema version, or an attachment of the wrong kind
            (or given with a document that is not an analysis report).
        OSError: the file cannot be written (a missing folder: ``FileNotFoundError``); the error
            names ``path``.
    """
    kind = report_kind(document)
    attachments = {"layer_latency": layer_latency, "latency": latency, "memory": memory}
    expected = {"layer_latency": "layer_latency", "latency": "latency", "memory": "peak_memory"}
    for name, attached in attachments.items():
        if attached is None:
            continue
        if kind != "analysis":
            raise ValueError(f"{name}= can only be attached to an analysis report, not to a {kind} document.")
        if report_kind(attached) != expected[name]:
            raise ValueError(f"{name}= must be a {expected[name]} report, got a {report_kind(attached)} document.")
    if kind == "analysis":
        page_title, subtitle, body = _analysis(document, layer_latency, latency, memory)
    elif kind == "latency":
        page_title, subtitle, body = _latency(document)
    elif kind == "layer_latency":
        page_title, subtitle, body = _layer_latency(document)
    elif kind == "benchmark_comparison":
        page_title, subtitle, body = _comparison(document)
    elif kind == "report_comparison":
        page_title, subtitle, body = _report_comparison(document)
    else:
        page_title, subtitle, body = _memory(document)
    text = _page(title if title is not None else page_title, subtitle, body)
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent if str(target.parent) else ".")
    except OSError as error:
        # The file written first is a temporary one beside the target; the caller asked for the target.
        raise type(error)(error.errno, error.strerror, str(target)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return target

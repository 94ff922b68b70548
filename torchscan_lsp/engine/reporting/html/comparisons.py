"""The HTML pages of comparisons: two latency benchmarks (``compare_benchmarks``) and two analysis
reports (``compare_reports``)."""

from __future__ import annotations

from typing import Any

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.engine.reporting.html.measurements import latency_summary
from torchscan_lsp.engine.reporting.html.page import (context_section, escape, metric_cell, num, plain, status_badge, table,
    value_cell)

__all__ = ["render_benchmark_comparison", "render_report_comparison"]

_VERDICTS = {
    "slower": "slower, beyond the noise",
    "faster": "faster, beyond the noise",
    "within_noise": "no change beyond the noise",
}


def _optional(value: Any, unit: Any) -> str:
    return value_cell(value, unit) if value is not None else "—"


def _change_cell(value: Any, unit: Any) -> str:
    """A difference as escaped text with its sign and unit (``+2.10 ms``, ``−388,800 FLOPs``), or
    ``—`` when there is none (a side not complete)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "—"
    return escape(fmt.change(value, str(unit or "")))


def render_benchmark_comparison(report: dict[str, Any]) -> tuple[str, str, str]:
    """Title, escaped subtitle and body of a benchmark comparison's page; a comparison of reports
    measured under different conditions is flagged at the top."""
    latency = report.get("latency") or {}
    verdict = _VERDICTS.get(latency.get("change"), "not comparable (a latency is not complete)")
    body = []
    mismatches = [m for m in report.get("mismatches") or [] if isinstance(m, dict)]
    if mismatches:
        items = "".join(f"<li><code>{escape(m.get('field'))}</code>: {plain(m.get('before'))} → {plain(m.get('after'))}</li>"
                        for m in mismatches)
        body.append('<div class="note bad"><strong>These reports were measured under different conditions; '
                    f"the comparison is flagged, not trustworthy:</strong><ul>{items}</ul></div>")
    rows = []
    for name in ("latency", "first_call_latency", "throughput"):
        entry = report.get(name) or {}
        unit = entry.get("unit")
        ratio = entry.get("ratio")
        noise = entry.get("noise")
        rows.append([
            f"<code>{escape(name)}</code>",
            status_badge(entry.get("status")),
            num(_optional(entry.get("before"), unit)),
            num(_optional(entry.get("after"), unit)),
            num(_change_cell(entry.get("difference"), unit)),
            num(f"{ratio:.4f}" if isinstance(ratio, (int, float)) else "—"),
            num(escape(fmt.duration(noise)) if isinstance(noise, (int, float)) else ""),
            escape(entry.get("change") or ""),
        ])
    body += [
        '<h2>Totals</h2><div id="totals">',
        table(["metric", "status", "before", "after", "after − before", "after / before", "noise", "change"], rows),
        "</div><p>Noise: 1.57 · (IQR<sub>before</sub>/√n<sub>before</sub> + IQR<sub>after</sub>/√n<sub>after</sub>) "
        "over the block averages (the notched box-plot rule); a change no larger than it is reported as within noise.</p>",
    ]
    for side in ("before", "after"):
        sub = report.get(side)
        if isinstance(sub, dict):
            body += [f"<h2>{side.capitalize()}</h2>", latency_summary(sub), context_section(sub.get("context"), "")]
    return "Latency comparison", escape(f"after vs before: {verdict}"), "".join(body)


def _layer_rows(entries: list[Any], with_metrics: bool) -> str:
    rows = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        metrics = entry.get("metrics") or {}
        if with_metrics:
            detail = "; ".join(f"{escape(name)}: {escape(_delta_text(diff))}" for name, diff in metrics.items()
                               if isinstance(diff, dict))
        else:
            detail = escape(", ".join(sorted(metrics)))
        rows.append([(f"<code>{escape(entry.get('path'))}</code>" if entry.get('path') else fmt.ROOT_MODULE),
                     num(escape(fmt.exact(entry.get("call_index")))), detail])
    return table(["path", "call", "metrics"], rows) if rows else "<p>None.</p>"


def _unit(diff: dict[str, Any]) -> str:
    """The unit of a metric diff: its sides' (after's first)."""
    return str((diff.get("after") or diff.get("before") or {}).get("unit") or "")


def _delta_text(diff: dict[str, Any]) -> str:
    """``complete Δ +388,800 FLOPs``: a metric diff's status and its signed change with its unit."""
    delta = diff.get("delta")
    if not isinstance(delta, (int, float)) or isinstance(delta, bool):
        return f"{diff.get('status')}"
    return f"{diff.get('status')} Δ {fmt.change(delta, _unit(diff))}"  # escaped by the caller


def _layer_table(shown: Any) -> list[str]:
    """The editor's per-layer table (``{"headers", "rows", "note"}`` of text cells, added by the
    server beside the diff: parameters, FLOPs and output shapes before and after), or nothing."""
    if not isinstance(shown, dict) or not isinstance(shown.get("rows"), list):
        return []
    headers = [escape(h) for h in shown.get("headers") or []]
    rows = [[escape(cell) for cell in row] for row in shown["rows"] if isinstance(row, list)]
    return ['<h2>Per layer</h2><div id="layers">', table(headers, rows) if rows else "<p>No layer changed.</p>",
            f"<p>{escape(shown.get('note') or '')}</p></div>"]


def render_report_comparison(report: dict[str, Any]) -> tuple[str, str, str]:
    """Title, escaped subtitle and body of a report comparison's page."""
    layers = report.get("layers") or {}
    added, removed, changed = (layers.get(k) or [] for k in ("added", "removed", "changed"))
    subtitle = escape(f"{len(added)} added, {len(removed)} removed, {len(changed)} changed module calls")
    rows = []
    for name, diff in (report.get("totals") or {}).items():
        diff = diff if isinstance(diff, dict) else {}
        rows.append([f"<code>{escape(name)}</code>", status_badge(diff.get("status")), num(metric_cell(diff.get("before"))),
                     num(metric_cell(diff.get("after"))), num(_change_cell(diff.get("delta"), _unit(diff)))])
    body = ['<h2>Totals</h2><div id="totals">', table(["metric", "status", "before", "after", "delta"], rows), "</div>"]
    body += _layer_table(report.get("layer_table"))
    body += ["<h2>Added calls</h2>", _layer_rows(added, False), "<h2>Removed calls</h2>", _layer_rows(removed, False)]
    body += ["<h2>Changed calls</h2>", _layer_rows(changed, True)]
    return "Analysis comparison", subtitle, "".join(body)

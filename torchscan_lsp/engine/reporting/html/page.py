"""The building blocks of every HTML report: the page, its style sheet, escaped cells, tables,
status badges, share bars and the sections several kinds of report share.

Every string that comes from a model or a report goes through :func:`escape`; every number
through :mod:`torchscan_lsp.contract.format` (``≥`` for a lower bound, ``?`` for no number).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from typing import Any

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.contract.metrics import STATUSES, is_lower_bound, metric_value
from torchscan_lsp.version import package_version

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "escape",
    "status_badge",
    "metric_cell",
    "value_cell",
    "plain",
    "num",
    "table",
    "key_values",
    "shares",
    "share_cell",
    "share_note",
    "totals_table",
    "context_section",
    "diagnostics_section",
    "page",
]

#: The page's policy: nothing may be fetched; only the inline style sheet and style attributes apply.
CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

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
.plan-chart text { fill: var(--fg); } .legend { font-size: 12px; color: var(--muted); }
.swatch { display: inline-block; width: 10px; height: 10px; margin: 0 3px 0 8px; }
footer { color: var(--muted); margin-top: 32px; font-size: 12px; }
"""


def escape(value: Any) -> str:
    """``value`` as text, HTML-escaped (quotes included)."""
    return html.escape(str(value), quote=True)


def status_badge(status: Any) -> str:
    """A coloured badge naming a metric's status."""
    cls = status if status in STATUSES else "unavailable"
    return f'<span class="status {cls}">{escape(status)}</span>'


def metric_cell(metric: Any, unit: str | None = None) -> str:
    """A metric object as escaped text: its number in full, ``≥`` before a lower bound, ``?`` when
    it has none."""
    return escape(fmt.metric_text(metric if isinstance(metric, Mapping) else None, unit, full=True))


def value_cell(value: Any, unit: Any) -> str:
    """A bare number of ``unit`` (``seconds``, ``bytes`` or a count unit) as escaped text."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return escape(value)
    return metric_cell({"status": "complete", "value": value}, str(unit or ""))


def plain(value: Any) -> str:
    """Any JSON value as escaped text (lists joined with commas, ``—`` for nothing)."""
    if isinstance(value, list):
        return escape(", ".join(str(v) for v in value)) if value else "—"
    if value is None:
        return "—"
    return escape(fmt.exact(value) if isinstance(value, (int, float)) else value)


class _Num(str):
    """A pre-escaped table cell to right-align (numbers)."""


def num(text: str) -> str:
    """Mark a pre-escaped cell as a number (right-aligned)."""
    return _Num(text)


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], cls: str = "") -> str:
    """A table of pre-escaped HTML cells; :func:`num` cells are right-aligned."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = [f'<td class="num">{cell}</td>' if isinstance(cell, _Num) else f"<td>{cell}</td>" for cell in row]
        body.append("<tr>" + "".join(cells) + "</tr>")
    class_attr = f' class="{cls}"' if cls else ""
    return f"<table{class_attr}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def key_values(pairs: Iterable[tuple[str, Any]]) -> str:
    """A two-column table of names and pre-escaped values."""
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{v}</td></tr>" for k, v in pairs)
    return f'<table class="kv"><tbody>{rows}</tbody></table>'


def shares(parts: list[Any], total: Any) -> tuple[list[float | None], float | None]:
    """Each part's share of ``total`` (metric objects), and the largest share.

    Only a ``complete`` part has a share: a partial or unavailable one was not counted in full, and
    a share of it would read as a measured fraction (``0.0%`` for work not counted at all). Without
    a positive number in ``total`` no part has a share.
    """
    denominator = metric_value(total)
    if not isinstance(denominator, (int, float)) or isinstance(denominator, bool) or denominator <= 0:
        return [None] * len(parts), None
    out = [metric_value(p) / denominator if isinstance(p, Mapping) and p.get("status") == "complete" else None
           for p in parts]
    known = [s for s in out if s is not None]
    return out, (max(known) if known else None)


def share_cell(part: Any, share: float | None, largest: float | None, total: Any, cls: str = "") -> str:
    """A part's share as a percentage and a bar scaled so that the largest share fills it.

    Of a total that is only a lower bound the share is an upper bound, written ``≤ 12.3%``; a part
    counted only in part, or not at all, says so instead of showing a percentage. Empty for a
    part that has no such metric (a container).
    """
    if not isinstance(part, Mapping):
        return ""
    if share is None:
        if part.get("status") == "complete":  # the total has no number to divide by
            return ""
        word = "counted in part" if is_lower_bound(part) else "not counted"
        return f'<span class="share {escape(part.get("status"))}">{word}: no share</span>'
    width = max(0.0, min(100.0, 100.0 * share / largest if largest else 0.0))
    bound = "≤ " if is_lower_bound(total) else ""
    return (f'<span class="share">{bound}{100.0 * share:.1f}%</span>'
            f'<div class="bar {cls}"><span style="width:{width:.2f}%"></span></div>')


def share_note(total: Any, what: str) -> str:
    """The sentence under a table of shares whose total is a lower bound (empty otherwise)."""
    if not is_lower_bound(total):
        return ""
    return (f'<p class="note">The total {escape(what)} is a lower bound ({metric_cell(total)}): some work was not '
            "counted, so each share is of the counted part, and the true share is at most the one shown (≤).</p>")


def totals_table(totals: Mapping[str, Any]) -> str:
    """A table of metric objects: name, status, value, scope and method."""
    rows = []
    for name, metric in totals.items():
        metric = metric if isinstance(metric, Mapping) else {}
        rows.append([f"<code>{escape(name)}</code>", status_badge(metric.get("status")), num(metric_cell(metric)),
                     escape(metric.get("scope", "")), f"<code>{escape(metric.get('method', ''))}</code>"])
    return table(["metric", "status", "value", "scope", "method"], rows, "totals")


def context_section(context: Any, heading: str = "Execution context") -> str:
    """The execution context as a table under ``heading`` (no heading when empty)."""
    if not isinstance(context, Mapping) or not context:
        return ""
    title = f"<h2>{escape(heading)}</h2>" if heading else ""
    return title + key_values((key, plain(value)) for key, value in context.items())


def diagnostics_section(diagnostics: Any, heading: str = "Diagnostics") -> str:
    """A table of diagnostics (``None.`` when there are none)."""
    if not diagnostics:
        return f"<h2>{escape(heading)}</h2><p>None.</p>"
    rows = []
    for diag in diagnostics:
        if not isinstance(diag, Mapping):
            continue
        where = diag.get("path", diag.get("operator", ""))
        severity = diag.get("severity", "")
        rows.append([f'<span class="{escape(severity)}">{escape(severity)}</span>',
                     f"<code>{escape(diag.get('code', ''))}</code>", escape(diag.get("metric", "")),
                     (f"<code>{escape(where)}</code>" if where != "" else fmt.ROOT_MODULE), escape(diag.get("message", ""))])
    return f"<h2>{escape(heading)} ({len(rows)})</h2>" + table(["severity", "code", "metric", "where", "message"], rows)


def page(title: str, subtitle: str, body: str) -> str:
    """The whole document: offline policy, style sheet, title, pre-escaped ``subtitle`` and ``body``."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{escape(CONTENT_SECURITY_POLICY)}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>"
        f'<h1 id="title">{escape(title)}</h1><p class="sub">{subtitle}</p>'
        f"{body}"
        f"<footer>Written by torchscan-lsp {escape(package_version())}. An offline document: it loads "
        "nothing from the network and runs no script.</footer>"
        "</body></html>\n"
    )

"""The roofline chart of an HTML report: inline SVG, log-log, no script.

The x axis is arithmetic intensity (FLOPs per byte), the y axis FLOP/s, both in powers of ten. The
device's ceilings are drawn as the roof: the bandwidth's slope (``bandwidth x intensity``) up to the
ridge point, then the peak's flat line. Each leaf call with FLOPs and bytes is one point: a hollow
circle where its roofline puts it (``FLOPs / roofline time``, on the roof), and, when its latency was
measured here, a filled dot at the FLOP/s it achieved, joined to it by a line; a call that ran
faster than its memory roofline (its data was in cache) is drawn in its own colour, above the
bandwidth's slope. Calls without FLOPs or bytes (views, an identity) cannot sit on a log axis and
are counted under the chart. Each point carries a tooltip (``<title>``) with the call's numbers.

The plot area and the axis ranges are written on the ``<svg>`` as ``data-`` attributes
(``data-left``, ``data-top``, ``data-width``, ``data-height``, ``data-x-min``, ``data-x-max``,
``data-y-min``, ``data-y-max``), so a reader can check any point's position by the same formula.
"""

from __future__ import annotations

import math
from typing import Any

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.contract.metrics import metric_value
from torchscan_lsp.engine.reporting.html.page import escape, key_values, plain, table

__all__ = ["CHART", "roofline_section", "chart_position"]

#: The chart's size and plot area, in SVG user units.
CHART = {"width": 760, "height": 440, "left": 84, "top": 20, "right": 20, "bottom": 56}


def _decades(low: float, high: float) -> tuple[float, float]:
    return 10 ** math.floor(math.log10(low)), 10 ** math.ceil(math.log10(high))


def chart_position(value: float, low: float, high: float, start: float, length: float, *, flip: bool = False) -> float:
    """Where ``value`` falls on a log axis from ``low`` to ``high`` drawn over ``length`` units from
    ``start`` (``flip``: upwards, as the y axis)."""
    share = (math.log10(value) - math.log10(low)) / (math.log10(high) - math.log10(low))
    return start + length * (1 - share if flip else share)


def _points(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    points = []
    for record in records:
        intensity, seconds = record.get("intensity"), record["roofline_time"].get("known_value")
        flops = metric_value(record.get("flops"))
        if not intensity or not seconds or not flops:
            continue
        measured = record.get("measured") or {}
        points.append({"record": record, "x": intensity, "roof": flops / seconds,
                       "achieved": measured.get("achieved_flops"), "cached": bool(measured.get("cache_resident"))})
    return points


def _tooltip(record: dict[str, Any]) -> str:
    measured = record.get("measured") or {}
    parts = [f"{record.get('path') or fmt.ROOT_MODULE} ({record.get('type')})",
             f"{fmt.metric_text(record.get('flops'), 'FLOPs')}, {fmt.byte_size(record.get('bytes') or 0)}, "
             f"{record.get('intensity'):.3g} FLOPs/B",
             f"roofline {fmt.metric_text(record.get('roofline_time'), 'seconds')} ({record.get('bound')}-bound)"]
    if measured:
        parts.append(f"measured {fmt.metric_text(measured.get('latency'), 'seconds')}"
                     + (", in cache" if measured.get("cache_resident") else ""))
    return escape(" · ".join(parts))


def _svg(roofline: dict[str, Any], points: list[dict[str, Any]]) -> str:
    ceilings = roofline["ceilings"]
    peak, bandwidth = metric_value(ceilings["peak_flops"]), metric_value(ceilings["bandwidth"])
    xs = [p["x"] for p in points] + ([peak / bandwidth] if peak and bandwidth else [])
    ys = [p["roof"] for p in points] + [p["achieved"] for p in points if p["achieved"]] + ([peak] if peak else [])
    x_min, x_max = _decades(min(xs) / 2, max(xs) * 2)
    y_min, y_max = _decades(min(ys) / 2, max(ys) * 2)
    c = CHART
    width, height = c["width"] - c["left"] - c["right"], c["height"] - c["top"] - c["bottom"]

    def at(x: float, y: float) -> tuple[float, float]:
        return (chart_position(x, x_min, x_max, c["left"], width),
                chart_position(y, y_min, y_max, c["top"], height, flip=True))

    parts = [f'<svg id="roofline-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {c["width"]} {c["height"]}" '
             f'width="{c["width"]}" height="{c["height"]}" role="img" data-left="{c["left"]}" data-top="{c["top"]}" '
             f'data-width="{width}" data-height="{height}" data-x-min="{x_min:g}" data-x-max="{x_max:g}" '
             f'data-y-min="{y_min:g}" data-y-max="{y_max:g}" font-size="11" fill="currentColor">',
             f'<rect x="{c["left"]}" y="{c["top"]}" width="{width}" height="{height}" fill="none" stroke="currentColor" '
             'stroke-opacity="0.4"/>']
    for exponent in range(round(math.log10(x_min)), round(math.log10(x_max)) + 1):
        x = at(10.0**exponent, y_min)[0]
        parts.append(f'<line x1="{x:.1f}" y1="{c["top"]}" x2="{x:.1f}" y2="{c["top"] + height}" stroke="currentColor" '
                     f'stroke-opacity="0.12"/><text x="{x:.1f}" y="{c["top"] + height + 16}" text-anchor="middle">'
                     f'{escape(f"{10.0**exponent:g}")}</text>')
    for exponent in range(round(math.log10(y_min)), round(math.log10(y_max)) + 1):
        y = at(x_min, 10.0**exponent)[1]
        parts.append(f'<line x1="{c["left"]}" y1="{y:.1f}" x2="{c["left"] + width}" y2="{y:.1f}" stroke="currentColor" '
                     f'stroke-opacity="0.12"/><text x="{c["left"] - 6}" y="{y + 4:.1f}" text-anchor="end">'
                     f'{escape(fmt.number(10.0**exponent, "FLOP/s"))}</text>')
    parts.append(f'<text x="{c["left"] + width / 2}" y="{c["height"] - 12}" text-anchor="middle">arithmetic intensity '
                 '(FLOPs per byte)</text>')
    if peak and bandwidth:
        ridge = peak / bandwidth
        start = max(x_min, y_min / bandwidth)
        corners = [at(start, bandwidth * start), at(ridge, peak), at(x_max, peak)]
        path = " ".join(f"{'M' if i == 0 else 'L'}{x:.1f},{y:.1f}" for i, (x, y) in enumerate(corners))
        parts.append(f'<path id="roofline-roof" d="{path}" fill="none" stroke="#b91c1c" stroke-width="2"/>')
        label_x, label_y = at(ridge, peak)
        parts.append(f'<text x="{label_x + 6:.1f}" y="{label_y - 6:.1f}">{escape(fmt.number(peak, "FLOP/s"))} · '
                     f'{escape(fmt.number(bandwidth, "B/s"))} · ridge {ridge:.3g} FLOPs/B</text>')
    for point in points:
        record = point["record"]
        key = escape(f"{record.get('path')}#{record.get('call_index')}")
        x, y = at(point["x"], point["roof"])
        parts.append(f'<g class="roofline-point" data-layer="{key}"><title>{_tooltip(record)}</title>'
                     f'<circle class="roof" cx="{x:.2f}" cy="{y:.2f}" r="4.5" fill="none" stroke="#3b82f6" stroke-width="1.5"/>')
        if point["achieved"]:
            ax, ay = at(point["x"], point["achieved"])
            colour = "#f59e0b" if point["cached"] else "#15803d"
            parts.append(f'<line x1="{x:.2f}" y1="{y:.2f}" x2="{ax:.2f}" y2="{ay:.2f}" stroke="{colour}" stroke-opacity="0.5"/>'
                         f'<circle class="achieved{" cached" if point["cached"] else ""}" cx="{ax:.2f}" cy="{ay:.2f}" r="3.5" '
                         f'fill="{colour}"/>')
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def roofline_section(roofline: dict[str, Any]) -> str:
    """The roofline section of an analysis page: the ceilings, the chart, the forward's and the
    step's rooflines and the calls with the longest rooflines."""
    ceilings = roofline["ceilings"]
    records = roofline.get("layers") or []
    points = _points(records)
    forward = roofline.get("forward") or {}
    body = ["<h2>Roofline</h2>", key_values([
        ("device", escape(f"{ceilings.get('name')} ({ceilings.get('hardware')}, {ceilings.get('source')})")),
        ("peak", escape(fmt.metric_text(ceilings.get("peak_flops"), "FLOP/s") + f" {ceilings.get('dtype')}")),
        ("bandwidth", escape(fmt.metric_text(ceilings.get("bandwidth"), "B/s"))),
        ("forward, layer by layer", escape(fmt.metric_text(forward.get("roofline_time"), "seconds"))),
        ("bound", plain(forward.get("bound"))),
    ])]
    if points:
        body.append(_svg(roofline, points))
        legend = ("Hollow circles: each call at its roofline; filled dots: the FLOP/s it achieved when timed "
                  "(amber: faster than its memory roofline, its data in cache).")
        body.append(f'<p class="sub">{escape(legend)}')
        if len(points) < len(records):
            body.append(escape(f" {len(records) - len(points)} call(s) with no FLOPs or no bytes are not drawn."))
        body.append("</p>")
    ranked = sorted(records, key=lambda r: -(r["roofline_time"].get("known_value") or 0.0))[:10]
    rows = [[f"<code>{escape(r.get('path'))}</code>", escape(r.get("type")), escape(fmt.metric_text(r.get("flops"), "FLOPs")),
             escape(fmt.byte_size(r.get("bytes") or 0)), escape("-" if r.get("intensity") is None else f"{r['intensity']:.3g}"),
             escape(fmt.metric_text(r.get("roofline_time"), "seconds")), plain(r.get("bound"))] for r in ranked]
    body.append(table(["call", "type", "FLOPs", "bytes", "FLOPs/B", "roofline", "bound"], rows, "roofline"))
    return "".join(body)

"""The HTML of a training plan (``plan_training``): the table of policies, and for each one its
memory against the batch -- the estimates as bars stacked by category, the fitted peak as a line,
the budget as a line across -- drawn as inline SVG (no script: the page stays offline), then its
fits with their held-out errors, its FLOPs and, when sharded, its communication per step."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.engine.reporting.html.page import context_section, diagnostics_section, escape, key_values, num, table

__all__ = ["plan_section", "render_plan"]

#: A colour per category of the stacked bars (unknown ones grey).
COLOURS = {"parameters": "#4e79a7", "gathered_parameters": "#76b7b2", "buffers": "#bab0ac", "gradients": "#f28e2b",
           "gathered_gradients": "#ffbe7d", "gradient_buckets": "#9c755f", "optimizer_state": "#e15759",
           "activations": "#59a14f", "temporaries": "#edc948", "communication_buffers": "#b07aa1", "inputs": "#ff9da7"}
_WIDTH, _HEIGHT, _LEFT, _BOTTOM, _TOP = 520, 240, 64, 28, 12


def _curve_value(curve: Mapping[str, Any], x: float) -> float:
    return sum(c * x ** p for c, p in zip(curve.get("coefficients") or (), curve.get("powers") or ()))


def _largest_text(record: Mapping[str, Any] | None) -> str:
    if not record:
        return "—"
    metric = record.get("largest") or {}
    if metric.get("status") == "unavailable":
        return "?"
    if record.get("limit") == "does_not_fit":
        return "none fits"
    return ("" if metric.get("status") == "complete" else fmt.LOWER_BOUND) + f"{metric.get('known_value'):,}"


def chart(batch: Mapping[str, Any], budget: int) -> str:
    """The SVG of one policy's memory against the batch (see the module docstring)."""
    points = [p for p in batch.get("estimates") or () if isinstance(p.get("peak_bytes"), int)]
    if not points:
        return ""
    top_x = max(p["batch"] for p in points)
    top_y = max(budget, *(p["peak_bytes"] for p in points)) * 1.08
    plot_w, plot_h = _WIDTH - _LEFT - 8, _HEIGHT - _BOTTOM - _TOP

    def sx(x: float) -> float:
        return _LEFT + plot_w * x / top_x

    def sy(y: float) -> float:
        return _TOP + plot_h * (1 - y / top_y)

    bar = max(2.0, min(14.0, plot_w / (3 * len(points))))
    parts = [f'<svg class="plan-chart" role="img" width="{_WIDTH}" height="{_HEIGHT}" viewBox="0 0 {_WIDTH} {_HEIGHT}" '
             f'xmlns="http://www.w3.org/2000/svg"><title>memory against the batch</title>']
    for fraction in (0, 0.5, 1):
        y = top_y * fraction / 1.08
        parts.append(f'<text x="{_LEFT - 4}" y="{sy(y) + 4:.1f}" text-anchor="end" font-size="10">{escape(fmt.byte_size(y))}</text>')
    for point in points:
        base = 0
        for name, size in (point.get("by_category") or {}).items():
            if size <= 0:
                continue
            parts.append(f'<rect class="category {escape(name)}" x="{sx(point["batch"]) - bar / 2:.1f}" '
                         f'y="{sy(base + size):.1f}" width="{bar:.1f}" height="{sy(base) - sy(base + size):.2f}" '
                         f'fill="{COLOURS.get(name, "#999")}"><title>{escape(name)}: {escape(fmt.byte_size(size))} at batch '
                         f'{point["batch"]}</title></rect>')
            base += size
        parts.append(f'<text x="{sx(point["batch"]):.1f}" y="{_HEIGHT - _BOTTOM + 14}" text-anchor="middle" '
                     f'font-size="10">{point["batch"]}</text>')
    phase = (batch.get("at_largest") or batch.get("smallest") or {}).get("peak_phase")
    curve = ((batch.get("fit") or {}).get("memory") or {}).get("phases", {}).get(phase)
    if curve:
        xs = [top_x * i / 20 for i in range(21)]
        line = " ".join(f"{sx(x):.1f},{sy(min(top_y, max(0.0, _curve_value(curve, x)))):.1f}" for x in xs)
        parts.append(f'<polyline class="fit" points="{line}" fill="none" stroke="#333" stroke-dasharray="4 3"/>')
    parts.append(f'<line class="budget" x1="{_LEFT}" x2="{_WIDTH - 8}" y1="{sy(budget):.1f}" y2="{sy(budget):.1f}" '
                 f'stroke="#c00" stroke-width="1.5"><title>budget {escape(fmt.byte_size(budget))}</title></line>')
    parts.append(f'<text x="{_WIDTH - 10}" y="{sy(budget) - 4:.1f}" text-anchor="end" font-size="10" fill="#c00">'
                 f'budget {escape(fmt.byte_size(budget))}</text>')
    parts.append(f'<line x1="{_LEFT}" x2="{_LEFT}" y1="{_TOP}" y2="{_HEIGHT - _BOTTOM}" stroke="#888"/>'
                 f'<line x1="{_LEFT}" x2="{_WIDTH - 8}" y1="{_HEIGHT - _BOTTOM}" y2="{_HEIGHT - _BOTTOM}" stroke="#888"/>')
    legend = " ".join(f'<span class="swatch" style="background:{COLOURS.get(name, "#999")}"></span>{escape(name)}'
                      for name in dict.fromkeys(n for p in points for n, s in (p.get("by_category") or {}).items() if s > 0))
    return "".join(parts) + "</svg>" + f'<p class="legend">{legend}; dashed: the fitted peak; red: the budget.</p>'


def _policy_detail(policy: Mapping[str, Any], budget: int) -> str:
    name = policy["policy"]["name"]
    body = [f'<section class="plan-policy"><h3>{escape(name)}</h3>',
            f"<p><code>{escape(policy.get('method', ''))}</code></p>"]
    if policy.get("reason"):
        body.append(f"<p>{escape(policy['reason'])}</p>")
    for axis in ("batch", "sequence"):
        record = policy.get(axis)
        if not record:
            continue
        fit = record.get("fit") or {}
        pairs = [(f"largest {axis}", escape(_largest_text(record)))]
        pairs += [("fit", escape(text)) for text in fit.get("texts") or ()]
        pairs += [(f"{kind} fit at {check['size']:,} (not fitted on)", escape(f"{100 * check['relative_error']:+.2f} %"))
                  for kind, check in (fit.get("held_out") or {}).items()]
        body.append(f"<h4>{escape(axis)}</h4>" + key_values(pairs))
        if axis == "batch":
            body.append(chart(record, budget))
    sharding = policy.get("sharding")
    if sharding:
        volume = sharding.get("communication") or {}
        body.append(key_values([("global batch", escape(sharding.get("global_batch"))),
                                *((f"{k.removesuffix('_bytes').replace('_', '-')} per step", escape(fmt.byte_size(v)))
                                  for k, v in volume.items() if v)]))
    return "".join(body) + "</section>"


def _estimates(count: Any) -> str:
    return f"{count} estimate" + ("" if count == 1 else "s")


def plan_section(report: Mapping[str, Any]) -> str:
    """The plan as a section of a page: the table of policies, then each policy's chart and fits."""
    budget = report.get("budget") or {}
    rows = []
    for policy in report.get("policies") or ():
        batch = policy.get("batch") or {}
        point = batch.get("at_largest") or batch.get("smallest") or {}
        largest = batch.get("largest_category") or {}
        rows.append([escape(policy["policy"]["name"]), num(escape(_largest_text(batch))),
                     num(escape(_largest_text(policy.get("sequence")))),
                     num(escape(fmt.byte_size(point["peak_bytes"]) if point else "—")),
                     escape(f"{largest.get('category', '—')} {fmt.byte_size(largest['bytes'])}" if largest else "—"),
                     num(escape(fmt.metric_text(batch.get("training_flops"), "FLOPs"))), escape(policy.get("status"))])
    named = f" ({budget['device']})" if budget.get("device") else ""
    body = ['<section id="plan"><h2>Training plan</h2>',
            f"<p>Budget {escape(fmt.byte_size(budget.get('bytes', 0)))} per device{escape(named)}, held against the "
            f"{escape(report.get('compared', ''))}; {escape(_estimates(report.get('estimates', 0)))}.</p>",
            table(["policy", "max batch", "max length at batch 1", "peak", "largest", "FLOPs/step per device", "status"],
                  rows, "plan")]
    body += [_policy_detail(policy, int(budget.get("bytes", 0))) for policy in report.get("policies") or ()]
    body += [diagnostics_section(report.get("diagnostics"), "Plan diagnostics"), "</section>"]
    return "".join(body)


def render_plan(report: dict[str, Any]) -> tuple[str, str, str]:
    """Title, escaped subtitle and body of a plan's page."""
    budget = report.get("budget") or {}
    subtitle = escape(f"budget {fmt.byte_size(budget.get('bytes', 0))} per device · {len(report.get('policies') or ())} policies")
    return "Training plan", subtitle, plan_section(report) + context_section(report.get("context"))

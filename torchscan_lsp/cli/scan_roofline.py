"""``scan --roofline``: each target's roofline as a table (one row per leaf call: FLOPs, bytes,
intensity, roofline time, bound and, with ``--layer-latency``, the measured latency, the FLOP/s
achieved and the fraction of the roofline), then the forward's and the training step's lines, in
the words of :mod:`torchscan_lsp.session.roofline`."""

from __future__ import annotations

from typing import Any

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.contract.metrics import metric_value
from torchscan_lsp.session.roofline import ceilings_text, forward_text, percent, roofline_of, step_lines

__all__ = ["COLUMNS", "roofline_lines"]

#: The table's columns.
COLUMNS = ("Layer", "Type", "FLOPs", "Bytes", "FLOPs/B", "Roofline", "Bound", "Measured", "Achieved", "Of roofline")


def _measured_cells(measured: dict[str, Any] | None) -> list[str]:
    if not measured:
        return ["-", "-", "-"]
    latency = fmt.metric_text(measured.get("latency"), "seconds")
    achieved = fmt.number(measured["achieved_flops"], "FLOP/s") if measured.get("achieved_flops") else "-"
    if measured.get("above_compute_peak"):
        share = "above peak"
    elif measured.get("cache_resident"):
        share = "in cache"
    else:
        share = percent(measured["fraction_of_roofline"]) if measured.get("fraction_of_roofline") is not None else "-"
    return [latency, achieved, share]


def _row(record: dict[str, Any]) -> list[str]:
    intensity = record.get("intensity")
    return [fmt.layer_name(record.get("path"), ""), str(record.get("type")),
            fmt.metric_text(record.get("flops"), "FLOPs"), fmt.byte_size(record.get("bytes") or 0),
            "-" if intensity is None else f"{intensity:.3g}", fmt.metric_text(record.get("roofline_time"), "seconds"),
            record.get("bound") or "-", *_measured_cells(record.get("measured"))]


def roofline_lines(measurements: dict[str, Any]) -> list[str]:
    """The roofline table and lines of a result's measurements (``[]`` without a roofline)."""
    roofline = roofline_of(measurements)
    if roofline is None:
        return []
    records = roofline.get("layers") or []
    shown = len(COLUMNS) if any(r.get("measured") for r in records) else len(COLUMNS) - 3  # no latency, no columns
    rows = [list(COLUMNS[:shown]), *(_row(r)[:shown] for r in records)]
    widths = [max(len(row[i]) for row in rows) for i in range(shown)]
    numeric = set(range(2, shown)) - {6}
    text = [f"Roofline on {ceilings_text(roofline['ceilings'])}"]
    for index, row in enumerate(rows):
        cells = [cell.rjust(widths[i]) if i in numeric and index else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        text.append("  ".join(cells).rstrip())
    text.append(forward_text(roofline))
    text += step_lines(roofline)
    reason = (roofline.get("measured") or {}).get("reason")
    if reason:
        text.append(f"Not compared with the measured latency: {reason}")
    for diagnostic in roofline.get("diagnostics") or []:
        text.append(f"{diagnostic.get('severity')}: {diagnostic.get('message')}")
    if metric_value((roofline.get("forward") or {}).get("roofline_time")) is None:
        text.append("The forward has no roofline: no call's FLOPs or bytes were known")
    return text

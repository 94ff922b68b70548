"""The text table that ``summary`` prints, built only from an :class:`AnalysisReport`.

By default it is the reference's table (its ``Param #`` counts a layer's parameters and buffer
elements together, its columns are capped in width). ``scan`` asks for its own layout
(``buffers=True, cut=False``): ``Param #`` counts parameters only, so that the rows add up to
``Total params``, a ``Buffers`` column beside it counts the buffer elements, and no cell is ever cut.
"""

from __future__ import annotations

import copy
from typing import Any

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.contract.format import unit_scale
from torchscan_lsp.contract.metrics import is_lower_bound, metric_value

__all__ = [
    "HEADERS",
    "MAX_WIDTHS",
    "BUFFERS_HEADER",
    "format_name",
    "wrap_string",
    "unit_scale",
    "format_s",
    "format_line_str",
    "format_info",
    "shown_layers",
    "aggregate_info",
]

HEADERS = (
    "Layer",
    "Type",
    "Output Shape",
    "Param #",
    "Trainable",
    "Receptive field",
    "Effective stride",
    "Effective padding",
)
MAX_WIDTHS = (27, 20, 25, 15, 9, 15, 16, 17)
BUFFERS_HEADER = "Buffers"
"""The column ``buffers=True`` adds after ``Param #``."""
_BUFFERS_AT = 4
_BUFFERS_WIDTH = 15
_SEPARATOR = "    "
_TOTAL_LINES = (
    ("module_flops", "Module-formula forward FLOPs", "FLOPs"),
    ("macs", "Module-formula forward MACs", "MACs"),
    ("dmas", "Module-formula forward DMAs", "DMAs"),
    ("operator_flops", "Operator forward FLOPs", "FLOPs"),
    ("operator_macs", "Operator forward MACs", "MACs"),
)
"""The totals lines, each labelled with its method (docs/metrics.md: the two methods stay side by
side, never merged); the operator lines only when the report has those totals."""
_OPERATOR_TOTALS = ("operator_flops", "operator_macs")
_CUT = "…"
_CONVENTIONS = ("(both MAC counts are complete; the module formulas count some per-element work as MACs too, "
                "BatchNorm's and average pooling's: docs/formulas.md#conventions)")


def _differ_complete(module: dict[str, Any] | None, operator: dict[str, Any] | None) -> bool:
    """Whether both methods counted MACs completely and got different numbers (a convention, not a gap)."""
    return (bool(module) and bool(operator) and module.get("status") == "complete"
            and operator.get("status") == "complete" and module.get("value") != operator.get("value"))


def format_name(name: str, depth: int = 0) -> str:
    """Tree-formatted layer name: ``name``, ``├─name``, then ``|    `` per extra level and ``└─name``."""
    if depth == 0:
        return name
    if depth == 1:
        return f"├─{name}"
    return f"{'|    ' * (depth - 1)}└─{name}"


def wrap_string(s: str, max_len: int, delimiter: str = ".", wrap: str = "[...]", mode: str | None = "end") -> str:
    """Shorten ``s`` to ``max_len`` characters, cutting its end or its middle (keeping the last part)."""
    if mode is None or len(s) <= max_len:
        return s
    if mode == "end":
        return s[: max_len - len(wrap)] + wrap
    if mode == "mid":
        tail = s.split(delimiter)[-1]
        return s[: max_len - len(wrap + delimiter + tail)] + wrap + delimiter + tail
    raise ValueError(f"mode must be 'end', 'mid' or None, got {mode!r}.")


def format_s(f_string: str, min_w: int | None = None, max_w: int | None = None) -> str:
    """Left-justify to ``min_w`` and truncate to ``max_w`` (each when it is an int)."""
    if isinstance(min_w, int):
        f_string = f"{f_string:<{min_w}}"
    if isinstance(max_w, int):
        f_string = f_string[:max_w]
    return f_string


def _rf_text(layer: dict[str, Any], name: str) -> str:
    """A cumulative receptive-field cell: the value, ``≥N`` for a lower bound, ``?`` when unknown.

    Fractional values (strides and paddings after a transposed convolution) keep two decimals.
    """
    metric = layer.get("metrics", {}).get(name)
    value = metric_value(metric)
    if value is None:
        return fmt.UNKNOWN
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        text = f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"
    else:
        text = str(value)
    return fmt.LOWER_BOUND.strip() + text if is_lower_bound(metric) else text


def _cells(layer: dict[str, Any], buffers: bool = False) -> list[str]:
    """A layer's cells. ``Param #`` is its parameters plus its buffer elements (the reference's
    rule, BatchNorm2d(4): 8 + 9 = 17), or with ``buffers`` its parameters alone (8), the buffer
    elements (4 + 4 running statistics, 1 batch counter = 9) in a cell of their own after it."""
    params = layer.get("parameters", {})
    buffer_elements = int(layer.get("buffers", {}).get("elements", 0))
    trainable = int(params.get("trainable", 0))
    frozen = int(params.get("frozen", 0))
    count = trainable + frozen + (0 if buffers else buffer_elements)
    if trainable + frozen == 0:
        train_text = "-"
    else:
        train_text = str(trainable > 0)
    cells = [
        format_name(layer.get("name", ""), layer.get("depth", 0)),
        str(layer.get("type", "")),
        fmt.shape_text(layer.get("output")),
        f"{count:,}",
        train_text,
        _rf_text(layer, "receptive_field"),
        _rf_text(layer, "effective_stride"),
        _rf_text(layer, "effective_padding"),
    ]
    if buffers:
        cells.insert(_BUFFERS_AT, f"{buffer_elements:,}")
    return cells


def _headers(buffers: bool) -> list[str]:
    headers = list(HEADERS)
    if buffers:
        headers.insert(_BUFFERS_AT, BUFFERS_HEADER)
    return headers


def _max_widths(buffers: bool) -> list[int]:
    widths = list(MAX_WIDTHS)
    if buffers:
        widths.insert(_BUFFERS_AT, _BUFFERS_WIDTH)
    return widths


def _ncols(receptive_field: bool, effective_rf_stats: bool, buffers: bool = False) -> int:
    if receptive_field and effective_rf_stats:
        count = 8
    else:
        count = 6 if receptive_field else 5
    return count + (1 if buffers else 0)


def format_line_str(
    layer: dict[str, Any],
    col_w: list[int] | tuple[int, ...] | None = None,
    wrap_mode: str | None = "mid",
    receptive_field: bool = False,
    effective_rf_stats: bool = False,
    buffers: bool = False,
) -> list[str]:
    """The cells of one layer row, each left-justified and truncated to its column width.

    A layer name wider than its column is never cut silently: it keeps its start and its last
    path part, with ``…`` where the middle was (``wrap_mode="end"``: its start, then ``…``);
    :func:`format_info` widens the column so that no name is cut at all. ``buffers``: the
    layout with a ``Buffers`` column (see :func:`_cells`); ``col_w`` then has a width for it.
    """
    widths = list(col_w) if col_w is not None else _max_widths(buffers)
    cells = _cells(layer, buffers)
    cells[0] = _cut_name(cells[0], widths[0], wrap_mode)
    cells[2] = wrap_string(cells[2], widths[2], mode="end")
    ncols = _ncols(receptive_field, effective_rf_stats, buffers)
    return [format_s(cell, widths[i], widths[i]) for i, cell in enumerate(cells[:ncols])]


def _cut_name(name: str, width: int, wrap_mode: str | None) -> str:
    if len(name) <= width:
        return name
    if wrap_mode == "mid" and "." in name:
        tail = "." + name.rsplit(".", 1)[1]
        if len(tail) + 2 <= width:
            return name[: width - len(tail) - 1] + _CUT + tail
    return name[: width - 1] + _CUT


def _total_text(label: str, metric: dict[str, Any] | None, unit: str) -> str:
    value = metric_value(metric)
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{label}: unavailable"
    # the reference's words: "known" marks a lower bound here
    return f"{label}: {'known ' if is_lower_bound(metric) else ''}{fmt.fixed(value, unit)}"


def _value(totals: dict[str, Any], name: str) -> int:
    return int(metric_value(totals.get(name)) or 0)


def shown_layers(layers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The layer records as the table shows them: one row per record, nested under the nearest
    ancestor that has a row.

    A container that is never called itself (``nn.ModuleList``, ``nn.ModuleDict``) has no record,
    so its children are named from that ancestor (``blocks.0`` under the root, not ``0`` under
    whichever sibling came before) and indented one level below it. Records are copied, never
    changed; one without a ``path`` keeps its ``name`` and ``depth``.
    """
    paths = {layer.get("path") for layer in layers if isinstance(layer.get("path"), str)}
    depths: dict[str, int] = {}

    def placed(path: str) -> tuple[str, int]:
        """``path``'s name relative to its nearest shown ancestor, and its row depth."""
        parts = path.split(".")
        for cut in range(len(parts) - 1, -1, -1):
            ancestor = ".".join(parts[:cut])
            if ancestor in paths:
                return ".".join(parts[cut:]), depth(ancestor) + 1
        return path, len(parts)

    def depth(path: str) -> int:
        if path not in depths:
            depths[path] = 0 if path == "" else placed(path)[1]
        return depths[path]

    shown = []
    for layer in layers:
        path = layer.get("path")
        if isinstance(path, str) and path:
            name, row_depth = placed(path)
            layer = {**layer, "name": name, "depth": row_depth}
        shown.append(layer)
    return shown


def format_info(
    module_info: dict[str, Any],
    wrap_mode: str | None = "mid",
    receptive_field: bool = False,
    effective_rf_stats: bool = False,
    diagnostics_footer: bool = True,
    *,
    buffers: bool = False,
    cut: bool = True,
) -> str:
    """Render a report (as returned by ``crawl_module`` or ``aggregate_info``) as the summary table.

    Each layer record is one row (see :func:`shown_layers` for the names and indentation). With
    ``diagnostics_footer`` the table ends by counting the report's diagnostics; a caller that lists
    them itself (``scan``: :mod:`torchscan_lsp.cli.scan_findings`) turns it off. ``buffers``:
    ``Param #`` counts parameters only and a ``Buffers`` column counts buffer elements, so the
    ``Param #`` cells add up to ``Total params`` (a ``Total buffers`` line follows it); ``cut=False``:
    every column is as wide as its widest cell (the Layer column always is), so nothing is cut.
    """
    layers = shown_layers(module_info.get("layers", []))
    ncols = _ncols(receptive_field, effective_rf_stats, buffers)
    headers = _headers(buffers)
    caps = _max_widths(buffers)
    widths = [len(header) for header in headers]
    for layer in layers:
        cells = _cells(layer, buffers)
        widths = [max(width, len(cell)) for width, cell in zip(widths, cells)]
    if cut:  # the Layer column fits its longest name: a name is never cut
        widths = [widths[0], *(min(width, cap) for width, cap in zip(widths[1:], caps[1:]))]
    widths = widths[:ncols]
    line_length = sum(widths) + len(_SEPARATOR) * (ncols - 1)

    lines = ["_" * line_length]
    lines.append(_SEPARATOR.join(format_s(header, widths[i]) for i, header in enumerate(headers[:ncols])))
    lines.append("=" * line_length)
    full_widths = widths + caps[ncols:]
    for layer in layers:
        row = format_line_str(layer, full_widths, wrap_mode, receptive_field, effective_rf_stats, buffers)
        lines.append(_SEPARATOR.join(row))
    lines.append("=" * line_length)

    totals = module_info.get("totals", {})
    trainable = _value(totals, "trainable_parameters")
    frozen = _value(totals, "frozen_parameters")
    total_params = _value(totals, "parameters") if "parameters" in totals else trainable + frozen
    lines.append(f"Trainable params: {trainable:,}")
    lines.append(f"Non-trainable params: {frozen:,}")
    lines.append(f"Total params: {total_params:,}")
    if buffers:
        lines.append(f"Total buffers: {_value(totals, 'buffer_elements'):,}")
    lines.append("-" * line_length)
    size = (_value(totals, "parameter_bytes") + _value(totals, "buffer_bytes")) / 1024**2
    lines.append(f"Model size (params + buffers): {size:.2f} Mb")
    lines.append("-" * line_length)
    for name, label, unit in _TOTAL_LINES:
        if name in totals or name not in _OPERATOR_TOTALS:
            lines.append(_total_text(label, totals.get(name), unit))
    if _differ_complete(totals.get("macs"), totals.get("operator_macs")):
        lines.append(_CONVENTIONS)
    diagnostics = module_info.get("diagnostics") or []
    if diagnostics and diagnostics_footer:
        lines.append(f"Diagnostics: {len(diagnostics)} (inspect report['diagnostics'])")
    lines.append("_" * line_length)
    return "\n".join(lines)


def aggregate_info(info: dict[str, Any], max_depth: int) -> dict[str, Any]:
    """A deep copy of the report keeping only layers with ``depth <= max_depth``."""
    if max_depth < 0:
        raise ValueError(f"max_depth must be non-negative, got {max_depth}.")
    layers = info.get("layers", [])
    if layers and not any(layer.get("depth") == max_depth for layer in layers):
        raise ValueError("The `max_depth` argument cannot be higher than module depth.")
    result = copy.deepcopy(info)
    result["layers"] = [layer for layer in result.get("layers", []) if layer.get("depth", 0) <= max_depth]
    return result

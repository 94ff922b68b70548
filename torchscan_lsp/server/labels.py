"""Short text for numbers, metric objects and shapes, as the editor shows them.

Every measured number arrives as a metric object ``{status, value, known_value, unit, ...}``
(see the report schema). A ``complete`` metric prints its value, a ``partial`` one its known
lower bound behind ``≥``, an ``unavailable`` one a ``?``: a lower bound is never shown as exact and
a missing number never as zero.

Numbers are scaled by powers of 1000 (k, M, G, T, P) and printed with three significant digits:
``224``, ``11.7M``, ``1.82 G``, ``389 k``.
"""

from __future__ import annotations

from typing import Any, Mapping

_PREFIXES = ("", "k", "M", "G", "T", "P", "E")
LOWER_BOUND = "≥ "
UNKNOWN = "?"
SEPARATOR = " · "
ARROW = "→ "


def scale(value: float) -> tuple[str, str]:
    """Split ``value`` into a three-significant-digit mantissa text and an SI prefix.

    ``388800`` → ``("389", "k")``; ``11_689_512`` → ``("11.7", "M")``; ``224`` → ``("224", "")``;
    ``0.5`` → ``("0.50", "")``. Integers below 1000 print exactly.
    """
    magnitude = abs(value)
    index = 0
    while magnitude >= 999.5 and index < len(_PREFIXES) - 1:
        magnitude /= 1000.0
        value /= 1000.0
        index += 1
    if index == 0 and float(value).is_integer():
        return str(int(value)), ""
    if magnitude >= 99.95:
        text = f"{value:.0f}"
    elif magnitude >= 9.995:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return text, _PREFIXES[index]


def number(value: float, unit: str = "") -> str:
    """Format ``value`` with its unit: ``number(388800, "FLOPs")`` → ``"389 kFLOPs"``.

    A unit is separated by a space (``"1.82 GMACs"``, ``"224 FLOPs"``); without a unit the prefix
    sticks to the number (``"11.7M"``).
    """
    text, prefix = scale(value)
    if not unit:
        return text + prefix
    return f"{text} {prefix}{unit}"


def metric_value(metric: Mapping[str, Any] | None) -> float | None:
    """The number a metric object vouches for: ``value`` when complete, ``known_value`` (a lower
    bound) when partial, ``None`` when unavailable or absent."""
    if not metric:
        return None
    if metric.get("status") == "complete":
        return metric.get("value")
    if metric.get("status") == "partial":
        return metric.get("known_value")
    return None


def metric(metric_obj: Mapping[str, Any] | None, unit: str | None = None) -> str:
    """Format a metric object: ``"3.64 GFLOPs"``, ``"≥ 1.20 GFLOPs"`` (partial) or ``"? FLOPs"``.

    ``unit`` overrides the metric's own unit word (e.g. ``"params"`` for an ``elements`` count).
    """
    metric_obj = metric_obj or {}
    unit = unit if unit is not None else str(metric_obj.get("unit", ""))
    value = metric_value(metric_obj)
    if value is None:
        return f"{UNKNOWN} {unit}".strip()
    text = params(value) if unit == "params" else number(value, unit)
    return LOWER_BOUND + text if metric_obj.get("status") == "partial" else text


def params(count: float) -> str:
    """Format a parameter count: ``224`` → ``"224 params"``, ``11_689_512`` → ``"11.7M params"``."""
    return f"{number(count)} params"


def totals_label(totals: Mapping[str, Mapping[str, Any]]) -> str:
    """The one-line summary of a report's totals: ``"11.7M params · 1.82 GMACs · 3.64 GFLOPs"``.

    FLOPs are the module-formula FLOPs (the same method as the MACs); operator FLOPs, counted by
    another method, are shown beside them in hovers, never merged into this line.
    """
    return SEPARATOR.join(
        [
            metric(totals.get("parameters"), "params"),
            metric(totals.get("macs"), "MACs"),
            metric(totals.get("module_flops"), "FLOPs"),
        ]
    )


def shape(meta: Mapping[str, Any] | None, limit: int = 60) -> str:
    """Text of a value's metadata as the report stores it (never its values).

    A tensor prints as its shape tuple ``(1, 64, 56, 56)``; a tuple or list prints its items;
    a mapping its values in braces; anything else its kind word (``none``, ``scalar``, ...).
    Text longer than ``limit`` characters is cut with ``…``.
    """
    text = _shape_text(meta or {"kind": "none"})
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shape_text(meta: Mapping[str, Any]) -> str:
    kind = meta.get("kind")
    if kind == "tensor":
        dims = [str(d) for d in meta.get("shape", [])]
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
    if kind == "tuple":
        return "(" + ", ".join(_shape_text(item) for item in meta.get("items", [])) + ")"
    if kind == "list":
        return "[" + ", ".join(_shape_text(item) for item in meta.get("items", [])) + "]"
    if kind == "mapping":
        return "{" + ", ".join(_shape_text(e.get("value", {})) for e in meta.get("items", [])) + "}"
    return str(kind or "object")


def shape_label(meta: Mapping[str, Any] | None) -> str:
    """The inlay-hint text for a call's output: ``"→ (1, 64, 56, 56)"``."""
    return ARROW + shape(meta, limit=40)


def byte_size(count: float) -> str:
    """Format a byte count in binary units: ``896`` → ``"896 B"``, ``3 * 1024**2`` → ``"3.0 MiB"``."""
    if abs(count) < 1024:
        return f"{int(count)} B"
    value = float(count)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if abs(value) < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"


def duration(seconds: float) -> str:
    """Format a time in seconds with three significant digits: ``0.000412`` → ``"412 µs"``,
    ``0.0123`` → ``"12.3 ms"``, ``2.5`` → ``"2.50 s"``."""
    factor, unit = next(((f, u) for f, u in ((1.0, "s"), (1e-3, "ms")) if abs(seconds) >= f * 0.9995), (1e-6, "µs"))
    value = seconds / factor
    text = f"{value:.0f}" if abs(value) >= 99.95 else f"{value:.1f}" if abs(value) >= 9.995 else f"{value:.2f}"
    return f"{text} {unit}"


def latency(metric_obj: Mapping[str, Any] | None) -> str:
    """Format a latency metric (seconds): ``"12.3 ms"``, ``"≥ 12.3 ms"`` (partial) or ``"? s"``."""
    value = metric_value(metric_obj)
    if value is None:
        return f"{UNKNOWN} s"
    return (LOWER_BOUND if (metric_obj or {}).get("status") == "partial" else "") + duration(value)

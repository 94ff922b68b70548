"""Numbers, metric objects, bytes, durations and value shapes as text: the one formatter.

The inlay hints, hovers and code lenses, the summary table, the HTML report and ``scan``'s
measurement lines all print through these functions, so one number reads the same everywhere.

* A ``complete`` metric prints its value, a ``partial`` one its known lower bound behind
  :data:`LOWER_BOUND` (``≥ ``), an ``unavailable`` one :data:`UNKNOWN` (``?``): a lower bound is
  never shown as exact and a missing number never as zero.
* Counts are scaled by powers of 1000 with three significant digits (``389 kFLOPs``, ``11.7M``);
  bytes by powers of 1024 (``3.00 MiB``); durations in s, ms, µs or ns (``12.3 ms``). :func:`exact`
  prints a number in full with thousands separators (``388,800``), for evidence such as the HTML.
* The summary table keeps the reference's fixed two decimals (:func:`unit_scale`, :func:`fixed`).
* :func:`layer_name` names a module path for a reader: ``'encoder.0'``, or ``the root module``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from torchscan_lsp.contract.metrics import is_lower_bound, metric_value

__all__ = [
    "LOWER_BOUND",
    "UNKNOWN",
    "SEPARATOR",
    "ARROW",
    "scale",
    "number",
    "unit_scale",
    "fixed",
    "exact",
    "params",
    "byte_size",
    "duration",
    "metric_text",
    "change",
    "relative_change",
    "shape_text",
    "ROOT_MODULE",
    "layer_name",
]

LOWER_BOUND = "≥ "
UNKNOWN = "?"
SEPARATOR = " · "
ARROW = "→ "

_PREFIXES = ("", "k", "M", "G", "T", "P", "E")
_BINARY = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_TIMES = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


def _significant(value: float) -> str:
    """``value`` (already scaled below 1000) with three significant digits."""
    magnitude = abs(value)
    if magnitude >= 99.95:
        return f"{value:.0f}"
    if magnitude >= 9.995:
        return f"{value:.1f}"
    return f"{value:.2f}"


def scale(value: float) -> tuple[str, str]:
    """Split ``value`` into a three-significant-digit mantissa text and an SI prefix.

    ``388800`` → ``("389", "k")``; ``11_689_512`` → ``("11.7", "M")``; ``224`` → ``("224", "")``;
    ``0.5`` → ``("0.50", "")``; ``999_999`` → ``("1.00", "M")``. Integers below 1000 print exactly.
    """
    index = 0
    while abs(value) >= 999.5 and index < len(_PREFIXES) - 1:
        value /= 1000.0
        index += 1
    if index == 0 and float(value).is_integer():
        return str(int(value)), ""
    return _significant(value), _PREFIXES[index]


def number(value: float, unit: str = "") -> str:
    """``value`` with its unit: ``number(388800, "FLOPs")`` → ``"389 kFLOPs"``.

    A unit is separated by a space (``"1.82 GMACs"``, ``"224 FLOPs"``); without a unit the prefix
    sticks to the number (``"11.7M"``).
    """
    text, prefix = scale(value)
    return f"{text} {prefix}{unit}" if unit else text + prefix


def unit_scale(val: float) -> tuple[float, str]:
    """The reference table's scaling: ``val`` divided by the largest of T, G, M, k that keeps its
    integer part positive (``val // 1e12 > 0`` first), with that prefix; else ``val`` itself."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if val // factor > 0:
            return val / factor, prefix
    return val, ""


def fixed(value: float, unit: str) -> str:
    """The reference table's number: :func:`unit_scale` with two decimals (``"388.80 kFLOPs"``)."""
    scaled, prefix = unit_scale(value)
    return f"{scaled:.2f} {prefix}{unit}"


def exact(value: Any) -> str:
    """A number in full: ints with thousands separators (``388,800``), integral floats with one
    decimal below a million (``2.0``), others with six significant digits; anything else as text."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if value.is_integer() and abs(value) < 1e15:
            return f"{value:,.1f}" if abs(value) < 1e6 else f"{value:,.0f}"
        return f"{value:.6g}"
    return str(value)


def params(count: float) -> str:
    """A parameter count: ``224`` → ``"224 params"``, ``11_689_512`` → ``"11.7M params"``."""
    return f"{number(count)} params"


def byte_size(count: float) -> str:
    """A byte count in binary units with three significant digits: ``896`` → ``"896 B"``,
    ``3 * 1024**2`` → ``"3.00 MiB"``, ``1536`` → ``"1.50 KiB"``."""
    value, index = float(count), 0
    while abs(value) >= 1023.5 and index < len(_BINARY) - 1:
        value /= 1024.0
        index += 1
    if index == 0:
        return f"{int(count)} B"
    return f"{_significant(value)} {_BINARY[index]}"


def duration(seconds: float) -> str:
    """A time in seconds with three significant digits: ``0.000412`` → ``"412 µs"``, ``0.0123``
    → ``"12.3 ms"``, ``2.5`` → ``"2.50 s"``, ``4e-7`` → ``"400 ns"``, ``0`` → ``"0 s"``."""
    if seconds == 0:
        return "0 s"
    for factor, unit in _TIMES:
        if abs(seconds) >= factor * 0.9995 or factor == _TIMES[-1][0]:
            return f"{_significant(seconds / factor)} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def _value_text(value: Any, unit: str, full: bool) -> str:
    if unit == "bytes":
        return f"{exact(value)} B ({byte_size(value)})" if full and abs(value) >= 1024 else (
            f"{exact(value)} B" if full else byte_size(value))
    if unit == "seconds":
        return duration(value)
    if unit == "params":
        return f"{exact(value)} params" if full else params(value)
    if full:
        return f"{exact(value)} {unit}".rstrip()
    return number(value, unit)


def metric_text(metric: Mapping[str, Any] | None, unit: str | None = None, *, full: bool = False) -> str:
    """A metric object as text: ``"3.64 GFLOPs"``, ``"≥ 1.20 GFLOPs"`` (partial) or ``"? FLOPs"``.

    ``unit`` overrides the metric's own unit word: ``"params"`` for an ``elements`` count, say.
    ``bytes`` print in binary units and ``seconds`` as a duration. With ``full`` the number is
    printed in full (:func:`exact`; bytes also scaled in parentheses), as evidence documents do.
    """
    metric = metric if isinstance(metric, Mapping) else {}
    unit = unit if unit is not None else str(metric.get("unit") or "")
    value = metric_value(metric)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return f"{UNKNOWN} {'s' if unit == 'seconds' else unit}".strip()
    text = _value_text(value, unit, full)
    return LOWER_BOUND + text if is_lower_bound(metric) else text


def change(value: float, unit: str = "", *, full: bool = True) -> str:
    """A difference (after − before) with its sign and unit, as :func:`metric_text` prints the
    number: ``change(112, "elements")`` → ``"+112 elements"``, ``change(-388800, "FLOPs",
    full=False)`` → ``"−389 kFLOPs"``, ``change(0.0021, "seconds")`` → ``"+2.10 ms"``,
    ``change(0, "MACs")`` → ``"0 MACs"`` (no sign: nothing changed)."""
    if value == 0:
        return _value_text(0, unit, full)
    return ("+" if value > 0 else "−") + _value_text(abs(value), unit, full)


def relative_change(before: float, after: float) -> str:
    """The change from ``before`` to ``after`` as a share of ``before``: ``(388800, 583200)`` →
    ``"+50 %"``, ``(1000, 1004)`` → ``"+0.4 %"``, ``(1000, 1000.2)`` → ``"+<0.1 %"`` (a change is never
    printed as none), ``(100, 0)`` → ``"−100 %"``; ``""`` when nothing changed. Three significant
    digits at most, as every count here; ``before`` must not be 0 (a change from nothing is no share:
    print it with :func:`change`)."""
    if after == before:
        return ""
    share = 100.0 * (after - before) / before
    sign = "+" if share > 0 else "−"
    size = abs(share)
    if size < 0.05:
        return f"{sign}<0.1 %"
    text = f"{size:.0f}" if size >= 9.95 else f"{size:.1f}"
    return f"{sign}{text} %"


def shape_text(meta: Mapping[str, Any] | None, *, detail: bool = False, keys: bool = False, limit: int | None = None) -> str:
    """Text of a value's metadata as reports store it (never its values).

    A tensor prints as its shape tuple ``(1, 64, 56, 56)`` (``(1,)`` for one dimension); a tuple
    as ``(a, b)`` (``(a,)`` for one item), a list as ``[a, b]``, a mapping as its values in braces ``{a, b}``; anything else
    as its kind word (``none``, ``scalar``, ``object``, ``pending``). With ``detail``, tensors add
    their dtype (``(2, 3) torch.float32``), mappings their keys (``{ids: (1, 6)}``) and scalars and
    objects their type name; with ``keys`` (the editor's labels), mappings their keys alone
    (``{logits: (1, 8, 100), loss: none}``: values alone read like a set). Text longer than
    ``limit`` characters is cut with ``…``.
    """
    text = _shape(meta if isinstance(meta, Mapping) else None, detail, keys or detail)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def _shape(meta: Mapping[str, Any] | None, detail: bool, keys: bool) -> str:
    if meta is None:
        return "object"
    kind = meta.get("kind")
    if kind == "tensor":
        shape = meta.get("shape")
        if not isinstance(shape, list):
            text = "tensor"
        else:
            text = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
        return f"{text} {meta.get('dtype', '')}".rstrip() if detail else text
    if kind in ("tuple", "list"):
        parts = [_shape(item, detail, keys) for item in meta.get("items", ())]
        if kind == "list":
            return "[" + ", ".join(parts) + "]"
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"  # a tuple of one, as Python writes it
    if kind == "mapping":
        entries = []
        for entry in meta.get("items", ()):
            value = _shape(entry.get("value"), detail, keys)
            entries.append(f"{entry.get('key', '…')}: {value}" if keys else value)
        return "{" + ", ".join(entries) + "}"
    if detail and kind in ("scalar", "object"):
        return str(meta.get("type", kind))
    return str(kind or "object")


ROOT_MODULE = "the root module"
"""How text for a reader names the module at path ``""`` (the model itself)."""


def layer_name(path: Any, quote: str = "'") -> str:
    """A module path as a reader sees it: ``'encoder.0'`` (between ``quote``), or
    :data:`ROOT_MODULE` for the root's empty path (never ``''``)."""
    return f"{quote}{path}{quote}" if path else ROOT_MODULE

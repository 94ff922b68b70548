"""The two ceilings a roofline is drawn under, from either source: a device of the table
(:mod:`torchscan_lsp.contract.devices`, its vendor's dense peak and bandwidth) or this machine's
measurement (:func:`torchscan_lsp.engine.measuring.ceilings.measure_ceilings`).

A ceilings record is ``{"name", "source": "table" | "measured", "device", "hardware", "dtype",
"peak_flops"`` (a metric in FLOP/s, ``unavailable`` when the table has no rate for the dtype),
``"bandwidth"`` (a metric in bytes/s), ``"ridge_point"`` (FLOPs per byte where the two meet:
peak / bandwidth, ``None`` without a peak), ``"reference"`` (the vendor document, or the
measurement's spread and conditions) and ``"last_level_cache_bytes"}``.
"""

from __future__ import annotations

from typing import Any

from torchscan_lsp.contract.devices import dtype_key, lookup_device
from torchscan_lsp.contract.metrics import metric_result, metric_value

__all__ = ["METHOD_TABLE", "THIS_MACHINE", "table_ceilings", "measured_ceilings", "ELEMENT_BYTES", "element_bytes"]

#: The method label of a table figure.
METHOD_TABLE = "torchscan_lsp.contract.devices (vendor dense peak)"
#: What the measured ceilings are called.
THIS_MACHINE = "this machine"

#: Bytes per element of each ``torch`` dtype (``torch.<name>.itemsize``).
ELEMENT_BYTES = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "complex128": 16, "complex64": 8, "complex32": 4,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "float8_e8m0fnu": 1,
}


def element_bytes(dtype: Any) -> int | None:
    """Bytes per element of a dtype name (``"torch.float32"`` or ``"float32"``), ``None`` if unknown."""
    return ELEMENT_BYTES.get(str(dtype).removeprefix("torch.")) if dtype is not None else None


def _ridge(peak: dict[str, Any], bandwidth: dict[str, Any]) -> float | None:
    flops, rate = metric_value(peak), metric_value(bandwidth)
    return flops / rate if flops is not None and rate else None


def table_ceilings(name: str, dtype: str, *, option: str = "roofline") -> dict[str, Any]:
    """The ceilings of the table's device ``name`` for ``dtype`` (a ``torch`` dtype name).

    Raises:
        ValueError: no device of that name; the message starts with ``option`` and names the
            closest device (:func:`~torchscan_lsp.contract.devices.lookup_device`).
    """
    device = lookup_device(name, option=option)
    key = dtype_key(dtype) or str(dtype).removeprefix("torch.")
    rate = device.peak(key)
    peak = (metric_result(status="complete", value=rate, unit="FLOP/s", scope="device", method=METHOD_TABLE)
            if rate is not None else metric_result(status="unavailable", unit="FLOP/s", scope="device", method=METHOD_TABLE))
    bandwidth = metric_result(status="complete", value=device.bandwidth, unit="bytes/s", scope="device", method=METHOD_TABLE)
    return {"name": device.name, "source": "table", "device": None, "hardware": device.name, "dtype": key,
            "peak_flops": peak, "bandwidth": bandwidth, "ridge_point": _ridge(peak, bandwidth),
            "reference": {"document": device.source, "dense": True,
                          "missing": None if rate is not None else f"{device.source} gives no {key} rate"},
            "last_level_cache_bytes": None}


def measured_ceilings(report: dict[str, Any]) -> dict[str, Any]:
    """The ceilings of a ``measure_ceilings`` report (its fastest blocks; the spread goes along in
    ``reference``)."""
    def spread(ceiling: dict[str, Any]) -> dict[str, Any]:
        return {key: ceiling.get(key) for key in ("low", "median", "q1", "q3", "blocks")}

    peak, bandwidth = report["peak_flops"], report["bandwidth"]
    keys = ("status", "value", "known_value", "unit", "scope", "method")
    return {"name": THIS_MACHINE, "source": "measured", "device": report["device"], "hardware": report["device_name"],
            "dtype": report["dtype"], "peak_flops": {k: peak[k] for k in keys},
            "bandwidth": {k: bandwidth[k] for k in keys}, "ridge_point": _ridge(peak, bandwidth),
            "reference": {"threads": report.get("threads"), "peak_flops": spread(peak), "bandwidth": spread(bandwidth),
                          "bandwidth_pattern": bandwidth.get("pattern"), "measured_at": report.get("measured_at"),
                          "cached": report.get("cached")},
            "last_level_cache_bytes": (report.get("last_level_cache") or {}).get("bytes")}

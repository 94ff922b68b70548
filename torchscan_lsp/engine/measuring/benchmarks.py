"""Checked comparison of two latency reports (docs/measurement.md).

:func:`compare_benchmarks` first checks that the two :class:`~torchscan_lsp.engine.measuring.latency.BenchmarkReport`
dicts measured comparable things — same device, device model and CPU count, thread settings, input
shapes and dtypes, work units and their name, PyTorch, Python and package versions, and timing
options — and refuses (``ValueError`` naming every mismatch) or,
with ``on_mismatch="flag"``, compares anyway and lists each mismatch in the result. It never
compares silently.

It then reports the difference and ratio of the median latencies with a noise estimate taken from
the block IQRs. The rule is the one behind notched box plots (McGill, Tukey and Larsen, 1978): the
median of ``n`` block averages with interquartile range ``IQR`` is uncertain by about
``1.57 * IQR / sqrt(n)``; two medians differ beyond noise when their difference exceeds the sum of
both uncertainties::

    noise = 1.57 * (IQR_before / sqrt(n_before) + IQR_after / sqrt(n_after))

A change no larger than ``noise`` is reported as ``"within_noise"``, never as faster or slower.
Inputs are never mutated; the result holds deep copies.
"""

from __future__ import annotations

import copy
import math
from typing import Any, TypedDict

from torchscan_lsp.engine.report import SCHEMA_VERSION

__all__ = ["BenchmarkComparison", "compare_benchmarks", "NOTCH_FACTOR"]

#: The notched-box-plot constant: half-width of a median's ~95% comparison interval in IQR/sqrt(n).
NOTCH_FACTOR = 1.57

def _input_shapes(report: dict[str, Any]) -> Any:
    """Shapes of the supplied input tensors in order (``None`` when no inputs were supplied)."""
    inputs = report.get("inputs")
    if not isinstance(inputs, dict) or not inputs.get("supplied"):
        return None
    shapes: list[Any] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("kind") == "tensor":
                shapes.append(node.get("shape"))
                return
            for item in node.get("items", ()):
                walk(item.get("value") if node.get("kind") == "mapping" else item)

    walk(inputs.get("value"))
    return shapes


#: (field name in the result, how to read it from a report: a key path or a function), in the
#: order mismatches are listed. Batch 32 against batch 1 differs in ``input_shapes`` and
#: ``work_units``; a package, Python or PyTorch upgrade, or another machine, differs in its field.
_CHECKS: tuple[tuple[str, Any], ...] = (
    ("device", ("device",)),
    ("device_name", ("device_name",)),
    ("cpu_count", ("hardware", "cpu_count")),
    ("threads", ("threads",)),
    ("interop_threads", ("interop_threads",)),
    ("input_shapes", _input_shapes),
    ("dtype", ("inputs", "dtypes")),
    ("work_units", ("work_units",)),
    ("work_unit", ("work_unit",)),
    ("torch_version", ("context", "torch_version")),
    ("python_version", ("context", "python_version")),
    ("package_version", ("context", "torchscan_version")),
    ("warmup", ("timing", "warmup")),
    ("min_run_time", ("timing", "min_run_time")),
    ("min_repeats", ("timing", "min_repeats")),
)


class BenchmarkComparison(TypedDict):
    """What :func:`compare_benchmarks` returns (``kind`` ``"benchmark_comparison"``).

    ``latency``: ``{"status", "before", "after", "difference", "ratio", "noise", "change"}`` (seconds;
    ``difference = after - before``; ``ratio = after / before``; ``change`` one of ``"slower"``,
    ``"faster"``, ``"within_noise"``, or ``None`` when a latency is not complete).
    ``throughput`` and ``first_call_latency``: ``{"status", "before", "after", "difference", "ratio",
    "unit"}``. ``comparable`` is ``False`` exactly when ``mismatches`` is non-empty (only possible
    with ``on_mismatch="flag"``).
    """

    schema_version: int
    kind: str
    comparable: bool
    mismatches: list[dict[str, Any]]
    latency: dict[str, Any]
    throughput: dict[str, Any]
    first_call_latency: dict[str, Any]
    before: dict[str, Any]
    after: dict[str, Any]


_MISSING = object()


def _read(report: dict[str, Any], path: Any) -> Any:
    if callable(path):
        return path(report)
    node: Any = report
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return _MISSING if path[0] != "inputs" else None
        node = node[key]
    return node


def _check_report(report: Any, side: str) -> None:
    if not isinstance(report, dict):
        raise TypeError(f"{side} must be a latency report dict (from measure_latency), got {type(report).__name__}.")
    if report.get("kind") != "latency":
        raise ValueError(
            f"{side} is not a latency report from measure_latency (kind={report.get('kind')!r}); "
            "compare analysis reports with compare_reports."
        )
    version = report.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ValueError(f"{side} has unsupported schema version: {version!r}")
    totals = report.get("totals")
    if not isinstance(totals, dict) or "latency" not in totals:
        raise ValueError(f"{side} has no totals.latency metric.")


def _shown(value: Any) -> str:
    return "missing" if value is _MISSING else repr(value)


def _numbers(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any]:
    complete = all(isinstance(m, dict) and m.get("status") == "complete" for m in (before, after))
    if not complete:
        return {"status": "unavailable", "before": None, "after": None, "difference": None, "ratio": None}
    b, a = before["value"], after["value"]  # type: ignore[index]
    return {
        "status": "complete",
        "before": b,
        "after": a,
        "difference": a - b,
        "ratio": a / b if b else None,
    }


def _noise(report: dict[str, Any]) -> float | None:
    iqr = report["totals"].get("latency_iqr")
    blocks = report.get("block_durations")
    if not isinstance(iqr, dict) or iqr.get("status") != "complete" or not blocks:
        return None
    return NOTCH_FACTOR * iqr["value"] / math.sqrt(len(blocks))


def compare_benchmarks(
    before: dict[str, Any], after: dict[str, Any], *, on_mismatch: str = "raise"
) -> BenchmarkComparison:
    """Compare two latency reports after checking that they are comparable.

    Args:
        before, after: reports from :func:`~torchscan_lsp.engine.measuring.latency.measure_latency`.
        on_mismatch: ``"raise"`` (default) refuses incomparable reports with a ``ValueError`` that
            names each mismatch; ``"flag"`` compares anyway and lists each mismatch in
            ``result["mismatches"]`` (and sets ``comparable`` to ``False``).

    Raises:
        TypeError: a report is not a dict.
        ValueError: a report is not a schema-1 latency report, ``on_mismatch`` is unknown, or
            (with ``"raise"``) the reports are not comparable.
    """
    if on_mismatch not in ("raise", "flag"):
        raise ValueError(f"on_mismatch must be 'raise' or 'flag', got {on_mismatch!r}.")
    _check_report(before, "before")
    _check_report(after, "after")
    mismatches, details = [], []
    for field, path in _CHECKS:
        old, new = _read(before, path), _read(after, path)
        if old != new or old is _MISSING:
            details.append(f"{field} differs ({_shown(old)} != {_shown(new)})")
            mismatches.append(
                {
                    "field": field,
                    "before": None if old is _MISSING else copy.deepcopy(old),
                    "after": None if new is _MISSING else copy.deepcopy(new),
                }
            )
    if mismatches and on_mismatch == "raise":
        raise ValueError(
            f"latency reports are not comparable: {'; '.join(details)}. Re-measure under the same "
            "conditions, or pass on_mismatch='flag' to compare them with each mismatch flagged."
        )

    latency = _numbers(before["totals"].get("latency"), after["totals"].get("latency"))
    noise_before, noise_after = _noise(before), _noise(after)
    if latency["status"] == "complete" and noise_before is not None and noise_after is not None:
        noise = noise_before + noise_after
        difference = latency["difference"]
        change = "within_noise" if abs(difference) <= noise else ("slower" if difference > 0 else "faster")
        latency.update({"noise": noise, "change": change})
    else:
        latency.update({"noise": None, "change": None})
    latency["unit"] = "seconds"
    throughput = _numbers(before["totals"].get("throughput"), after["totals"].get("throughput"))
    throughput["unit"] = (after["totals"].get("throughput") or {}).get("unit")
    first_call = _numbers(before["totals"].get("first_call_latency"), after["totals"].get("first_call_latency"))
    first_call["unit"] = "seconds"
    result: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kind": "benchmark_comparison",
        "comparable": not mismatches,
        "mismatches": mismatches,
        "latency": latency,
        "throughput": throughput,
        "first_call_latency": first_call,
        "before": copy.deepcopy(before),
        "after": copy.deepcopy(after),
    }
    return result  # type: ignore[return-value]

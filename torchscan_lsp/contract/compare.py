"""Compare two analysis reports: per-total and per-layer-call differences, after compatibility checks.

Only analysis reports (``crawl_module``, ``summary``) compare here: a latency, per-layer latency,
benchmark-comparison, peak-memory or FLOP report is refused with a ``ValueError`` that names what it
is and where it compares (``compare_benchmarks`` for latency). Reports written by different torch or
package versions still compare, with each difference listed in ``mismatches``: their numbers may
differ for that reason alone.
"""

from __future__ import annotations

import copy
from typing import Any, TypedDict

from torchscan_lsp.contract.metrics import MetricResult
from torchscan_lsp.contract.report import SCHEMA_VERSION

__all__ = ["MetricDiff", "LayerDiff", "ReportDiff", "compare_reports", "metric_diff"]


class MetricDiff(TypedDict):
    """``delta`` is ``after.value - before.value``, only when both sides are complete."""

    status: str
    delta: Any
    before: MetricResult | None
    after: MetricResult | None


class LayerDiff(TypedDict):
    """One layer call in a comparison: its ``(path, call_index)`` and its ``metrics`` (for an added or
    removed call, a copy of its metric objects; for a changed one, a :class:`MetricDiff` per metric
    that differs)."""

    path: str
    call_index: int
    metrics: dict[str, Any]


class ReportDiff(TypedDict):
    """``mismatches`` *(ours)*: ``[{"field", "before", "after"}]`` for each context field that differs
    (``torch_version``, ``torchscan_version``, ``package``); empty when both agree or neither says."""

    schema_version: int
    totals: dict[str, MetricDiff]
    layers: dict[str, list[LayerDiff]]
    mismatches: list[dict[str, Any]]


#: Context fields whose difference is flagged: the numbers may differ because of them alone.
_FLAGGED_CONTEXT = ("torch_version", "torchscan_version", "package")

#: Reports that are not analysis reports, by ``kind``, with where they compare.
_OTHER_KINDS = {
    "latency": "a latency report from measure_latency; compare latency reports with compare_benchmarks",
    "layer_latency": "a per-layer latency report from measure_layer_latency, which has no comparison of its own",
    "benchmark_comparison": "already a comparison of latency reports (compare_benchmarks)",
}


_CHECKED_FIELDS = ("unit", "scope", "method")


def _check_compatible(name: str, before: dict[str, Any], after: dict[str, Any]) -> None:
    for field in _CHECKED_FIELDS:
        if before.get(field) != after.get(field):
            raise ValueError(
                f"metric '{name}' has incompatible {field}: {before.get(field)!r} != {after.get(field)!r}"
            )


def metric_diff(name: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> MetricDiff:
    """Difference of one metric between two reports (either side may be missing)."""
    if before is not None and after is not None:
        _check_compatible(name, before, after)
    statuses = {side.get("status") for side in (before, after) if side is not None}
    if before is None or after is None or "unavailable" in statuses:
        status = "unavailable"
    elif "partial" in statuses:
        status = "partial"
    else:
        status = "complete"
    delta = None
    if status == "complete":
        try:
            delta = after["value"] - before["value"]  # type: ignore[index]
        except TypeError:  # a non-numeric value cannot be subtracted
            delta = None
    return {
        "status": status,
        "delta": delta,
        "before": copy.deepcopy(before),
        "after": copy.deepcopy(after),
    }


def _index(report: dict[str, Any], side: str) -> dict[tuple[str, int], dict[str, Any]]:
    index: dict[tuple[str, int], dict[str, Any]] = {}
    for layer in report.get("layers") or []:
        key = (layer["path"], layer["call_index"])
        if key in index:
            raise ValueError(f"{side} contains duplicate layer call {key!r}")
        index[key] = layer
    return index


def _snapshot(key: tuple[str, int], layer: dict[str, Any]) -> LayerDiff:
    return {"path": key[0], "call_index": key[1], "metrics": copy.deepcopy(layer.get("metrics") or {})}


def _check_versions(before: dict[str, Any], after: dict[str, Any]) -> int:
    version_before = before.get("schema_version")
    version_after = after.get("schema_version")
    if version_before != version_after:
        raise ValueError(f"schema versions differ: {version_before} != {version_after}")
    if version_before != SCHEMA_VERSION:
        raise ValueError(f"unsupported schema version: {version_before}")
    return version_before


def compare_reports(before: dict[str, Any], after: dict[str, Any]) -> ReportDiff:
    """Compare two analysis reports of the same schema version.

    Reads ``schema_version``, ``totals`` and ``layers`` (plus ``kind`` and ``context`` for its
    checks); never mutates its inputs. Layer calls
    are matched by ``(path, call_index)``. Every total appears in the result, changed or not; a
    layer call appears in ``changed`` only when one of its metrics differs.

    Raises:
        TypeError: ``before`` or ``after`` is not a dict (an analysis report).
        ValueError: a latency, per-layer latency, benchmark-comparison, peak-memory or FLOP report;
            different or unsupported schema versions, a duplicate layer call, or a metric
            whose unit, scope or method differs between the reports (e.g. a structure-mode report
            against a full one).
    """
    for name, report in (("before", before), ("after", after)):
        if not isinstance(report, dict):
            raise TypeError(
                f"compare_reports() argument '{name}' must be an analysis report (a dict), "
                f"not {type(report).__name__}"
            )
        _check_kind(report, name)
    version = _check_versions(before, after)
    index_before = _index(before, "before")
    index_after = _index(after, "after")

    totals_before = before.get("totals") or {}
    totals_after = after.get("totals") or {}
    totals = {
        name: metric_diff(name, totals_before.get(name), totals_after.get(name))
        for name in sorted(set(totals_before) | set(totals_after))
    }

    added = [_snapshot(key, index_after[key]) for key in sorted(set(index_after) - set(index_before))]
    removed = [_snapshot(key, index_before[key]) for key in sorted(set(index_before) - set(index_after))]
    changed: list[LayerDiff] = []
    for key in sorted(set(index_before) & set(index_after)):
        metrics_before = index_before[key].get("metrics") or {}
        metrics_after = index_after[key].get("metrics") or {}
        diffs = {}
        for name in sorted(set(metrics_before) | set(metrics_after)):
            first, second = metrics_before.get(name), metrics_after.get(name)
            if first != second:
                diffs[name] = metric_diff(name, first, second)
        if diffs:
            changed.append({"path": key[0], "call_index": key[1], "metrics": diffs})

    return {
        "schema_version": version,
        "totals": totals,
        "layers": {"added": added, "removed": removed, "changed": changed},
        "mismatches": _context_mismatches(before, after),
    }


def _check_kind(report: dict[str, Any], side: str) -> None:
    """Refuse a report that is not an analysis report, saying what it is."""
    what = _OTHER_KINDS.get(report.get("kind"))  # type: ignore[arg-type]
    if what is None and "peak_bytes" in report and "delta_bytes" in report:
        what = "a peak-memory report from measure_peak_memory, whose byte fields compare directly"
    if what is None and "by_operator" in report and "total" in report and "layers" not in report:
        what = "a FLOP report from measure_flops; an analysis report carries one as operator_flops"
    if what is not None:
        raise ValueError(f"compare_reports() argument '{side}' is {what}, not an analysis report (crawl_module).")


def _context_mismatches(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    contexts = [report.get("context") for report in (before, after)]
    if not any(isinstance(context, dict) for context in contexts):
        return []
    old, new = (context if isinstance(context, dict) else {} for context in contexts)
    return [
        {"field": field, "before": old.get(field), "after": new.get(field)}
        for field in _FLAGGED_CONTEXT
        if old.get(field) != new.get(field)
    ]

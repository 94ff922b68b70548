"""Compare two analysis reports: per-total and per-layer-call differences, after compatibility checks."""

from __future__ import annotations

import copy
from typing import Any, TypedDict

from torchscan_lsp.engine.report import SCHEMA_VERSION, MetricResult

__all__ = ["MetricDiff", "LayerDiff", "ReportDiff", "compare_reports", "metric_diff"]


class MetricDiff(TypedDict):
    """``delta`` is ``after.value - before.value``, only when both sides are complete."""

    status: str
    delta: Any
    before: MetricResult | None
    after: MetricResult | None


class LayerDiff(TypedDict):
    path: str
    call_index: int
    metrics: dict[str, Any]


class ReportDiff(TypedDict):
    schema_version: int
    totals: dict[str, MetricDiff]
    layers: dict[str, list[LayerDiff]]


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

    Reads only ``schema_version``, ``totals`` and ``layers``; never mutates its inputs. Layer calls
    are matched by ``(path, call_index)``. Every total appears in the result, changed or not; a
    layer call appears in ``changed`` only when one of its metrics differs.

    Raises:
        TypeError: ``before`` or ``after`` is not a dict (an analysis report).
        ValueError: different or unsupported schema versions, a duplicate layer call, or a metric
            whose unit, scope or method differs between the reports (e.g. a structure-mode report
            against a full one).
    """
    for name, report in (("before", before), ("after", after)):
        if not isinstance(report, dict):
            raise TypeError(
                f"compare_reports() argument '{name}' must be an analysis report (a dict), "
                f"not {type(report).__name__}"
            )
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
    }

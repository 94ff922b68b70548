"""The per-layer latency report: each call's median, spread and share, the totals, and what is not to
be trusted as exact.

Two rules decide what is flagged unstable (each with a diagnostic, never silently):

* **a layer's spread** — its blocks' interquartile range is more than :data:`UNSTABLE_SPREAD` of its
  median: the middle half of its block averages spans more than a quarter of the value quoted, so
  the median is an estimate, not a measurement to compare at face value (a loaded machine, a
  descheduled thread, frequency scaling);
* **the layer sum against the model** — the sum of the layers' medians is more than
  :data:`SUM_TOLERANCE` times the model's latency, or less than its inverse: replaying a call alone
  adds its own call overhead and runs with other caches, and work outside leaf calls (a container's
  own ``forward``) is in the model's latency only; past that factor, per-layer numbers are only
  relative to one another.

Each layer's ``latency_share`` is its median over the model's median (``unavailable`` without a
model latency); the shares need not sum to 1, for the reasons above.
"""

from __future__ import annotations

import copy
from typing import Any, TypedDict

import torch
from torch import nn

from torchscan_lsp.engine.measuring.shared import device_name_of, hardware_info, measurement_context, synchronizer
from torchscan_lsp.engine.measuring.latency import BenchmarkReport, MeasurementHeader
from torchscan_lsp.engine.report import (
    METHOD_NOT_REQUESTED,
    SCHEMA_VERSION,
    Diagnostic,
    MetricResult,
    make_diagnostic,
    metric_result,
)
from torchscan_lsp.engine.measuring.timing import METHOD_TIMER, UNIT_SECONDS, unavailable_seconds

__all__ = ["LayerLatency", "LayerLatencyReport", "UNSTABLE_SPREAD", "SUM_TOLERANCE", "UNIT_SHARE", "build_report"]

#: A layer whose IQR exceeds this fraction of its median is flagged unstable.
UNSTABLE_SPREAD = 0.25
#: The layer sum is flagged when it is more than this factor above, or below, the model's latency.
SUM_TOLERANCE = 1.5
#: Unit of ``latency_share``: a layer's median as a fraction of the model's median.
UNIT_SHARE = "fraction of model latency"


class LayerLatency(TypedDict, total=False):
    """One replayed module call of ``measure_layer_latency``.

    ``unit`` is ``"leaf"`` for a metric-leaf call, or ``"container"`` for a container whose call ran
    none of its children (a fused fast path), replayed whole. ``metrics``: ``latency`` (median of
    the block averages, seconds), ``latency_iqr`` (their interquartile range, seconds) and
    ``latency_share`` (``latency`` over the model's median). ``relative_spread`` is
    ``latency_iqr / latency`` and ``stable`` whether it is within :data:`UNSTABLE_SPREAD` (both
    ``None`` when the call was not timed). ``timing`` is ``None`` when the call was not timed, and
    ``reason`` says why.
    """

    path: str
    call_index: int
    type: str
    unit: str
    input: dict[str, Any]
    metrics: dict[str, MetricResult]
    relative_spread: float | None
    stable: bool | None
    timing: dict[str, Any] | None
    reason: str


class LayerLatencyReport(MeasurementHeader):
    """What ``measure_layer_latency`` returns (``kind`` ``"layer_latency"``).

    ``totals``: ``layer_latency_sum`` (scope ``forward``), ``model_latency`` and
    ``model_latency_iqr`` (scope ``workload``). ``consistency``: ``{"layer_sum_over_model": ratio
    or None, "tolerance": SUM_TOLERANCE, "within_tolerance": bool or None}``. ``stable``: no layer
    and no sum was flagged (``None`` when nothing was timed).
    """

    timing: dict[str, Any]
    inputs: dict[str, Any]
    layers: list[LayerLatency]
    totals: dict[str, MetricResult]
    consistency: dict[str, Any]
    stable: bool | None
    model: BenchmarkReport | None
    diagnostics: list[Diagnostic]


def _share(layer: LayerLatency, model_value: float | None) -> MetricResult:
    latency = layer["metrics"]["latency"]
    if latency["status"] != "complete" or not model_value:
        return metric_result(status="unavailable", unit=UNIT_SHARE, scope="module_call", method=METHOD_TIMER)
    return metric_result(status="complete", value=latency["value"] / model_value, unit=UNIT_SHARE,
                         scope="module_call", method=METHOD_TIMER)


def _layer_sum(layers: list[LayerLatency]) -> MetricResult:
    measured = [layer["metrics"]["latency"]["value"] for layer in layers if layer["metrics"]["latency"]["status"] == "complete"]
    common = {"unit": UNIT_SECONDS, "scope": "forward", "method": METHOD_TIMER}
    if layers and len(measured) == len(layers):
        return metric_result(status="complete", value=sum(measured), **common)
    if measured:
        return metric_result(status="partial", known_value=sum(measured), **common)
    return unavailable_seconds("forward")


def _model_totals(model_report: BenchmarkReport | None, include_model: bool) -> tuple[MetricResult, MetricResult]:
    if model_report is not None:
        totals = model_report["totals"]
        return copy.deepcopy(totals["latency"]), copy.deepcopy(totals["latency_iqr"])
    method = METHOD_TIMER if include_model else METHOD_NOT_REQUESTED
    return unavailable_seconds("workload", method), unavailable_seconds("workload", method)


def _consistency(layer_sum: MetricResult, model_latency: MetricResult) -> dict[str, Any]:
    ratio = None
    if layer_sum["status"] == "complete" and model_latency["status"] == "complete" and model_latency["value"]:
        ratio = layer_sum["value"] / model_latency["value"]
    within = None if ratio is None else 1 / SUM_TOLERANCE <= ratio <= SUM_TOLERANCE
    return {"layer_sum_over_model": ratio, "tolerance": SUM_TOLERANCE, "within_tolerance": within}


def _diagnostics(layers: list[LayerLatency], consistency: dict[str, Any], model_reason: str | None) -> list[Diagnostic]:
    diagnostics: list[Diagnostic] = []
    if model_reason is not None:
        diagnostics.append(make_diagnostic("model_latency_unavailable", "latency", model_reason, path=""))
    for layer in layers:
        path = layer["path"]
        if layer["unit"] == "container":
            diagnostics.append(make_diagnostic(
                "container_replayed_whole", "latency",
                f"{layer['type']} ran without calling any of its child modules (a fused fast path), "
                "so it was timed as one unit; its children have no latency of their own", path=path))
        if "reason" in layer:
            diagnostics.append(make_diagnostic("layer_latency_unavailable", "latency", layer["reason"], path=path))
        elif layer["stable"] is False:
            blocks = len(layer["timing"]["block_durations"])  # type: ignore[index]
            diagnostics.append(make_diagnostic(
                "layer_latency_unstable", "latency",
                f"its spread (IQR) is {layer['relative_spread']:.0%} of its median over {blocks} blocks, above "
                f"{UNSTABLE_SPREAD:.0%}: the median is an estimate (a loaded machine, a descheduled thread, "
                "frequency scaling); measure again on a quiet machine", path=path))
    if consistency["within_tolerance"] is False:
        diagnostics.append(make_diagnostic(
            "layer_latency_sum_mismatch", "latency",
            f"the layer latencies sum to {consistency['layer_sum_over_model']:.2f}x the model's latency, outside "
            f"1/{SUM_TOLERANCE:g}..{SUM_TOLERANCE:g}x: replayed alone, each call pays its own overhead and runs "
            "with other caches, and work outside leaf calls is in the model's latency only; read the layers' "
            "latencies as relative to one another, not as parts of the model's", path=""))
    return diagnostics


def build_report(
    model: nn.Module,
    layers: list[LayerLatency],
    model_report: BenchmarkReport | None,
    model_reason: str | None,
    *,
    device_name: str,
    on_meta: bool,
    inputs_meta: dict[str, Any],
    eval_mode: bool,
    timing: dict[str, Any],
    include_model: bool,
) -> LayerLatencyReport:
    """Assemble the report from the measured layers and the model's latency report (see the module
    docstring for shares and the two stability rules)."""
    model_latency, model_iqr = _model_totals(model_report, include_model)
    model_value = model_latency["value"] if model_latency["status"] == "complete" else None
    for layer in layers:
        layer["metrics"]["latency_share"] = _share(layer, model_value)
    layer_sum = _layer_sum(layers)
    consistency = _consistency(layer_sum, model_latency)
    timed = [layer for layer in layers if layer["stable"] is not None]
    stable = None if not timed else all(layer["stable"] for layer in timed) and consistency["within_tolerance"] is not False
    model_type = f"{type(model).__module__}.{type(model).__qualname__}"
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kind": "layer_latency",
        "context": measurement_context(
            method="timeit.Timer blocks of each module call replayed alone, captured with global module hooks",
            cuda_version=None if on_meta else torch.version.cuda,
            model_type=model_type,
            execution_mode="evaluation_no_grad" if eval_mode else "as_is_no_grad",
        ),
        "device": device_name,
        "device_name": "meta" if on_meta else device_name_of(device_name),
        "hardware": hardware_info(),
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "timing": {**timing, "synchronization": "none" if on_meta else synchronizer(device_name)[1]},
        "inputs": inputs_meta,
        "layers": layers,
        "totals": {"layer_latency_sum": layer_sum, "model_latency": model_latency, "model_latency_iqr": model_iqr},
        "consistency": consistency,
        "stable": stable,
        "model": model_report,
        "diagnostics": _diagnostics(layers, consistency, model_reason),
    }
    return report  # type: ignore[return-value]

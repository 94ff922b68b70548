"""Dispatcher counts per module call (spec A.10): ``operator_flops`` and ``operator_macs``.

While a crawl's forward runs, the operator counter adds each operator's FLOPs and MACs to the
innermost active call, and each call adds its totals to its parent when it ends
(:class:`~torchscan_lsp.engine.recording.recorder.Call`), so every call's counts are *inclusive*: its children
and its own work (a residual ``x + y`` in a container's ``forward``, ``F.scaled_dot_product_attention``,
``q @ k.transpose(-2, -1)``). This module turns those counts into metric objects:

* ``operator_flops`` (FLOPs, ``METHOD_FLOP_COUNTER``) and ``operator_macs`` (MACs,
  ``METHOD_OPERATOR_MACS``) on every layer record, scope ``module_call``, and ``operator_macs`` in
  the totals (scope ``workload``, beside the FLOP report's ``operator_flops`` total);
* each is ``complete`` exactly when every operator below the call had a formula or is on the ignore
  list (and, for MACs, every matrix-class operator had a MAC formula); otherwise ``partial``, its
  known value a lower bound, and the record's ``uncounted_operators`` names the operators and their
  calls.

Module formulas (``module_flops``, ``macs``, ``dmas``) are untouched: the two methods stay side by
side, labelled, never merged.
"""

from __future__ import annotations

from typing import Any

from torchscan_lsp.engine.recording.recorder import Call, CallRecorder
from torchscan_lsp.engine.report import (
    METHOD_FLOP_COUNTER,
    METHOD_NOT_REQUESTED,
    METHOD_OPERATOR_MACS,
    MetricResult,
    metric_result,
)

__all__ = ["add_layer_operator_metrics", "operator_macs_total", "not_requested_macs_total"]


def _metric(value: int, complete: bool, unit: str, scope: str, method: str) -> dict[str, Any]:
    if complete:
        return {"status": "complete", "value": value, "known_value": value, "unit": unit, "scope": scope, "method": method}
    return {"status": "partial", "value": None, "known_value": value, "unit": unit, "scope": scope, "method": method}


def _uncounted(call: Call) -> dict[str, dict[str, int]]:
    found: dict[str, dict[str, int]] = {}
    if call.uncounted:
        found["flops"] = dict(sorted(call.uncounted.items()))
    if call.uncounted or call.macs_unknown:
        found["macs"] = dict(sorted({**(call.uncounted or {}), **(call.macs_unknown or {})}.items()))
    return found


def add_layer_operator_metrics(recorder: CallRecorder) -> None:
    """Add ``operator_flops`` and ``operator_macs`` to every record whose call ended, and
    ``uncounted_operators`` (``{"flops": {op: calls}, "macs": {op: calls}}``) where one is partial."""
    layers = recorder.layers
    for call in recorder.ended:
        record = layers[call.layer]  # type: ignore[index]
        metrics = record["metrics"]
        flops_known = not call.uncounted
        metrics["operator_flops"] = _metric(call.flops, flops_known, "FLOPs", "module_call", METHOD_FLOP_COUNTER)
        metrics["operator_macs"] = _metric(
            call.macs, flops_known and not call.macs_unknown, "MACs", "module_call", METHOD_OPERATOR_MACS
        )
        if call.uncounted or call.macs_unknown:
            record["uncounted_operators"] = _uncounted(call)


def operator_macs_total(recorder: CallRecorder) -> MetricResult:
    """The MACs of everything the forward dispatched (the bottom of the call stack holds it all)."""
    everything = recorder.frames[0]
    complete = not everything.uncounted and not everything.macs_unknown
    return _metric(everything.macs, complete, "MACs", "workload", METHOD_OPERATOR_MACS)  # type: ignore[return-value]


def not_requested_macs_total() -> MetricResult:
    """The ``operator_macs`` total of a structure-mode analysis."""
    return metric_result(status="unavailable", unit="MACs", scope="workload", method=METHOD_NOT_REQUESTED)

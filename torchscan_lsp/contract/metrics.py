"""Metric objects and their status rules: the one definition every layer reads numbers through.

Every number a report carries is a :class:`MetricResult` ``{status, value, known_value, unit,
scope, method}``, built by :func:`metric_result`, which enforces the trust contract
(docs/report-schema.md, "Metric objects"):

* ``complete``: ``value`` is the measured number and ``known_value`` repeats it;
* ``partial``: ``value`` is ``None`` and ``known_value`` is a lower bound (never a percentage);
* ``unavailable``: both are ``None``; a number that could not be measured is never reported as 0.

:func:`aggregate` is the one rule for summing metric objects (a forward total over layer calls, a
module's subtree, per-layer latencies), and :func:`metric_value` the one rule for reading the number
a metric vouches for. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypedDict

__all__ = [
    "STATUS_COMPLETE",
    "STATUS_PARTIAL",
    "STATUS_UNAVAILABLE",
    "STATUSES",
    "UNITS",
    "SCOPES",
    "METHOD_HOOK",
    "METHOD_FORWARD_FRAME",
    "METHOD_MODULE_FORMULA",
    "METHOD_PYTORCH",
    "METHOD_FLOP_COUNTER",
    "METHOD_OPERATOR_MACS",
    "METHOD_NOT_REQUESTED",
    "METHODS",
    "Status",
    "MetricResult",
    "metric_result",
    "metric_value",
    "is_lower_bound",
    "aggregate",
    "not_counted",
]

STATUS_COMPLETE = "complete"
STATUS_PARTIAL = "partial"
STATUS_UNAVAILABLE = "unavailable"
#: Every status a metric can have, strongest first.
STATUSES = (STATUS_COMPLETE, STATUS_PARTIAL, STATUS_UNAVAILABLE)

#: Units in use: module calls, floating-point operations, multiply-accumulates, logical element
#: reads and writes, tensor elements, storage bytes, and a training plan's sizes: samples of a
#: batch and tokens of a sequence.
UNITS = ("calls", "FLOPs", "MACs", "DMAs", "elements", "bytes", "samples", "tokens")

#: What a number covers: one module call, the whole forward (sum over module calls), the model's
#: tensors (independent of any call), or everything a workload dispatched.
SCOPES = ("module_call", "forward", "model", "workload")

METHOD_HOOK = "pytorch_hook"
#: A module call found by its ``forward`` frame on the stack (called as ``module.forward(...)``,
#: which runs no hook).
METHOD_FORWARD_FRAME = "forward_frame"
METHOD_MODULE_FORMULA = "torchscan_module_formula"
METHOD_PYTORCH = "pytorch"
#: Operator FLOPs: PyTorch's FlopCounterMode conventions and formulas, with this package's operator
#: formulas for what PyTorch leaves uncounted or counts wrongly; a report whose caller formulas took
#: part appends ``+custom(<operators>)`` (``engine.recording.operators.flop_method``).
METHOD_FLOP_COUNTER = "torch.utils.flop_counter.FlopCounterMode+torchscan_lsp.operator_formulas"
#: Multiply-accumulates of the dispatched matrix, convolution, attention and recurrent operators,
#: from the engine's operator MAC formulas (``operator_formulas.MAC_FORMULAS``).
METHOD_OPERATOR_MACS = "torchscan_operator_macs"
METHOD_NOT_REQUESTED = "not_requested"
#: How a number was obtained.
METHODS = (
    METHOD_HOOK, METHOD_FORWARD_FRAME, METHOD_MODULE_FORMULA, METHOD_PYTORCH, METHOD_FLOP_COUNTER,
    METHOD_OPERATOR_MACS, METHOD_NOT_REQUESTED,
)  # fmt: skip

Status = Literal["complete", "partial", "unavailable"]


class MetricResult(TypedDict):
    """One measured number with its honesty label. All six keys are always present.

    ``value``: the number when ``complete``, else ``None``. ``known_value``: the number when
    ``complete``, a lower bound when ``partial``, ``None`` when ``unavailable``. ``unit``: one of
    :data:`UNITS` (or ``seconds`` for latencies). ``scope``: one of :data:`SCOPES`. ``method``: how
    it was obtained (one of :data:`METHODS`, or a measurement's own label).
    """

    status: Status
    value: Any
    known_value: Any
    unit: str
    scope: str
    method: str


def metric_result(
    *,
    status: str,
    unit: str,
    scope: str,
    method: str,
    value: Any = None,
    known_value: Any = None,
) -> MetricResult:
    """Build a :class:`MetricResult`, enforcing the value rules of its status.

    ``complete`` requires ``value`` and copies it to ``known_value``; ``partial`` requires a
    ``known_value`` lower bound and clears ``value``; ``unavailable`` clears both.

    Raises:
        ValueError: unknown status, a complete metric without value, or a partial one without
            known_value.
    """
    if status == STATUS_COMPLETE:
        if value is None:
            raise ValueError("A complete metric requires a value.")
        known_value = value
    elif status == STATUS_PARTIAL:
        if known_value is None:
            raise ValueError("A partial metric requires a known_value lower bound.")
        value = None
    elif status == STATUS_UNAVAILABLE:
        value = None
        known_value = None
    else:
        raise ValueError(f"status must be 'complete', 'partial', or 'unavailable'. Got {status!r}.")
    return {
        "status": status,  # type: ignore[typeddict-item]
        "value": value,
        "known_value": known_value,
        "unit": unit,
        "scope": scope,
        "method": method,
    }


def metric_value(metric: Mapping[str, Any] | None) -> Any:
    """The number ``metric`` vouches for: ``value`` when complete, ``known_value`` (a lower bound)
    when partial, ``None`` when unavailable, absent or not a metric object."""
    if not isinstance(metric, Mapping):
        return None
    if metric.get("status") == STATUS_COMPLETE:
        return metric.get("value")
    if metric.get("status") == STATUS_PARTIAL:
        return metric.get("known_value")
    return None


def is_lower_bound(metric: Mapping[str, Any] | None) -> bool:
    """Whether the number of ``metric`` is only a lower bound (its status is ``partial``)."""
    return isinstance(metric, Mapping) and metric.get("status") == STATUS_PARTIAL


def not_counted(unit: str, scope: str, method: str) -> MetricResult:
    """The part that stands for work that ran but that no formula counted (an operator in a
    container's own ``forward``, say): an ``unavailable`` metric. Given to :func:`aggregate` among
    the counted parts, it makes the sum a lower bound without adding anything to it."""
    return metric_result(status=STATUS_UNAVAILABLE, unit=unit, scope=scope, method=method)


def aggregate(
    parts: Iterable[Mapping[str, Any] | None],
    *,
    unit: str | None = None,
    scope: str | None = None,
    method: str | None = None,
) -> MetricResult:
    """Sum metric objects: the one rule for totals over layer calls and over a module's subtree.

    * every part ``complete`` → ``complete``, the sum of the values;
    * some part ``partial`` or ``unavailable``, and at least one number known → ``partial``, the
      sum of the known numbers as a lower bound;
    * nothing known (no part at all, or every part unavailable) → ``unavailable``.

    ``None`` parts (a layer without that metric) are skipped. ``unit``, ``scope`` and ``method``
    label the sum; each defaults to the parts' own when they all agree on it.

    Raises:
        ValueError: the parts disagree on their unit or method and none was given (FLOPs of two
            methods are reported side by side, never added), or a label is missing with no part
            to take it from.
    """
    metrics = [part for part in parts if part]
    labels = {"unit": unit, "scope": scope, "method": method}
    for key, given in labels.items():
        if given is not None:
            continue
        found = {str(m.get(key)) for m in metrics if m.get(key) is not None}
        if len(found) != 1:
            what = f"disagree on their {key} ({', '.join(sorted(found))})" if found else f"carry no {key}"
            raise ValueError(f"aggregate: the parts {what}; pass {key}= to say what the sum is.")
        labels[key] = found.pop()
    common = {"unit": labels["unit"], "scope": labels["scope"], "method": labels["method"]}
    if metrics and all(m.get("status") == STATUS_COMPLETE for m in metrics):
        return metric_result(status=STATUS_COMPLETE, value=sum(m["value"] for m in metrics), **common)  # type: ignore[arg-type]
    known = [m["known_value"] for m in metrics if m.get("status") != STATUS_UNAVAILABLE and m.get("known_value") is not None]
    if known:
        return metric_result(status=STATUS_PARTIAL, known_value=sum(known), **common)  # type: ignore[arg-type]
    return metric_result(status=STATUS_UNAVAILABLE, **common)  # type: ignore[arg-type]

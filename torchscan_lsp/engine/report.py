"""The report contract: metric objects, diagnostics, layer and analysis reports (schema version 1).

Every number the engine reports is a :class:`MetricResult` built by :func:`metric_result`, which
enforces the trust contract:

* ``complete``: ``value`` is the measured number and ``known_value`` repeats it;
* ``partial``: ``value`` is ``None`` and ``known_value`` is a lower bound (never a percentage);
* ``unavailable``: both are ``None``; a metric that could not be measured is never reported as 0.

Reports are plain JSON-safe dicts (``json.loads(json.dumps(report)) == report``).
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

__all__ = [
    "SCHEMA_VERSION",
    "STATUSES",
    "UNITS",
    "SCOPES",
    "METHODS",
    "SEVERITIES",
    "STATUS_COMPLETE",
    "STATUS_PARTIAL",
    "STATUS_UNAVAILABLE",
    "METHOD_HOOK",
    "METHOD_MODULE_FORMULA",
    "METHOD_PYTORCH",
    "METHOD_FLOP_COUNTER",
    "METHOD_OPERATOR_MACS",
    "METHOD_NOT_REQUESTED",
    "EXECUTION_MODE",
    "PACKAGE",
    "MetricResult",
    "Diagnostic",
    "LayerReport",
    "AnalysisReport",
    "metric_result",
    "make_diagnostic",
    "IncompleteAnalysisError",
]

#: Version of the wire schema; independent of the package version. Readers reject other versions.
SCHEMA_VERSION = 1

STATUS_COMPLETE = "complete"
STATUS_PARTIAL = "partial"
STATUS_UNAVAILABLE = "unavailable"
#: Every status a metric can have, strongest first.
STATUSES = (STATUS_COMPLETE, STATUS_PARTIAL, STATUS_UNAVAILABLE)

#: Units in use: module calls, floating-point operations, multiply-accumulates, logical element
#: reads and writes, tensor elements and storage bytes.
UNITS = ("calls", "FLOPs", "MACs", "DMAs", "elements", "bytes")

#: What a number covers: one module call, the whole forward (sum over module calls), the model's
#: tensors (independent of any call), or everything a workload dispatched.
SCOPES = ("module_call", "forward", "model", "workload")

METHOD_HOOK = "pytorch_hook"
METHOD_MODULE_FORMULA = "torchscan_module_formula"
METHOD_PYTORCH = "pytorch"
METHOD_FLOP_COUNTER = "torch.utils.flop_counter.FlopCounterMode"
#: Multiply-accumulates of the dispatched matrix, convolution, attention and recurrent operators,
#: from this project's operator MAC formulas (``operator_formulas.MAC_FORMULAS``).
METHOD_OPERATOR_MACS = "torchscan_operator_macs"
METHOD_NOT_REQUESTED = "not_requested"
#: How a number was obtained.
METHODS = (
    METHOD_HOOK, METHOD_MODULE_FORMULA, METHOD_PYTORCH, METHOD_FLOP_COUNTER, METHOD_OPERATOR_MACS, METHOD_NOT_REQUESTED,
)  # fmt: skip

SEVERITIES = ("warning", "error")

#: The only execution mode of ``crawl_module``: evaluation mode with gradients disabled.
EXECUTION_MODE = "evaluation_no_grad"

#: The distribution name reports carry in ``context["package"]``.
PACKAGE = "torchscan-lsp"

Status = Literal["complete", "partial", "unavailable"]


class MetricResult(TypedDict):
    """One measured number with its honesty label. All six keys are always present."""

    status: Status
    value: Any
    known_value: Any
    unit: str
    scope: str
    method: str


class _DiagnosticBase(TypedDict):
    code: str
    severity: Literal["warning", "error"]
    metric: str
    message: str


class Diagnostic(_DiagnosticBase, total=False):
    """What made a metric incomplete. Module diagnostics carry ``path``; operator ones ``operator``."""

    path: str
    operator: str


class LayerReport(TypedDict):
    """One module call."""

    path: str
    call_index: int
    name: str
    depth: int
    type: str
    input: dict[str, Any]
    output: dict[str, Any]
    parameters: dict[str, Any]
    buffers: dict[str, Any]
    metrics: dict[str, MetricResult]


class AnalysisReport(TypedDict):
    """What ``crawl_module`` returns."""

    schema_version: int
    context: dict[str, Any]
    inputs: dict[str, Any]
    layers: list[LayerReport]
    operator_flops: dict[str, Any]
    totals: dict[str, MetricResult]
    diagnostics: list[Diagnostic]


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


def make_diagnostic(
    code: str,
    metric: str,
    message: str,
    *,
    path: str | None = None,
    operator: str | None = None,
    severity: str = "warning",
) -> Diagnostic:
    """Build a :class:`Diagnostic`; pass ``path`` for a module, ``operator`` for an operator."""
    diag: dict[str, Any] = {"code": code, "severity": severity, "metric": metric}
    if path is not None:
        diag["path"] = path
    if operator is not None:
        diag["operator"] = operator
    diag["message"] = message
    return diag  # type: ignore[return-value]


def _incomplete_names(report: dict[str, Any]) -> list[str]:
    names = {
        name
        for name, metric in (report.get("totals") or {}).items()
        if isinstance(metric, dict) and metric.get("status") != STATUS_COMPLETE
    }
    names.update(
        diag["metric"] for diag in report.get("diagnostics") or () if isinstance(diag, dict) and "metric" in diag
    )
    return sorted(names)


class IncompleteAnalysisError(RuntimeError):
    """Raised by strict analyses whose report is not complete. ``.report`` holds the full report."""

    def __init__(self, report: AnalysisReport | dict[str, Any]) -> None:
        self.report = report
        names = _incomplete_names(report)
        super().__init__(f"Analysis is incomplete for: {', '.join(names) if names else 'unknown metrics'}.")

    def __reduce__(self):  # keep the report when pickled (worker processes send errors back)
        return (type(self), (self.report,))

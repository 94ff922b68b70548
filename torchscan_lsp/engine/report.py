"""The report contract as the engine exports it: metric objects, diagnostics, layer and analysis
reports (schema version 1), :func:`metric_result` and :class:`IncompleteAnalysisError`.

The definitions live in :mod:`torchscan_lsp.contract` (no torch), shared with the worker, the
session and the server; this module keeps the engine's import paths.
"""

from __future__ import annotations

from torchscan_lsp.contract.metrics import (
    METHOD_FLOP_COUNTER,
    METHOD_FORWARD_FRAME,
    METHOD_HOOK,
    METHOD_MODULE_FORMULA,
    METHOD_NOT_REQUESTED,
    METHOD_OPERATOR_MACS,
    METHOD_PYTORCH,
    METHODS,
    SCOPES,
    STATUS_COMPLETE,
    STATUS_PARTIAL,
    STATUS_UNAVAILABLE,
    STATUSES,
    UNITS,
    MetricResult,
    Status,
    metric_result,
)
from torchscan_lsp.contract.report import (
    DIAGNOSTIC_NOT_APPLICABLE,
    EXECUTION_MODE,
    PACKAGE,
    SCHEMA_VERSION,
    SEVERITIES,
    AnalysisReport,
    Diagnostic,
    IncompleteAnalysisError,
    LayerReport,
    make_diagnostic,
)

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
    "METHOD_FORWARD_FRAME",
    "METHOD_MODULE_FORMULA",
    "METHOD_PYTORCH",
    "METHOD_FLOP_COUNTER",
    "METHOD_OPERATOR_MACS",
    "METHOD_NOT_REQUESTED",
    "EXECUTION_MODE",
    "DIAGNOSTIC_NOT_APPLICABLE",
    "PACKAGE",
    "Status",
    "MetricResult",
    "Diagnostic",
    "LayerReport",
    "AnalysisReport",
    "metric_result",
    "make_diagnostic",
    "IncompleteAnalysisError",
]

"""The analysis report (schema version 1): diagnostics, layer records, the report, strict mode,
and the totals of a module's subtree.

Reports are plain JSON-safe dicts (``json.loads(json.dumps(report)) == report``); the schema is
docs/report-schema.md. Nothing here imports torch, so the language server reads reports through
the same types the engine writes them with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypedDict

from torchscan_lsp.contract.metrics import (
    METHOD_FLOP_COUNTER,
    METHOD_MODULE_FORMULA,
    METHOD_OPERATOR_MACS,
    STATUS_COMPLETE,
    MetricResult,
    aggregate,
    not_counted,
)

__all__ = [
    "SCHEMA_VERSION",
    "SEVERITIES",
    "EXECUTION_MODE",
    "PACKAGE",
    "DIAGNOSTIC_NOT_APPLICABLE",
    "MODULE_FORMULA_METRICS",
    "OPERATOR_METRICS",
    "Diagnostic",
    "LayerReport",
    "AnalysisReport",
    "make_diagnostic",
    "IncompleteAnalysisError",
    "layer_key",
    "in_subtree",
    "subtree_total",
    "ancestors",
    "inclusive_total",
]

#: Version of the wire schema; independent of the package version. Readers reject other versions.
SCHEMA_VERSION = 1

SEVERITIES = ("warning", "error")

#: The only execution mode of ``crawl_module``: evaluation mode with gradients disabled.
EXECUTION_MODE = "evaluation_no_grad"

#: The distribution name reports carry in ``context["package"]``.
PACKAGE = "torchscan-lsp"

#: The code of a diagnostic that says a metric does not apply to a module (a spatial receptive field
#: for attention, recurrent layers, EmbeddingBag): the metric is unavailable, and nothing is missing,
#: so strict mode does not count it as incomplete (docs/report-schema.md).
DIAGNOSTIC_NOT_APPLICABLE = "metric_not_applicable"

#: The per-call metrics module formulas compute, with their units.
MODULE_FORMULA_METRICS = {"module_flops": "FLOPs", "macs": "MACs", "dmas": "DMAs"}

#: The per-call dispatcher counts (inclusive: a call's children and its own work), with their
#: units and methods.
OPERATOR_METRICS = {"operator_flops": ("FLOPs", METHOD_FLOP_COUNTER), "operator_macs": ("MACs", METHOD_OPERATOR_MACS)}


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
    """One module call: identity ``(path, call_index)``, value metadata of its input and output,
    its own parameters and buffers (each tensor counted in the first call that saw it), and its
    metric objects by name."""

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


class IncompleteAnalysisError(RuntimeError):
    """Raised by strict analyses whose report is not complete. ``.report`` holds the full report,
    ``.failures`` the :class:`~torchscan_lsp.contract.strict.StrictFailure` of each count strict
    asked for that is not complete (docs/report-schema.md, strict mode).

    The message is ``Analysis is incomplete for: <count> (<its methods' statuses>); ...``, e.g.
    ``Analysis is incomplete for: flops (module_flops partial, operator_flops partial).``
    (``unknown counts`` when ``failures`` is empty).
    """

    def __init__(self, report: AnalysisReport | dict[str, Any], failures: Iterable[Any] = ()) -> None:
        self.report = report
        self.failures = tuple(failures)
        told = "; ".join(str(failure) for failure in self.failures) or "unknown counts"
        super().__init__(f"Analysis is incomplete for: {told}.")

    def __reduce__(self):  # keep the report when pickled (worker processes send errors back)
        return (type(self), (self.report, self.failures))


def layer_key(layer: Mapping[str, Any]) -> tuple[str, int]:
    """A layer record's identity in its report: ``(path, call_index)``."""
    return str(layer.get("path", "")), int(layer.get("call_index", 0) or 0)


def in_subtree(path: str, roots: Iterable[str]) -> bool:
    """Whether module ``path`` is one of ``roots`` or lies below one (``""`` is the root module)."""
    for root in roots:
        if root == "" or path == root or path.startswith(root + "."):
            return True
    return False


def subtree_total(
    layers: Iterable[Mapping[str, Any]],
    diagnostics: Iterable[Mapping[str, Any]],
    name: str,
    roots: Iterable[str] = ("",),
    *,
    unit: str | None = None,
    scope: str = "forward",
    method: str = METHOD_MODULE_FORMULA,
) -> MetricResult:
    """The total of metric ``name`` over every call of the modules at ``roots`` and below.

    The parts are the metric of each layer record in the subtree that has one, and one
    :func:`~torchscan_lsp.contract.metrics.not_counted` part for each ``container_work``
    diagnostic of that metric on a module of the subtree (work in a container's own ``forward``
    that no formula saw), summed by :func:`~torchscan_lsp.contract.metrics.aggregate`: a subtree
    that holds partial or uncounted work is partial. With ``roots=("",)`` this is the report's
    forward total of ``name``.
    """
    roots = tuple(roots)
    unit = unit or MODULE_FORMULA_METRICS.get(name, "")
    parts: list[Mapping[str, Any]] = [
        layer["metrics"][name]
        for layer in layers
        if name in (layer.get("metrics") or {}) and in_subtree(str(layer.get("path", "")), roots)
    ]
    parts += [
        not_counted(unit, scope, method)
        for diag in diagnostics
        if diag.get("code") == "container_work" and diag.get("metric") == name
        and diag.get("path") is not None and in_subtree(str(diag["path"]), roots)
    ]
    return aggregate(parts, unit=unit, scope=scope, method=method)


def ancestors(path: str) -> list[str]:
    """The paths of the modules above ``path``, outermost first: ``"a.b.c"`` → ``["", "a", "a.b"]``;
    the root ``""`` has none."""
    if not path:
        return []
    parts = path.split(".")
    return [""] + [".".join(parts[:end]) for end in range(1, len(parts))]


def inclusive_total(layers: Iterable[Mapping[str, Any]], name: str, roots: Iterable[str] = ("",)) -> MetricResult:
    """The total of an inclusive per-call metric (``operator_flops``, ``operator_macs``) over the
    modules at ``roots`` and below.

    A call's operator counts already hold its children's and its own ``forward``'s work, so the
    parts are the metric of the *outermost* calls of the subtree only (those with no ancestor
    module called in the subtree: a module's calls, or for a container never called itself, its
    called children), summed by :func:`~torchscan_lsp.contract.metrics.aggregate`. A call without
    the metric (structure mode) is an unknown part: the sum is then partial, or unavailable.
    """
    unit, method = OPERATOR_METRICS[name]
    roots = tuple(roots)
    inside = [layer for layer in layers if in_subtree(str(layer.get("path", "")), roots)]
    called = {str(layer.get("path", "")) for layer in inside}
    parts = [
        (layer.get("metrics") or {}).get(name) or not_counted(unit, "forward", method)
        for layer in inside
        if not any(above in called for above in ancestors(str(layer.get("path", ""))))
    ]
    return aggregate(parts, unit=unit, scope="forward", method=method)

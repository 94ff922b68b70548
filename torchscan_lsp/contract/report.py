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
    "DIAGNOSTIC_PYTHON_WARNING",
    "NO_METRIC",
    "MODULE_FORMULA_METRICS",
    "OPERATOR_METRICS",
    "Diagnostic",
    "LayerReport",
    "AnalysisReport",
    "make_diagnostic",
    "IncompleteAnalysisError",
    "layer_key",
    "in_subtree",
    "subtree_layers",
    "outermost_layers",
    "subtree_total",
    "call_layers",
    "call_total",
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

#: The code of a diagnostic that carries a Python warning the analysed job raised (the worker puts
#: them in the report instead of printing them): it concerns no metric, and nothing is missing.
DIAGNOSTIC_PYTHON_WARNING = "python_warning"

#: The ``metric`` of a diagnostic that concerns no metric (``python_warning``).
NO_METRIC = "none"

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
    """One module call: identity ``(path, call_index)``, the index of its caller's record
    (``parent``), value metadata of its input and output, its own parameters and buffers (each
    tensor counted in the first call that saw it), and its metric objects by name.

    ``parent`` is the index in ``report["layers"]`` of the record of the innermost recorded call
    that was active when this call started (``None`` for the root call, or a call outside every
    recorded one). It follows the calls, not the names: a module registered at the root and called
    inside ``block``'s forward has ``block``'s record as its parent. A parent's record always comes
    before its children's.
    """

    path: str
    call_index: int
    name: str
    depth: int
    parent: int | None
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


def subtree_layers(layers: Iterable[Mapping[str, Any]], roots: Iterable[str] = ("",)) -> list[Mapping[str, Any]]:
    """The records of every call of the modules at ``roots`` and of every call below them, in report
    order: a record is inside when its path is one of ``roots`` or its ``parent`` record is inside.

    A root that no record has (a container never called itself: ``nn.ModuleList``) takes the
    records named below it whose caller lies outside it. Records without ``parent`` (reports from
    before the field) are placed by their names alone (:func:`in_subtree`).
    """
    layers, roots = list(layers), tuple(roots)
    if any("parent" not in layer for layer in layers):
        return [layer for layer in layers if in_subtree(str(layer.get("path", "")), roots)]
    called = {str(layer.get("path", "")) for layer in layers}
    uncalled = tuple(root for root in roots if root not in called)
    members = frozenset(roots)  # a line that built 400 blocks names 400 roots
    inside: list[bool] = []
    for index, layer in enumerate(layers):
        path, parent = str(layer.get("path", "")), layer.get("parent")
        inside.append(path in members or (isinstance(parent, int) and 0 <= parent < index and inside[parent])
                      or (bool(uncalled) and in_subtree(path, uncalled)))
    return [layer for layer, flag in zip(layers, inside) if flag]


def outermost_layers(layers: Iterable[Mapping[str, Any]], inside: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The records of ``inside`` (a :func:`subtree_layers` of ``layers``) whose caller's record is
    not in ``inside``: the outermost calls of the subtree. Without ``parent``, by names."""
    layers, inside = list(layers), list(inside)
    if any("parent" not in layer for layer in inside):
        called = {str(layer.get("path", "")) for layer in inside}
        return [layer for layer in inside if not any(above in called for above in ancestors(str(layer.get("path", ""))))]
    kept = {id(layer) for layer in inside}
    return [layer for layer in inside
            if not isinstance(layer.get("parent"), int) or id(layers[layer["parent"]]) not in kept]


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

    ``layers``: the report's whole list (the subtree is :func:`subtree_layers`, by ``parent``).
    The parts are the metric of each layer record in the subtree that has one, and one
    :func:`~torchscan_lsp.contract.metrics.not_counted` part for each ``container_work``
    diagnostic of that metric on a module of the subtree (work in a container's own ``forward``
    that no formula saw), summed by :func:`~torchscan_lsp.contract.metrics.aggregate`: a subtree
    that holds partial or uncounted work is partial. With ``roots=("",)`` this is the report's
    forward total of ``name``.
    """
    roots = tuple(roots)
    return _formula_total(subtree_layers(layers, roots), diagnostics, name, lambda path: in_subtree(path, roots),
                          unit=unit, scope=scope, method=method)


def _formula_total(inside: list[Mapping[str, Any]], diagnostics: Iterable[Mapping[str, Any]], name: str,
                   below: Any, *, unit: str | None, scope: str, method: str) -> MetricResult:
    """The sum of metric ``name`` over the records ``inside`` and the ``container_work`` of their
    paths (or of a path ``below`` accepts), by :func:`subtree_total`'s rule."""
    unit = unit or MODULE_FORMULA_METRICS.get(name, "")
    paths = {str(layer.get("path", "")) for layer in inside}
    parts: list[Mapping[str, Any]] = [layer["metrics"][name] for layer in inside if name in (layer.get("metrics") or {})]
    parts += [
        not_counted(unit, scope, method)
        for diag in diagnostics
        if diag.get("code") == "container_work" and diag.get("metric") == name
        and diag.get("path") is not None and (diag["path"] in paths or below(str(diag["path"])))
    ]
    return aggregate(parts, unit=unit, scope=scope, method=method)


def call_layers(layers: Iterable[Mapping[str, Any]], index: int) -> list[Mapping[str, Any]]:
    """The record ``layers[index]`` and the records of every call made below it (by ``parent``),
    in report order: one call's subtree, where :func:`subtree_layers` takes every call of a
    module. Records without ``parent`` (reports from before the field) are placed by their names."""
    layers = list(layers)
    if any("parent" not in layer for layer in layers):
        return list(subtree_layers(layers, (str(layers[index].get("path", "")),)))
    inside = {index}
    for position in range(index + 1, len(layers)):
        if layers[position].get("parent") not in inside:
            # a record opens when its call starts, so the calls below one are the records right
            # after it; the first that is not below it ends them (the call had ended)
            break
        inside.add(position)
    return [layers[position] for position in sorted(inside)]


def call_total(layers: Iterable[Mapping[str, Any]], diagnostics: Iterable[Mapping[str, Any]], index: int,
               name: str) -> MetricResult:
    """The work of metric ``name`` in the one call ``layers[index]``, its children's included: for
    an inclusive operator metric (``operator_flops``, ``operator_macs``) the record's own (an
    unknown part without it); for a module-formula metric the sum over :func:`call_layers` with the
    ``container_work`` of their paths, by :func:`subtree_total`'s rule. A call made once has the
    numbers of its module's :func:`subtree_total` and :func:`inclusive_total`."""
    layers = list(layers)
    if name in OPERATOR_METRICS:
        unit, method = OPERATOR_METRICS[name]
        own = (layers[index].get("metrics") or {}).get(name)
        return own if own else not_counted(unit, "forward", method)  # type: ignore[return-value]
    return _formula_total(call_layers(layers, index), diagnostics, name, lambda path: False, unit=None,
                          scope="forward", method=METHOD_MODULE_FORMULA)


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
    parts are the metric of the *outermost* calls of the subtree only (:func:`outermost_layers`:
    a module's calls, or for a container never called itself, its called children; ``layers`` is
    the report's whole list), summed by :func:`~torchscan_lsp.contract.metrics.aggregate`. A call without
    the metric (structure mode) is an unknown part: the sum is then partial, or unavailable.
    """
    unit, method = OPERATOR_METRICS[name]
    layers = list(layers)
    parts = [
        (layer.get("metrics") or {}).get(name) or not_counted(unit, "forward", method)
        for layer in outermost_layers(layers, subtree_layers(layers, roots))
    ]
    return aggregate(parts, unit=unit, scope="forward", method=method)

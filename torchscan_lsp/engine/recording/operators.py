"""Operator FLOPs: what PyTorch's dispatcher executed, counted with the engine's formula table.

:func:`measure_flops` runs a workload once and reports, per operator and per module label, the FLOPs
that the formula table (:mod:`.operator_table`: PyTorch's ``torch.utils.flop_counter`` formulas,
this project's ``DEFAULT_FORMULAS`` for the operators PyTorch leaves uncounted and, above both, the
caller's ``custom_mapping``) assigns to what was dispatched, counted by
:class:`~torchscan_lsp.engine.recording.operator_counter.OperatorCounter`. Operators without a formula are
either on the ignore list (views, data movement, allocation, creation: no arithmetic) or reported
as ``uncounted_operator`` diagnostics, which makes the total ``partial`` (a lower bound).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypedDict

import torch

from torchscan_lsp.engine.recording.formula_provenance import flop_method, formula_context
from torchscan_lsp.engine.recording.operator_counter import OperatorCounter
from torchscan_lsp.engine.recording.operator_table import IGNORED_OPERATORS, REFERENCE_IGNORED, validate_mapping
from torchscan_lsp.engine.report import (
    METHOD_NOT_REQUESTED,
    SCHEMA_VERSION,
    Diagnostic,
    MetricResult,
    make_diagnostic,
    metric_result,
)

__all__ = [
    "FlopReport",
    "IGNORED_OPERATORS",
    "REFERENCE_IGNORED",
    "counter_report",
    "measure_flops",
    "flop_report",
    "not_requested_flop_report",
]

class FlopReport(TypedDict):
    """What :func:`measure_flops` returns (also ``AnalysisReport["operator_flops"]``)."""

    schema_version: int
    context: dict[str, Any]
    total: MetricResult
    by_module: dict[str, int]
    by_operator: dict[str, int]
    ignored_operators: dict[str, dict[str, Any]]
    diagnostics: list[Diagnostic]


# --------------------------------------------------------------------------------------------------
# reports


def _context(method: str) -> dict[str, Any]:
    return {"torch_version": str(torch.__version__), "method": method}


def flop_report(
    flops: Mapping[Any, int],
    modules: Mapping[str, int],
    calls: Mapping[Any, int],
    *,
    custom_mapping: Mapping[Any, Any] | None = None,
    failures: Mapping[Any, tuple[int, str]] | None = None,
) -> FlopReport:
    """Build a :class:`FlopReport` from FLOPs per operator packet, FLOPs per module label and
    executed calls per packet.

    ``custom_mapping``: the caller formulas in use (named in the method and the context);
    ``failures``: packet -> ``(calls, reason)`` of calls whose formula could not be applied.
    """
    by_operator = dict(sorted((str(packet), int(count)) for packet, count in flops.items()))
    by_module = dict(sorted((label, int(count)) for label, count in modules.items()))
    recorded: dict[str, int] = defaultdict(int)
    for packet, count in calls.items():
        recorded[str(packet)] += int(count)
    failed = {str(packet): entry for packet, entry in (failures or {}).items()}
    ignored: dict[str, dict[str, Any]] = {}
    diagnostics: list[Diagnostic] = []
    for op in sorted(recorded):
        if op in failed:
            count, reason = failed[op]
            message = (f"{op} was observed {recorded[op]} time(s); its FLOP formula could not be applied to "
                       f"{count} of them: {reason}.")
            diagnostics.append(make_diagnostic("uncounted_operator", "flops", message, operator=op))
            continue
        if op in by_operator:
            continue
        reason = IGNORED_OPERATORS.get(op)
        if reason is not None:
            ignored[op] = {"calls": recorded[op], "reason": reason}
        else:
            diagnostics.append(
                make_diagnostic(
                    "uncounted_operator",
                    "flops",
                    f"{op} was observed {recorded[op]} time(s), but no FLOP formula is registered.",
                    operator=op,
                )
            )
    value = int(sum(by_operator.values()))
    method = flop_method(custom_mapping)
    if diagnostics:
        total = metric_result(status="partial", known_value=value, unit="FLOPs", scope="workload", method=method)
    else:
        total = metric_result(status="complete", value=value, unit="FLOPs", scope="workload", method=method)
    return {
        "schema_version": SCHEMA_VERSION,
        "context": {**_context(method), "formulas": formula_context(custom_mapping)},
        "total": total,
        "by_module": by_module,
        "by_operator": by_operator,
        "ignored_operators": ignored,
        "diagnostics": diagnostics,
    }


def counter_report(counter: OperatorCounter) -> FlopReport:
    """The :class:`FlopReport` of what ``counter`` counted."""
    return flop_report(*counter.counts(), custom_mapping=counter.mapping, failures=counter.failed_calls())


def not_requested_flop_report() -> FlopReport:
    """The placeholder :class:`FlopReport` of an analysis that did not count operators."""
    return {
        "schema_version": SCHEMA_VERSION,
        "context": _context(METHOD_NOT_REQUESTED),
        "total": metric_result(status="unavailable", unit="FLOPs", scope="workload", method=METHOD_NOT_REQUESTED),
        "by_module": {},
        "by_operator": {},
        "ignored_operators": {},
        "diagnostics": [],
    }


def measure_flops(
    workload: Callable[[], Any],
    *,
    modules: torch.nn.Module | Iterable[torch.nn.Module] | None = None,
    custom_mapping: Mapping[Any, Callable[..., Any]] | None = None,
) -> FlopReport:
    """Count the operator FLOPs of one call of ``workload`` (a zero-argument callable).

    Args:
        workload: called exactly once; its exceptions propagate unchanged.
        modules: only used on PyTorch versions whose ``FlopCounterMode`` cannot track modules by
            itself, to label ``by_module``.
        custom_mapping: ``{torch.ops.aten.op: formula}`` using ``FlopCounterMode``'s formula
            contract (shapes positionally, ``out_shape`` by keyword). Keys must be operator packets.
            Applies to this call only and wins over the built-in and default formulas.

    Returns:
        A :class:`FlopReport`. ``total`` is ``complete`` when every executed operator had a formula
        or is on the ignore list, else ``partial`` (a lower bound) with one ``uncounted_operator``
        diagnostic per uncounted operator.
    """
    if not callable(workload):
        raise TypeError(f"workload must be a zero-argument callable, got {type(workload).__name__}.")
    mapping = validate_mapping(custom_mapping)
    if isinstance(modules, torch.nn.Module):
        modules = [modules]
    elif modules is not None:
        modules = list(modules)
    counter = OperatorCounter(mapping, modules=modules)
    with counter:
        workload()
    return counter_report(counter)

"""Strict mode: which counts must be complete, and which of them are not (docs/report-schema.md,
"Strict mode").

``strict`` names *counts*, not report fields. ``strict=True`` checks the three counts every number
the editor headlines is made of: FLOPs, MACs and parameters. DMAs and the receptive field are
checked only when named: ``strict=["flops", "macs", "parameters", "dmas", "receptive_field"]``
checks everything, ``strict=["dmas"]`` only the DMAs.

A count is complete when at least one of the methods that count it is complete (the headline rule):
the FLOPs when ``module_flops`` *or* ``operator_flops`` is, the MACs when ``macs`` *or*
``operator_macs`` is. So a residual ``x + y`` that no module formula sees, with every dispatched
operator counted, is not a strict failure. A metric that does not apply (a spatial receptive field
for attention: ``metric_not_applicable``) is never a failure, whatever ``strict`` names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from torchscan_lsp.contract.metrics import STATUS_COMPLETE

__all__ = ["STRICT_COUNTS", "DEFAULT_STRICT", "strict_counts", "StrictFailure", "strict_failures",
           "failure_diagnostics"]

STRICT_COUNTS = ("flops", "macs", "parameters", "dmas", "receptive_field")
"""The names ``strict`` accepts, in the order failures are told."""

DEFAULT_STRICT = ("flops", "macs", "parameters")
"""What ``strict=True`` checks."""

_METHODS = {
    "flops": ("module_flops", "operator_flops"),
    "macs": ("macs", "operator_macs"),
    "parameters": ("parameters", "trainable_parameters", "frozen_parameters", "parameter_bytes",
                   "buffer_elements", "buffer_bytes"),
    "dmas": ("dmas",),
}
"""The totals behind each count: any one complete makes FLOPs or MACs complete; parameters need
all of theirs."""

_DIAGNOSTIC_METRICS = {
    "flops": {"module_flops", "operator_flops", "flops"},  # "flops": an operator without a formula
    "macs": {"macs", "operator_macs", "flops"},
    "parameters": {"parameters"},
    "dmas": {"dmas"},
    "receptive_field": {"receptive_field", "effective_stride", "effective_padding", "token_dependencies"},
}
_NOT_APPLICABLE = "metric_not_applicable"
_NOT_REQUESTED = "not_requested"


def strict_counts(value: Any) -> tuple[str, ...]:
    """The counts ``strict`` asks to be complete, in :data:`STRICT_COUNTS` order.

    ``False``/``None`` → none; ``True`` → :data:`DEFAULT_STRICT`; a list or tuple of names from
    :data:`STRICT_COUNTS` → those. Raises ``TypeError`` for any other type and ``ValueError`` naming
    an unknown count.
    """
    if value is None or value is False:
        return ()
    if value is True:
        return DEFAULT_STRICT
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise TypeError(f"strict must be True, False or a list of {_choices()}, got {value!r}.")
    unknown = [name for name in value if name not in STRICT_COUNTS]
    if unknown:
        raise ValueError(f"strict names unknown counts {', '.join(map(repr, unknown))}; choose from {_choices()}.")
    return tuple(name for name in STRICT_COUNTS if name in value)


def _choices() -> str:
    return ", ".join(f'"{name}"' for name in STRICT_COUNTS)


@dataclass(frozen=True)
class StrictFailure:
    """One count strict asked for that is not complete.

    Attributes:
        count: a name of :data:`STRICT_COUNTS`.
        detail: the statuses of its methods, e.g. ``"module_flops partial, operator_flops partial"``,
            or for the receptive field the number of calls it could not be followed through.
    """

    count: str
    detail: str

    def __str__(self) -> str:
        return f"{self.count} ({self.detail})"


def _diagnostics(report: Mapping[str, Any], metrics: set[str]) -> list[dict[str, Any]]:
    return [diag for diag in report.get("diagnostics") or ()
            if isinstance(diag, dict) and diag.get("code") != _NOT_APPLICABLE and diag.get("metric") in metrics]


def _failure(report: Mapping[str, Any], count: str) -> StrictFailure | None:
    if count == "receptive_field":
        found = _diagnostics(report, _DIAGNOSTIC_METRICS[count])
        paths = {diag.get("path") for diag in found}
        return StrictFailure(count, f"not followed through {len(paths)} call(s)") if found else None
    totals = report.get("totals") or {}
    present = [(name, totals[name]) for name in _METHODS[count] if isinstance(totals.get(name), dict)]
    requested = [(name, metric) for name, metric in present if metric.get("method") != _NOT_REQUESTED]
    if not requested:
        return None  # structure mode: nothing was counted, nothing is claimed
    complete = [name for name, metric in requested if metric.get("status") == STATUS_COMPLETE]
    if complete if count in ("flops", "macs") else len(complete) == len(requested):
        return None
    detail = ", ".join(f"{name} {metric.get('status')}" for name, metric in requested
                       if metric.get("status") != STATUS_COMPLETE)
    return StrictFailure(count, detail)


def strict_failures(report: Mapping[str, Any], counts: Iterable[str]) -> list[StrictFailure]:
    """The counts of ``counts`` that ``report`` does not have complete (empty: strict passes)."""
    return [failure for count in counts if (failure := _failure(report, count)) is not None]


def failure_diagnostics(report: Mapping[str, Any], failures: Iterable[StrictFailure]) -> list[dict[str, Any]]:
    """The report's diagnostics that explain ``failures``, in report order, each once."""
    return _diagnostics(report, set().union(*(_DIAGNOSTIC_METRICS[failure.count] for failure in failures)))

"""Strict mode: which counts must be complete, by which rule, and which of them are not
(docs/report-schema.md, "Strict mode").

Two rules, each under its own name:

* ``strict=True`` is the reference's rule (TorchScan: "partial or unavailable module metrics must
  raise"): every count the report holds -- FLOPs, MACs, DMAs, parameters and the receptive field --
  must be complete by *every* method that counts it. A module whose work no module formula covers
  fails, even when the dispatched operators counted it (``module_flops`` partial, ``operator_flops``
  complete).
* ``strict="headline"`` is the editor's rule: FLOPs, MACs and parameters, what every number the
  editor headlines is made of, each complete when *one* of its methods is -- the FLOPs when
  ``module_flops`` *or* ``operator_flops`` is, the MACs when ``macs`` *or* ``operator_macs`` is. So a
  residual ``x + y`` that no module formula sees, with every dispatched operator counted, passes. A
  list names the counts to check by this rule: ``strict=["dmas"]`` checks the DMAs only.

Under either rule, a metric that does not apply (a spatial receptive field for attention:
``metric_not_applicable``) is never a failure, and totals that were not requested (structure mode:
method ``not_requested``) claim nothing and never fail.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from torchscan_lsp.contract.metrics import STATUS_COMPLETE

__all__ = ["STRICT_COUNTS", "HEADLINE", "HEADLINE_COUNTS", "StrictRule", "strict_rule", "StrictFailure",
           "strict_failures", "failure_diagnostics"]

STRICT_COUNTS = ("flops", "macs", "parameters", "dmas", "receptive_field")
"""The names a ``strict`` list accepts, in the order failures are told; ``strict=True`` checks all."""

HEADLINE = "headline"
"""The name of the editor's rule: ``strict="headline"``."""

HEADLINE_COUNTS = ("flops", "macs", "parameters")
"""What ``strict="headline"`` checks."""

_METHODS = {
    "flops": ("module_flops", "operator_flops"),
    "macs": ("macs", "operator_macs"),
    "parameters": ("parameters", "trainable_parameters", "frozen_parameters", "parameter_bytes",
                   "buffer_elements", "buffer_bytes"),
    "dmas": ("dmas",),
}
"""The totals behind each count. Parameters and DMAs need all of theirs under either rule; FLOPs
and MACs all of theirs under ``True``, one under ``"headline"``."""

_DIAGNOSTIC_METRICS = {
    "flops": {"module_flops", "operator_flops", "flops"},  # "flops": an operator without a formula
    "macs": {"macs", "operator_macs", "flops"},
    "parameters": {"parameters"},
    "dmas": {"dmas"},
    "receptive_field": {"receptive_field", "effective_stride", "effective_padding", "token_dependencies"},
}
_NOT_APPLICABLE = "metric_not_applicable"
_NOT_REQUESTED = "not_requested"


@dataclass(frozen=True)
class StrictRule:
    """What a ``strict`` value asks for.

    Attributes:
        counts: the counts checked, names of :data:`STRICT_COUNTS`, in that order.
        every_method: the reference's rule (``strict=True``): a count is complete only when every
            method that counts it is, and a total of the report outside :data:`STRICT_COUNTS` is
            checked too. ``False``: the headline rule, one complete method suffices for FLOPs and MACs.
    """

    counts: tuple[str, ...]
    every_method: bool


def strict_rule(value: Any) -> StrictRule | None:
    """The rule a ``strict`` value names; ``None`` for no check.

    ``False``/``None`` → ``None``; ``True`` → every count by every method (the reference's rule);
    ``"headline"`` → :data:`HEADLINE_COUNTS`, each complete when one method is; a list or tuple of
    names from :data:`STRICT_COUNTS` → those, by the headline rule.

    Raises:
        TypeError: any other type (a number, a dict).
        ValueError: a string other than ``"headline"``, or a list naming an unknown count.
    """
    if value is None or value is False:
        return None
    if value is True:
        return StrictRule(STRICT_COUNTS, every_method=True)
    if isinstance(value, str):
        if value != HEADLINE:
            raise ValueError(f'strict must be True, False, "{HEADLINE}" or a list of {_choices()}, got {value!r}.')
        return StrictRule(HEADLINE_COUNTS, every_method=False)
    if not isinstance(value, (list, tuple)):
        raise TypeError(f'strict must be True, False, "{HEADLINE}" or a list of {_choices()}, got {value!r}.')
    unknown = [name for name in value if name not in STRICT_COUNTS]
    if unknown:
        raise ValueError(f"strict names unknown counts {', '.join(map(repr, unknown))}; choose from {_choices()}.")
    return StrictRule(tuple(name for name in STRICT_COUNTS if name in value), every_method=False)


def _choices() -> str:
    return ", ".join(f'"{name}"' for name in STRICT_COUNTS)


@dataclass(frozen=True)
class StrictFailure:
    """One count strict asked for that is not complete.

    Attributes:
        count: a name of :data:`STRICT_COUNTS` (or, under ``strict=True``, of another total).
        detail: the statuses of its methods that are not complete, e.g. ``"module_flops partial,
            operator_flops partial"``, or for the receptive field the number of calls it is
            incomplete in.
    """

    count: str
    detail: str

    def __str__(self) -> str:
        return f"{self.count} ({self.detail})"


def _diagnostics(report: Mapping[str, Any], metrics: set[str]) -> list[dict[str, Any]]:
    return [diag for diag in report.get("diagnostics") or ()
            if isinstance(diag, dict) and diag.get("code") != _NOT_APPLICABLE and diag.get("metric") in metrics]


def _requested(totals: Mapping[str, Any], names: Iterable[str]) -> list[tuple[str, Mapping[str, Any]]]:
    """The totals of ``names`` the report has and counted (structure mode's ``not_requested`` left out)."""
    return [(name, totals[name]) for name in names
            if isinstance(totals.get(name), dict) and totals[name].get("method") != _NOT_REQUESTED]


def _failure(report: Mapping[str, Any], count: str, every_method: bool) -> StrictFailure | None:
    if count == "receptive_field":
        found = _diagnostics(report, _DIAGNOSTIC_METRICS[count])
        paths = {diag.get("path") for diag in found}
        return StrictFailure(count, f"incomplete in {len(paths)} call(s)") if found else None
    requested = _requested(report.get("totals") or {}, _METHODS.get(count, (count,)))
    if not requested:
        return None  # structure mode: nothing was counted, nothing is claimed
    complete = [name for name, metric in requested if metric.get("status") == STATUS_COMPLETE]
    one_suffices = not every_method and count in ("flops", "macs")
    if complete if one_suffices else len(complete) == len(requested):
        return None
    detail = ", ".join(f"{name} {metric.get('status')}" for name, metric in requested
                       if metric.get("status") != STATUS_COMPLETE)
    return StrictFailure(count, detail)


def strict_failures(report: Mapping[str, Any], rule: StrictRule | None) -> list[StrictFailure]:
    """The counts ``rule`` checks that ``report`` does not have complete (empty: strict passes).

    Under the reference's rule (``rule.every_method``) a total outside every count's methods (one a
    later report version adds) is checked as a count of its own."""
    if rule is None:
        return []
    counts = list(rule.counts)
    if rule.every_method:
        known = {name for names in _METHODS.values() for name in names}
        counts += [name for name in report.get("totals") or {} if name not in known]
    return [failure for count in counts if (failure := _failure(report, count, rule.every_method)) is not None]


def failure_diagnostics(report: Mapping[str, Any], failures: Iterable[StrictFailure]) -> list[dict[str, Any]]:
    """The report's diagnostics that explain ``failures``, in report order, each once."""
    metrics: set[str] = set()
    for failure in failures:
        metrics |= _DIAGNOSTIC_METRICS.get(failure.count, {failure.count})
    return _diagnostics(report, metrics)

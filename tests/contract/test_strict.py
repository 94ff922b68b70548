"""Strict mode's rule (docs/report-schema.md, "Strict mode"), on reports written by hand.

Each case states the statuses it builds and derives the verdict from the rule: a FLOP or MAC count
is complete when one of its two methods is; parameters when all their totals are; DMAs (one method)
and the receptive field only when named; ``metric_not_applicable`` never fails.
"""

from __future__ import annotations

import pytest

from torchscan_lsp.contract.metrics import metric_result
from torchscan_lsp.contract.report import make_diagnostic
from torchscan_lsp.contract.strict import (
    DEFAULT_STRICT,
    StrictFailure,
    failure_diagnostics,
    strict_counts,
    strict_failures,
)

EVERYTHING = ["flops", "macs", "parameters", "dmas", "receptive_field"]


def _metric(status: str, unit: str = "FLOPs", method: str = "m") -> dict:
    known = {"value": 1} if status == "complete" else {"known_value": 1} if status == "partial" else {}
    return metric_result(status=status, unit=unit, scope="forward", method=method, **known)


def _report(module: str = "complete", operator: str = "complete", dmas: str = "complete",
            parameters: str = "complete", diagnostics: list | None = None) -> dict:
    return {
        "totals": {
            "parameters": _metric(parameters, "elements"),
            "module_flops": _metric(module), "operator_flops": _metric(operator),
            "macs": _metric(module, "MACs"), "operator_macs": _metric(operator, "MACs"),
            "dmas": _metric(dmas, "DMAs"),
        },
        "diagnostics": diagnostics or [],
    }


def test_true_means_flops_macs_and_parameters():
    assert strict_counts(True) == DEFAULT_STRICT == ("flops", "macs", "parameters")
    assert strict_counts(False) == strict_counts(None) == ()
    # a list keeps the documented order, whatever order it was written in
    assert strict_counts(["receptive_field", "dmas"]) == ("dmas", "receptive_field")


@pytest.mark.parametrize("bad, error", [("flops", TypeError), (1, TypeError), (["flop"], ValueError)])
def test_other_values_are_refused(bad, error):
    with pytest.raises(error, match="flops"):
        strict_counts(bad)


def test_one_complete_method_makes_a_count_complete():
    # a residual add no module formula saw: module formulas partial, dispatched operators complete
    container = make_diagnostic("container_work", "module_flops", "ops: aten.add x1.", path="block")
    assert strict_failures(_report(module="partial", dmas="partial", diagnostics=[container]), DEFAULT_STRICT) == []
    # the other way round: an operator without a FLOP formula, every module formula complete
    uncounted = make_diagnostic("uncounted_operator", "flops", "no formula", operator="aten.sin")
    assert strict_failures(_report(operator="partial", diagnostics=[uncounted]), DEFAULT_STRICT) == []


def test_both_methods_partial_fails_and_says_both():
    failures = strict_failures(_report(module="partial", operator="partial"), DEFAULT_STRICT)
    assert failures == [
        StrictFailure("flops", "module_flops partial, operator_flops partial"),
        StrictFailure("macs", "macs partial, operator_macs partial"),
    ]


def test_dmas_and_receptive_field_fail_only_when_named():
    rf = make_diagnostic("receptive_field_path", "receptive_field", "branches", path="a")
    report = _report(dmas="partial", diagnostics=[rf])
    assert strict_failures(report, strict_counts(True)) == []
    assert strict_failures(report, strict_counts(["dmas", "receptive_field"])) == [
        StrictFailure("dmas", "dmas partial"),
        StrictFailure("receptive_field", "not followed through 1 call(s)"),
    ]


def test_metric_not_applicable_never_fails():
    # attention has no spatial receptive field: nothing is missing, even when the field is asked for
    na = make_diagnostic("metric_not_applicable", "receptive_field", "not defined for attention", path="attn")
    assert strict_failures(_report(diagnostics=[na]), EVERYTHING) == []


def test_parameters_fail_when_a_parameter_total_is_partial():
    lazy = make_diagnostic("uninitialized_parameters", "parameters", "lazy modules never ran: 0", path="0")
    report = _report(parameters="partial", diagnostics=[lazy])
    failures = strict_failures(report, DEFAULT_STRICT)
    assert failures == [StrictFailure("parameters", "parameters partial")]
    assert failure_diagnostics(report, failures) == [lazy]


def test_not_requested_totals_never_fail():
    # structure mode: nothing was counted, so nothing is claimed
    report = {"totals": {name: _metric("unavailable", method="not_requested")
                         for name in ("module_flops", "operator_flops", "macs", "operator_macs", "dmas")},
              "diagnostics": []}
    assert strict_failures(report, EVERYTHING) == []


def test_failure_diagnostics_are_those_of_the_failed_counts():
    container = make_diagnostic("container_work", "module_flops", "ops: aten.add x1.", path="block")
    dma = make_diagnostic("container_work", "dmas", "ops: aten.add x1.", path="block")
    rf = make_diagnostic("receptive_field_path", "receptive_field", "branches", path="a")
    report = _report(module="partial", dmas="partial", diagnostics=[container, dma, rf])
    failures = strict_failures(report, ["dmas"])
    assert failure_diagnostics(report, failures) == [dma]

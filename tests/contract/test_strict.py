"""Strict mode's two rules (docs/report-schema.md, "Strict mode"), on reports written by hand.

Each case states the statuses it builds and derives the verdict from the rule:

* ``strict=True``, the reference's: every count (FLOPs, MACs, parameters, DMAs, the receptive
  field) complete by every method that counts it;
* ``strict="headline"`` and lists: a FLOP or MAC count is complete when one of its two methods is,
  parameters when all their totals are, DMAs and the receptive field only when named.

Under both, ``metric_not_applicable`` and ``not_requested`` totals never fail.
"""

from __future__ import annotations

import pytest

from torchscan_lsp.contract.metrics import metric_result
from torchscan_lsp.contract.report import make_diagnostic
from torchscan_lsp.contract.strict import (
    HEADLINE_COUNTS,
    STRICT_COUNTS,
    StrictFailure,
    StrictRule,
    failure_diagnostics,
    strict_failures,
    strict_rule,
)

EVERYTHING = ["flops", "macs", "parameters", "dmas", "receptive_field"]
REFERENCE = strict_rule(True)
HEADLINE = strict_rule("headline")


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


def test_the_values_and_their_rules():
    assert REFERENCE == StrictRule(STRICT_COUNTS, every_method=True)
    assert HEADLINE == StrictRule(HEADLINE_COUNTS, every_method=False) and HEADLINE_COUNTS == ("flops", "macs", "parameters")
    assert strict_rule(False) is None and strict_rule(None) is None
    # a list keeps the documented order, whatever order it was written in, and the headline rule
    assert strict_rule(["receptive_field", "dmas"]) == StrictRule(("dmas", "receptive_field"), every_method=False)


@pytest.mark.parametrize("bad, error", [("flops", ValueError), ("True", ValueError), (1, TypeError),
                                        ({"flops": True}, TypeError), (["flop"], ValueError)])
def test_other_values_are_refused(bad, error):
    with pytest.raises(error, match="flops"):
        strict_rule(bad)


def test_headline_one_complete_method_makes_a_count_complete():
    # a residual add no module formula saw: module formulas partial, dispatched operators complete
    container = make_diagnostic("container_work", "module_flops", "ops: aten.add x1.", path="block")
    assert strict_failures(_report(module="partial", dmas="partial", diagnostics=[container]), HEADLINE) == []
    # the other way round: an operator without a FLOP formula, every module formula complete
    uncounted = make_diagnostic("uncounted_operator", "flops", "no formula", operator="aten.sin")
    assert strict_failures(_report(operator="partial", diagnostics=[uncounted]), HEADLINE) == []


def test_true_fails_on_any_method_that_is_not_complete():
    # the same two reports: the reference's rule wants every method of every count complete
    container = make_diagnostic("container_work", "module_flops", "ops: aten.add x1.", path="block")
    assert strict_failures(_report(module="partial", dmas="partial", diagnostics=[container]), REFERENCE) == [
        StrictFailure("flops", "module_flops partial"),
        StrictFailure("macs", "macs partial"),
        StrictFailure("dmas", "dmas partial"),
    ]
    uncounted = make_diagnostic("uncounted_operator", "flops", "no formula", operator="aten.sin")
    assert strict_failures(_report(operator="partial", diagnostics=[uncounted]), REFERENCE) == [
        StrictFailure("flops", "operator_flops partial"),
        StrictFailure("macs", "operator_macs partial"),
    ]
    assert strict_failures(_report(), REFERENCE) == []


def test_true_checks_a_total_no_count_names():
    # a total a later report version adds is checked as a count of its own by the reference's rule
    report = _report()
    report["totals"]["attention_flops"] = _metric("unavailable")
    assert strict_failures(report, REFERENCE) == [StrictFailure("attention_flops", "attention_flops unavailable")]
    assert strict_failures(report, HEADLINE) == []


def test_both_methods_partial_fails_and_says_both():
    expected = [
        StrictFailure("flops", "module_flops partial, operator_flops partial"),
        StrictFailure("macs", "macs partial, operator_macs partial"),
    ]
    assert strict_failures(_report(module="partial", operator="partial"), HEADLINE) == expected
    assert strict_failures(_report(module="partial", operator="partial"), REFERENCE) == expected


def test_dmas_and_receptive_field_fail_under_headline_only_when_named():
    rf = make_diagnostic("receptive_field_path", "receptive_field", "branches", path="a")
    report = _report(dmas="partial", diagnostics=[rf])
    assert strict_failures(report, HEADLINE) == []
    named = [StrictFailure("dmas", "dmas partial"), StrictFailure("receptive_field", "incomplete in 1 call(s)")]
    assert strict_failures(report, strict_rule(["dmas", "receptive_field"])) == named
    assert strict_failures(report, REFERENCE) == named


def test_metric_not_applicable_never_fails():
    # attention has no spatial receptive field: nothing is missing, even when the field is asked for
    na = make_diagnostic("metric_not_applicable", "receptive_field", "not defined for attention", path="attn")
    assert strict_failures(_report(diagnostics=[na]), strict_rule(EVERYTHING)) == []
    assert strict_failures(_report(diagnostics=[na]), REFERENCE) == []


def test_parameters_fail_when_a_parameter_total_is_partial():
    lazy = make_diagnostic("uninitialized_parameters", "parameters", "lazy modules never ran: 0", path="0")
    report = _report(parameters="partial", diagnostics=[lazy])
    for rule in (HEADLINE, REFERENCE):
        failures = strict_failures(report, rule)
        assert failures == [StrictFailure("parameters", "parameters partial")]
        assert failure_diagnostics(report, failures) == [lazy]


def test_not_requested_totals_never_fail():
    # structure mode: nothing was counted, so nothing is claimed
    report = {"totals": {name: _metric("unavailable", method="not_requested")
                         for name in ("module_flops", "operator_flops", "macs", "operator_macs", "dmas")},
              "diagnostics": []}
    assert strict_failures(report, strict_rule(EVERYTHING)) == []
    assert strict_failures(report, REFERENCE) == []


def test_failure_diagnostics_are_those_of_the_failed_counts():
    container = make_diagnostic("container_work", "module_flops", "ops: aten.add x1.", path="block")
    dma = make_diagnostic("container_work", "dmas", "ops: aten.add x1.", path="block")
    rf = make_diagnostic("receptive_field_path", "receptive_field", "branches", path="a")
    report = _report(module="partial", dmas="partial", diagnostics=[container, dma, rf])
    failures = strict_failures(report, strict_rule(["dmas"]))
    assert failure_diagnostics(report, failures) == [dma]
    assert failure_diagnostics(report, strict_failures(report, REFERENCE)) == [container, dma, rf]

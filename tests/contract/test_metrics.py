"""Status rules, ``metric_value``, ``aggregate`` and subtree totals, on metric objects written by
hand (each expected value is the rule applied by hand to the parts)."""

import pytest

from torchscan_lsp.contract.metrics import aggregate, is_lower_bound, metric_result, metric_value, not_counted
from torchscan_lsp.contract.report import in_subtree, subtree_total

FORMULA = {"unit": "FLOPs", "scope": "module_call", "method": "torchscan_module_formula"}


def complete(value, **labels):
    return {"status": "complete", "value": value, "known_value": value, **{**FORMULA, **labels}}


def partial(known, **labels):
    return {"status": "partial", "value": None, "known_value": known, **{**FORMULA, **labels}}


def unavailable(**labels):
    return {"status": "unavailable", "value": None, "known_value": None, **{**FORMULA, **labels}}


def test_metric_value_reads_what_each_status_vouches_for():
    assert metric_value(complete(12)) == 12
    assert metric_value(partial(7)) == 7          # a lower bound
    assert metric_value(unavailable()) is None    # never 0
    assert metric_value(None) is None and metric_value("12") is None
    assert is_lower_bound(partial(7)) and not is_lower_bound(complete(7))


def test_all_complete_is_a_complete_sum():
    total = aggregate([complete(10), complete(32)], scope="forward")
    assert total == {"status": "complete", "value": 42, "known_value": 42, "unit": "FLOPs", "scope": "forward",
                     "method": "torchscan_module_formula"}


def test_a_partial_or_unavailable_part_makes_a_lower_bound_with_the_method():
    # known parts: 10 (complete) + 5 (partial lower bound); the unavailable part adds nothing
    total = aggregate([complete(10), partial(5), unavailable()], scope="forward")
    assert (total["status"], total["value"], total["known_value"]) == ("partial", None, 15)
    assert total["method"] == "torchscan_module_formula"   # carried, not dropped
    # a complete zero is known: it keeps the total partial, not unavailable
    assert aggregate([complete(0), unavailable()])["status"] == "partial"


def test_nothing_known_is_unavailable():
    assert aggregate([unavailable(), unavailable()])["status"] == "unavailable"
    empty = aggregate([], unit="MACs", scope="forward", method="torchscan_module_formula")
    assert empty == {"status": "unavailable", "value": None, "known_value": None, "unit": "MACs", "scope": "forward",
                     "method": "torchscan_module_formula"}
    assert aggregate([None, None], unit="MACs", scope="forward", method="m")["status"] == "unavailable"


def test_not_counted_work_turns_a_complete_sum_into_its_lower_bound():
    total = aggregate([complete(10), not_counted("FLOPs", "module_call", "torchscan_module_formula")])
    assert (total["status"], total["known_value"]) == ("partial", 10)


def test_two_methods_are_never_added():
    with pytest.raises(ValueError, match="disagree on their method"):
        aggregate([complete(10), complete(5, method="torch.utils.flop_counter.FlopCounterMode")])
    with pytest.raises(ValueError, match="carry no unit"):
        aggregate([])


def test_metric_result_rules():
    assert metric_result(status="complete", value=3, known_value=1, **FORMULA)["known_value"] == 3
    assert metric_result(status="partial", value=3, known_value=1, **FORMULA)["value"] is None
    with pytest.raises(ValueError, match="requires a known_value"):
        metric_result(status="partial", **FORMULA)
    with pytest.raises(ValueError, match="status must be"):
        metric_result(status="done", value=1, **FORMULA)


def test_in_subtree():
    assert in_subtree("layer1.0.conv", ["layer1"]) and in_subtree("layer1", ["layer1"])
    assert not in_subtree("layer10.conv", ["layer1"])   # a prefix of the name is not an ancestor
    assert in_subtree("anything", [""])                 # the root holds everything


LAYERS = [
    {"path": "", "call_index": 0, "metrics": {}},
    {"path": "block", "call_index": 0, "metrics": {}},
    {"path": "block.fc", "call_index": 0, "metrics": {"module_flops": complete(100)}},
    {"path": "block.act", "call_index": 0, "metrics": {"module_flops": complete(8)}},
    {"path": "head", "call_index": 0, "metrics": {"module_flops": complete(20)}},
]
RESIDUAL = {"code": "container_work", "severity": "warning", "metric": "module_flops", "path": "block",
            "message": "Operators ran in the own forward of 'block' ...: aten.add x1."}


def test_a_subtree_holding_uncounted_container_work_is_partial():
    # block: fc 100 + act 8 = 108 known; its own residual add was not counted -> partial 108
    block = subtree_total(LAYERS, [RESIDUAL], "module_flops", ["block"])
    assert (block["status"], block["known_value"], block["method"]) == ("partial", 108, "torchscan_module_formula")
    # head holds no uncounted work: complete 20
    assert subtree_total(LAYERS, [RESIDUAL], "module_flops", ["head"])["value"] == 20
    # the whole forward: 100 + 8 + 20 = 128, partial because of block's work
    root = subtree_total(LAYERS, [RESIDUAL], "module_flops")
    assert (root["status"], root["known_value"], root["scope"]) == ("partial", 128, "forward")
    # the same diagnostic for another metric does not touch module_flops
    other = {**RESIDUAL, "metric": "macs"}
    assert subtree_total(LAYERS, [other], "module_flops", ["block"])["status"] == "complete"
    # a subtree without any metric of that name, nor uncounted work: unavailable, never 0
    assert subtree_total(LAYERS, [], "macs", ["block"])["status"] == "unavailable"

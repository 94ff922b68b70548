"""A result held against its budget and max_increase (session/budgets.py): the message a user sees
for each budget key, for a lower bound over and under its limit, for a metric that was not measured
and for a growth limit, on reports of real models with the numbers derived by hand.

Conv2d(3, 8, 3) on (1, 3, 32, 32): 8·27 + 8 = 224 parameters, 8·900·27 = 194,400 MACs and
2·194,400 = 388,800 FLOPs.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from torchscan_lsp import crawl_module
from torchscan_lsp.contract.metrics import metric_result
from torchscan_lsp.session.budgets import budget_findings
from torchscan_lsp.session.deltas import compare_views
from torchscan_lsp.session.results import ResultView
from torchscan_lsp.session.state import TargetKey, TargetState


def state_of(model: nn.Module, shape=(3, 32, 32), **fields) -> TargetState:
    result = {"ok": True, "report": crawl_module(model.eval(), shape), "source_map": {}, "imported_files": []}
    return TargetState(TargetKey("/ws", "m.py", "net"), SimpleNamespace(name="net", line=5, options={}),
                       view=ResultView(result), **fields)


@pytest.fixture(scope="module")
def conv() -> TargetState:
    return state_of(nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten()))


def said(state, **options):
    return [(f.severity, f.code, f.message) for f in budget_findings(state, options, "operators")]


def test_within_every_budget_nothing_is_said(conv):
    assert said(conv, budget={"params": "1k", "flops": "1 MFLOPs", "macs": "200k"}) == []


@pytest.mark.parametrize("budget, message", [
    ({"params": "200"}, "net: params budget exceeded: 224 params is over the limit of 200 params by 24 params (12 %); "
                        "most: `0` 224 params"),
    ({"flops": "300 kFLOPs"}, "net: flops budget exceeded: 389 kFLOPs (dispatched operators) is over the limit of "
                              "300 kFLOPs by 88.8 kFLOPs (30 %); most: `0` 389 kFLOPs"),
    ({"macs": "100k"}, "net: macs budget exceeded: 194 kMACs (dispatched operators) is over the limit of 100 kMACs by "
                       "94.4 kMACs (94 %); most: `0` 194 kMACs"),
])
def test_an_exceeded_count_names_value_limit_and_layers(conv, budget, message):
    assert said(conv, budget=budget) == [("warning", "budget-exceeded", message)]


def test_measured_budgets_need_their_measurement(conv):
    assert said(conv, budget={"peak_memory": "2 GiB", "latency": "5 ms"}) == [
        ("information", "budget-unchecked", 'net: the peak_memory budget of 2.00 GiB cannot be checked: peak memory was '
                                            'not measured: add measure=["memory"] to the target, or run Measure memory'),
        ("information", "budget-unchecked", 'net: the latency budget of 5.00 ms cannot be checked: latency was not '
                                            'measured: add measure=["latency"] to the target, or run Measure latency'),
    ]


def test_measured_budgets_once_measured():
    latency = metric_result(status="complete", value=0.008, unit="seconds", scope="forward", method="timer")
    state = state_of(nn.Sequential(nn.Conv2d(3, 8, 3)), measurements={
        "memory": {"delta_bytes": 3 * 2**20, "peak_bytes": 4 * 2**20, "metric": "pytorch_tensor_bytes", "device": "cpu"},
        "latency": {"totals": {"latency": latency}}})
    assert said(state, budget={"peak_memory": "2 MiB", "latency": "5 ms"}) == [
        ("warning", "budget-exceeded", "net: peak_memory budget exceeded: 3.00 MiB (measured, above the baseline) is "
                                       "over the limit of 2.00 MiB by 1.00 MiB (50 %)"),
        ("warning", "budget-exceeded", "net: latency budget exceeded: 8.00 ms (measured) is over the limit of 5.00 ms by "
                                       "3.00 ms (60 %)"),
    ]


def test_train_memory_is_the_training_steps_budget(conv):
    # the training report's own warning says an estimate over it (training_memory_over_budget); an
    # estimate that did not run cannot be checked
    fits = TargetState(conv.key, conv.target, view=conv.view, measurements={
        "train": {"kind": "training_step", "memory": {"budget": {"fits": False, "bytes": 1}}}})
    assert said(fits, budget={"train_memory": "24 GiB"}) == []
    assert said(conv, budget={"train_memory": "24 GiB"}) == [
        ("information", "budget-unchecked", "net: the train_memory budget of 24.0 GiB cannot be checked: the training "
                                            "step was not estimated (its diagnostic says why)")]


class QR(nn.Module):
    """Linear(4, 4) on (1, 4, 4), then torch.linalg.qr, which has no FLOP formula: 2·4·4·4 = 128 FLOPs
    counted, the qr's not."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return torch.linalg.qr(self.lin(x))[0]


def test_a_lower_bound_over_its_limit_is_a_warning_under_it_unconfirmed():
    state = state_of(QR(), (4, 4))
    assert said(state, budget={"flops": "100"}) == [
        ("warning", "budget-exceeded", "net: flops budget exceeded: ≥ 128 FLOPs (dispatched operators) is over the limit "
                                       "of 100 FLOPs by 28 FLOPs (28 %), counting only what was counted (the rest would "
                                       "add to it); most: `lin` 128 FLOPs")]
    assert said(state, budget={"flops": "1k"}) == [
        ("information", "budget-unconfirmed", "net: the flops budget of 1.00 kFLOPs cannot be confirmed: ≥ 128 FLOPs "
                                              "(dispatched operators) is a lower bound (some work has no formula; the "
                                              "warnings say where)")]


def test_growth_against_the_baseline():
    before = state_of(nn.Sequential(nn.Conv2d(3, 8, 3)))
    after = state_of(nn.Sequential(nn.Conv2d(3, 12, 3)))
    after.comparison = compare_views(before.view, after.view, "HEAD", "1a2b3c4")
    # 388,800 → 583,200 FLOPs: +194,400, +50 %; 224 → 336 parameters, +112
    assert said(after, max_increase={"flops": "5 %", "params": "200"}) == [
        ("warning", "max-increase-exceeded", "net: max_increase exceeded: flops grew by 194 kFLOPs (+50 %), 389 kFLOPs → "
                                             "583 kFLOPs since HEAD (1a2b3c4), more than the 5 % allowed; grew most: `0` "
                                             "+194 kFLOPs (changed)")]
    assert said(after, max_increase={"flops": "60 %"}) == []


def test_growth_without_a_baseline_cannot_be_checked(conv):
    from torchscan_lsp.session.deltas import Comparison

    conv.comparison = Comparison("HEAD", note="`net` is new since HEAD")
    try:
        assert said(conv, max_increase={"params": "1k"}) == [
            ("information", "budget-unchecked", "net: the params max_increase of 1.00k params cannot be checked: no baseline "
                                                "(`net` is new since HEAD)")]
        # a ref the repository does not have (a misspelt branch): the gate can never run, so it is
        # a warning that fails check, not an information that lets CI pass
        conv.comparison = Comparison("mian", note="the repository has no commit named 'mian'", unknown_ref=True)
        assert said(conv, max_increase={"params": "1k"}) == [
            ("warning", "baseline-unknown", "net: the params max_increase of 1.00k params cannot be checked: the "
                                            "repository has no commit named 'mian'; is compare_with misspelt?")]
        from torchscan_lsp.session.budgets import OVER_BUDGET_CODES
        assert "baseline-unknown" in OVER_BUDGET_CODES
    finally:
        conv.comparison = None

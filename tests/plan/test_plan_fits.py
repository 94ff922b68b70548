"""The plan's fits predict sizes they were not fitted on: within 2 % for FLOPs and 5 % for memory
on a small GPT, along the batch and along the sequence.

Each check evaluates the reported curve (``Σ coefficient · size**power``) in the test at a size
that none of the plan's estimates had, and holds it against an independent value there: the
memory against a real CPU step (PyTorch's profiler), the FLOPs against a count of the step at that
size (``estimate_training_memory``'s FLOP counter, a pass of its own)."""

from __future__ import annotations

import re

import pytest
from plan_models import gpt_factory, measured_peak

from torchscan_lsp.cli.scan_plan import plan_lines
from torchscan_lsp.engine.training import estimate_training_memory, plan_training
from torchscan_lsp.server.plan_card import plan_card
from torchscan_lsp.session.state import TargetKey, TargetState

MiB = 1 << 20


def _value(curve: dict, x: float) -> float:
    return sum(c * x ** p for c, p in zip(curve["coefficients"], curve["powers"]))


@pytest.fixture(scope="module")
def gpt_plan():
    return plan_training(gpt_factory(4), plan={"precision": ["float32"], "checkpointing": ["none"], "sequence": "0:1"},
                         memory_budget=40 * MiB)


def _held_out(record: dict, axis: str) -> int:
    tried = {point[axis] for point in record["estimates"]}
    size = record["largest"]["value"] // 2 + 1
    while size in tried:
        size += 1
    return size


@pytest.mark.parametrize("axis", ["batch", "sequence"])
def test_the_memory_fit_predicts_a_size_it_was_not_fitted_on_within_5_percent(gpt_plan, axis):
    record = gpt_plan["policies"][0][axis]
    size = _held_out(record, axis)
    predicted = max(_value(curve, size) for curve in record["fit"]["memory"]["phases"].values())
    batch, tokens = (size, 64) if axis == "batch" else (1, size)
    real = measured_peak(gpt_factory(batch, tokens))
    assert abs(predicted - real) <= 0.05 * real, (axis, size, predicted, real)


@pytest.mark.parametrize("axis", ["batch", "sequence"])
def test_the_flops_fit_predicts_a_size_it_was_not_fitted_on_within_2_percent(gpt_plan, axis):
    record = gpt_plan["policies"][0][axis]
    size = _held_out(record, axis)
    batch, tokens = (size, 64) if axis == "batch" else (1, size)
    counted = estimate_training_memory(gpt_factory(batch, tokens))["flops"]["totals"]["training_flops"]
    assert counted["status"] == "complete"
    predicted = _value(record["fit"]["flops"], size)
    assert abs(predicted - counted["value"]) <= 0.02 * counted["value"], (axis, size, predicted, counted)


def test_the_sequence_fit_names_attentions_share_of_the_flops(gpt_plan):
    # dense convention, per block and sample: Q·Kᵀ and the weighted sum are 2·T²·d FLOPs each in
    # the forward, and each costs two such products in the backward (the gradients of both of its
    # inputs): 3 · 4·T²·d = 12·T²·d; two blocks of width 128: 24 · 128 = 3,072 FLOPs per T², and the
    # softmax over the T² scores adds a few FLOPs per score and head on top
    record = gpt_plan["policies"][0]["sequence"]
    curve = record["fit"]["flops"]
    quadratic = curve["coefficients"][curve["powers"].index(2)]
    assert 3072 <= quadratic <= 1.25 * 3072
    share = record["fit"]["quadratic_share"]
    size = record["largest"]["value"]
    assert share["size"] == size
    assert share["share"] == pytest.approx(quadratic * size ** 2 / _value(curve, size))
    assert any(f"at T = {size:,}" in text for text in record["fit"]["texts"])


def test_the_tables_say_the_length_is_at_batch_1_and_the_flops_are_per_device(gpt_plan):
    # the sequence is searched at batch 1 (docs/measurement.md), and a sharded policy's FLOPs are
    # one rank's at its own batch: both headers say so, in the scan's table and the hover's
    header = re.split(r"\s{2,}", plan_lines(gpt_plan)[1].strip())
    assert header == ["policy", "max batch", "max length at batch 1", "peak", "largest", "FLOPs/step per device"]
    state = TargetState(TargetKey("/ws", "gpt.py", "build"), target=None, measurements={"plan": gpt_plan})
    assert "| policy | max batch | max length at batch 1 | peak | largest |" in plan_card(state)

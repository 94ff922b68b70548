"""A plan's estimates against real CPU steps, and its answer against the largest batch that fits.

The independent method is PyTorch's profiler on an actual step (``measure_peak_memory``): a real
steady-state CPU step of the same model, the same optimizer and the same inputs, built in the test.
The issue asks ±5 % (PyTorch's own ``MemTracker`` tests accept ±10 %). Measured on PyTorch 2.13
(CPU) when this was written: the MLP and the GPT 0-12 bytes apart at every batch, the CNN 256 bytes.

A CNN with 16 channels in its first convolution is **not** estimated within 5 % at batch 1: oneDNN's
backward of that convolution then allocates 84 KB of workspace that no tensor holds (17.7 % of a
476 KB step; at batch 2 and above it does not). docs/measurement.md ("Planning a training run")
lists it; the CNN here has 8.
"""

from __future__ import annotations

import pytest
from plan_models import SmallCNN, gpt_factory, measured_peak, mlp

from torchscan_lsp.contract.plan import Policy
from torchscan_lsp.contract.training import parse_train_options
from torchscan_lsp.engine.training import plan_training
from torchscan_lsp.engine.training.estimator import PolicyEstimator

MiB = 1 << 20

#: name -> (factory of the model at a batch, input_shape or None for the factory's own inputs)
MODELS = {
    "mlp": (lambda batch: mlp, (256,)),
    "cnn": (lambda batch: SmallCNN, (3, 32, 32)),
    "gpt": (gpt_factory, None),
}
FLOAT32 = Policy("float32", "adamw", "none", "single")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_estimated_peak_is_within_5_percent_of_a_real_step_at_batch_1_4_16(name):
    factory, shape = MODELS[name]
    with PolicyEstimator(factory(4), FLOAT32, parse_train_options({}), input_shape=shape) as estimator:
        estimated = {batch: estimator.estimate(batch).peak_bytes for batch in (1, 4, 16)}
    for batch, peak in estimated.items():
        real = measured_peak(factory(batch), batch=batch, input_shape=shape)
        assert abs(peak - real) <= 0.05 * real, (name, batch, peak, real)


#: budgets of a few MiB that put each model's answer between about 15 and 110 samples: the MLP's
#: step is 8.1 MiB of weights, gradients and AdamW state plus about 1 KiB a sample; the CNN's
#: about 230 KiB a sample; the GPT's 9.2 MiB plus about 2 MiB a sample
BUDGETS = {"mlp": 8.2 * MiB, "cnn": 4 * MiB, "gpt": 40 * MiB}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_planned_batch_is_the_largest_measured_one_or_one_below(name):
    factory, shape = MODELS[name]
    budget = int(BUDGETS[name])
    report = plan_training(factory(4), plan={"precision": ["float32"], "checkpointing": ["none"]},
                           memory_budget=budget, input_shape=shape)
    (policy,) = report["policies"]
    batch = policy["batch"]
    planned = batch["largest"]["value"]
    assert batch["largest"]["status"] == "complete" and batch["limit"] == "budget"
    # the answer rests on estimates at it and one above it, not on the fit alone
    assert batch["at_largest"]["batch"] == planned and batch["at_largest"]["peak_bytes"] <= budget
    assert batch["above"]["batch"] == planned + 1 and batch["above"]["peak_bytes"] > budget

    # real steps: the largest batch whose step fits is the planned one or one above it exactly when
    # the step fits at the planned batch and not two above it (a step's peak grows with its batch)
    real = {size: measured_peak(factory(size), batch=size, input_shape=shape) for size in (planned, planned + 2)}
    assert real[planned] <= budget < real[planned + 2], (name, planned, budget, real)

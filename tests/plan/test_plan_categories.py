"""The categories at a step's peak are fitted only where they are a function of the size: the moment
of the peak moves with the batch, and a category there changes with it.

The model is plan_models.token_mlp (an MLP 64-256-10 on 40 rows a sample, N = 64·256 + 256 + 256·10
+ 10 = 19,210 parameters) trained with SGD and weight decay, whose peak moves, by hand:

* at batch 1 the optimizer step is the largest phase: every gradient exists (4·N bytes) beside the
  parameters, with weight decay's ``grad + λ·param`` of the largest weight (4·256·64 bytes);
* from batch 2 on the backward is: 40 rows a sample of activations and their gradients outgrow
  that, and at its peak (the first layer's weight gradient being computed) only the head's
  gradients exist, 4·(256·10 + 10) bytes.

So the gradients at the peak are 4·N at batch 1 and 4·2,570 from batch 2 on: no line of the batch.
The line through the plan's first two sizes, 4·N − 4·(N − 2,570)·(B − 1), would be negative from
batch 3. The inputs, 40·64 float32 a sample, live through the whole step: at every moment they are
10,240 bytes a sample, a line.
"""

from __future__ import annotations

import pytest
from plan_models import token_mlp
from torch import nn

from torchscan_lsp.cli.scan_plan import plan_lines
from torchscan_lsp.contract import format as fmt
from torchscan_lsp.engine.reporting.html.plan import plan_section
from torchscan_lsp.engine.training import plan_training

N, HEAD = 64 * 256 + 256 + 256 * 10 + 10, 256 * 10 + 10
SGD = {"optimizer": "sgd", "weight_decay": 0.01}


@pytest.fixture(scope="module")
def moving_peak():
    return plan_training(token_mlp, train=SGD, plan={"precision": ["float32"], "checkpointing": ["none"]},
                         memory_budget="4 MiB", input_shape=(40, 64))


def test_the_peak_moves_from_the_optimizer_step_to_the_backward(moving_peak):
    batch = moving_peak["policies"][0]["batch"]
    by_size = {point["batch"]: point for point in batch["estimates"]}
    assert by_size[1]["peak_phase"] == "optimizer_step"
    assert by_size[1]["by_category"]["gradients"] == 4 * N
    assert by_size[1]["by_category"]["temporaries"] == 4 * 256 * 64
    for size in (2, batch["largest"]["value"]):
        assert by_size[size]["peak_phase"] == "backward"
        assert by_size[size]["by_category"]["gradients"] == 4 * HEAD


def test_a_category_that_changes_with_the_moment_of_the_peak_is_not_fitted(moving_peak):
    batch = moving_peak["policies"][0]["batch"]
    memory = batch["fit"]["memory"]
    assert memory["fitted_on"] == [1, 2]
    assert "gradients" not in memory["categories"]
    evidence = memory["not_fitted"]["gradients"]
    # the line through batch 1 (4·N) and batch 2 (4·HEAD), held against an estimate it missed
    assert evidence["curve"]["coefficients"] == pytest.approx([4 * N + 4 * (N - HEAD), -4 * (N - HEAD)])
    size = evidence["size"]
    assert evidence["predicted"] == pytest.approx(4 * N - 4 * (N - HEAD) * (size - 1)) and evidence["predicted"] < 0
    assert evidence["estimated"] == 4 * HEAD
    # the inputs are a line at every moment, and stay
    assert memory["categories"]["inputs"]["coefficients"] == pytest.approx([0, 40 * 64 * 4], abs=1e-6)
    # the peak's own fit holds where it answers
    assert abs(batch["fit"]["held_out"]["memory"]["relative_error"]) < 0.01


def test_every_view_says_which_categories_are_not_fitted_and_prints_no_line_for_them(moving_peak):
    batch = moving_peak["policies"][0]["batch"]
    answer = batch["largest"]["value"]
    texts = batch["fit"]["texts"]
    assert texts[0].startswith("peak (backward) = ") and texts[0].endswith(", fitted at batch 1 and 2")
    assert "inputs = 10.0 KiB × batch" in texts
    assert not any(text.startswith("gradients =") for text in texts)
    (note,) = [text for text in texts if text.startswith("not fitted")]
    assert note.startswith("not fitted, as the moment of the peak moves with the batch: ")
    assert f"gradients {fmt.byte_size(4 * HEAD)}" in note and note.endswith(f"at batch {answer}")
    scanned = "\n".join(plan_lines(moving_peak))
    page = plan_section(moving_peak)
    for view in (scanned, page):
        assert "gradients =" not in view and "not fitted, as the moment of the peak moves with the batch" in view


def test_a_fit_made_again_at_the_search_ceiling_is_held_against_an_earlier_estimate():
    # batch 1 and 2 mislead the fit at a large batch (at small ones the backward's peak is another
    # moment), so it is made again on 2,048 and 4,096 -- the ceiling, which fits: the search then
    # makes no estimate after it, and the fit's error is the one at batch 2, the nearest estimate
    # it was not fitted on
    def mlp():
        return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))

    report = plan_training(mlp, train={"optimizer": "sgd"}, memory_budget="1 GiB", input_shape=(64,),
                           plan={"precision": ["bfloat16-mixed"], "checkpointing": ["none"], "max_batch": 4096})
    batch = report["policies"][0]["batch"]
    assert batch["limit"] == "ceiling" and batch["fit"]["memory"]["fitted_on"] == [2048, 4096]
    held = batch["fit"]["held_out"]["memory"]
    two = next(point for point in batch["estimates"] if point["batch"] == 2)
    phases = batch["fit"]["memory"]["phases"].values()
    predicted = max(sum(c * 2 ** p for c, p in zip(curve["coefficients"], curve["powers"])) for curve in phases)
    assert (held["size"], held["estimated"]) == (2, two["peak_bytes"])
    assert held["predicted"] == pytest.approx(predicted)
    assert held["relative_error"] == pytest.approx((predicted - two["peak_bytes"]) / two["peak_bytes"])
    assert any(line.startswith("    batch: the memory fit at 2 (not fitted on): ") for line in plan_lines(report))

"""Training-step memory of an MLP, derived by hand, estimated (fake tensors) and measured (CPU).

The model: ``Linear(256, 512) -> ReLU -> Linear(512, 128)``, fp32, batch 32, the default loss
(the sum of the output). Sizes in bytes (4 per element):

    W0 = 512 * 256 * 4 = 524,288     b0 = 512 * 4 = 2,048
    W2 = 128 * 512 * 4 = 262,144     b2 = 128 * 4 = 512
    P  = W0 + b0 + W2 + b2 = 788,992 (parameters; their gradients are as large)
    x  = 32 * 256 * 4 = 32,768 (input)   h = 32 * 512 * 4 = 65,536   out = 32 * 128 * 4 = 16,384

The step keeps ``out`` and the 4-byte loss referenced until it ends, as a plain loop does.
"""

from __future__ import annotations

import json

import pytest
from torch import nn

from torchscan_lsp.engine.training import analyse_training_step, estimate_training_memory, measure_training_memory
from torchscan_lsp.engine.training.cuda import cuda_block_bytes

W0, B0, W2, B2 = 512 * 256 * 4, 512 * 4, 128 * 512 * 4, 128 * 4
P = W0 + B0 + W2 + B2
X, H, OUT, LOSS = 32 * 256 * 4, 32 * 512 * 4, 32 * 128 * 4, 4
OPTIONS = {"input_shape": (256,)}


def mlp():
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 128))


# SGD without momentum keeps no state. The peak is in the backward of the first Linear: its weight
# gradient (W0 bytes) and bias gradient (B0) are being computed from the gradient of the hidden layer
# (H, from threshold_backward), while the second Linear's gradients (W2 + B2) are already in .grad;
# the parameters, the input, the output, the loss and the loss's gradient (a 4-byte ones_like,
# expanded) are live. The first Linear computes no input gradient (its input is data).
SGD_PEAK = P + X + (W2 + B2) + H + W0 + B0 + OUT + LOSS + 4
SGD_BY_CATEGORY = {
    "parameters": P, "buffers": 0, "gradients": W2 + B2, "optimizer_state": 0,
    # MemTracker's tags: the forward's tensors are activations (out, loss, and the loss gradient,
    # created before the backward starts), the backward's until they reach .grad are temporaries
    "activations": OUT + LOSS + 4, "temporaries": H + W0 + B0, "inputs": X,
}


def test_sgd_without_momentum_by_hand():
    estimate = estimate_training_memory(mlp, train={"optimizer": "sgd", "batch": 32}, **OPTIONS, count_flops=False)
    assert SGD_PEAK == 1_692_680
    assert estimate["peak"]["value"] == SGD_PEAK
    assert estimate["peak_phase"] == "backward"
    assert estimate["by_category"] == SGD_BY_CATEGORY
    # no optimizer state in any phase, nor between steps
    assert all(phase["by_category"]["optimizer_state"] == 0 for phase in estimate["phases"].values())
    assert estimate["persistent"]["by_category"] == {**dict.fromkeys(SGD_BY_CATEGORY, 0), "parameters": P, "inputs": X}
    # the forward's peak: relu's input h and output r (both H) live at once, before h is freed
    assert estimate["phases"]["forward"]["peak_bytes"] == P + X + 2 * H
    # at the end of the forward: r (saved by the second Linear), out and the loss
    assert estimate["phases"]["forward"]["end_by_category"]["activations"] == H + OUT + LOSS
    measured = measure_training_memory(mlp, train={"optimizer": "sgd", "batch": 32}, **OPTIONS)
    assert measured["peak"]["value"] == SGD_PEAK
    assert measured["peak_phase"] == "backward"
    # each category means the same in both methods: the measured step's split is the hand-derived
    # one above (gradients = what is in .grad: W2 + B2, not W0 + B0, which are still being computed),
    # and nothing is left unattributed
    assert measured["by_category"] == {**SGD_BY_CATEGORY, "untracked": 0}
    assert sum(measured["by_category"].values()) == SGD_PEAK


def test_sgd_peak_as_cuda_blocks():
    # The 13 storages live at the peak, each rounded up to 512 bytes by the CUDA allocator: the
    # 4-byte loss and loss gradient become 512 each; everything else is already a multiple of 512.
    live = [W0, B0, W2, B2, W2, B2, H, W0, B0, OUT, LOSS, 4, X]
    cuda = estimate_training_memory(mlp, train={"optimizer": "sgd", "batch": 32}, **OPTIONS, count_flops=False)["cuda"]
    assert cuda["derived"] is True
    assert cuda["blocks_at_peak"] == len(live) == 13
    assert cuda["allocated_peak_bytes"] == sum(map(cuda_block_bytes, live)) == SGD_PEAK - 8 + 2 * 512
    # blocks up to 1 MiB share 2 MiB segments: 1,693,696 bytes fill one
    assert cuda["reserved_if_packed_bytes"] == 2 << 20


# AdamW keeps exp_avg and exp_avg_sq (P each) and a 4-byte step counter per parameter tensor (4).
ADAMW_STATE = 2 * P + 4 * 4


@pytest.mark.parametrize(("foreach", "temporaries"), [
    # foreach=True (PyTorch's default on CUDA): _foreach_sqrt(exp_avg_sqs) makes one new list as large
    # as all parameters; the division by the bias correction and the addition of eps are in place,
    # then _foreach_addcdiv_ updates the parameters
    (True, P),
    # foreach=False (PyTorch's default on CPU), one parameter at a time:
    # denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps) holds the square root and the
    # quotient of the largest parameter, W0, at once
    (False, 2 * W0),
])
def test_adamw_by_hand(foreach, temporaries):
    train = {"batch": 32, "foreach": foreach}
    estimate = estimate_training_memory(mlp, train=train, **OPTIONS, count_flops=False)
    # the peak is in the optimizer step: parameters, all gradients, the state, the update's temporaries,
    # the output, the loss and the input
    peak = P + P + ADAMW_STATE + temporaries + OUT + LOSS + X
    assert estimate["foreach"] is foreach
    assert estimate["peak_phase"] == "optimizer_step"
    assert estimate["peak"]["value"] == peak
    assert estimate["by_category"] == {"parameters": P, "buffers": 0, "gradients": P, "optimizer_state": ADAMW_STATE,
                                       "activations": OUT + LOSS, "temporaries": temporaries, "inputs": X}
    # the state is live through the whole step (a steady-state step), and stays after it
    assert estimate["phases"]["forward"]["by_category"]["optimizer_state"] == ADAMW_STATE
    assert estimate["persistent"]["bytes"] == P + ADAMW_STATE + X
    measured = measure_training_memory(mlp, train=train, **OPTIONS)
    assert abs(measured["peak"]["value"] - peak) <= 16  # the profiler also sees a few scalar tensors
    # the same categories as the estimate at its peak, those scalars under untracked
    by_category = dict(measured["by_category"])
    assert 0 <= by_category.pop("untracked") <= 16
    assert by_category == estimate["by_category"]
    assert sum(measured["by_category"].values()) == measured["peak"]["value"]


def test_side_by_side_with_a_budget():
    report = analyse_training_step(mlp, train={"batch": 32, "foreach": True}, **OPTIONS, memory_budget="2 MiB")
    assert json.loads(json.dumps(report)) == report
    assert (report["schema_version"], report["kind"], report["context"]["package"]) == (1, "training_step", "torchscan-lsp")
    memory = report["memory"]
    assert memory["estimated"]["method"].startswith("torch.distributed._tools.mem_tracker.MemTracker")
    assert memory["measured"]["method"] == "torchscan_lsp.measure_peak_memory"
    comparison = memory["comparison"]
    assert comparison["estimated_bytes"] == memory["estimated"]["peak"]["value"]
    assert comparison["measured_bytes"] == memory["measured"]["peak"]["value"]
    assert comparison["difference_bytes"] == comparison["measured_bytes"] - comparison["estimated_bytes"]
    assert comparison["agree"] is True and comparison["tolerance"] == 0.01
    # 3.81 MiB estimated against 2 MiB: a warning naming the largest categories, largest first (the
    # parameters, gradients and foreach temporaries tie at P: ties keep the categories' order)
    budget = memory["budget"]
    assert budget["fits"] is False and budget["bytes"] == 2 << 20
    assert [c["category"] for c in budget["largest_categories"]] == ["optimizer_state", "parameters", "gradients"]
    (warning,) = [d for d in report["diagnostics"] if d["code"] == "training_memory_over_budget"]
    assert warning["severity"] == "warning"
    assert "exceeds the memory budget of 2.00 MiB" in warning["message"]
    assert "optimizer state 1.50 MiB" in warning["message"] and "in the optimizer step" in warning["message"]
    assert report["flops"]["totals"]["training_flops"]["status"] == "complete"
    fits = analyse_training_step(mlp, train={"batch": 32}, **OPTIONS, memory_budget="1 GiB", measure=False)
    assert fits["memory"]["budget"]["fits"] is True
    assert not [d for d in fits["diagnostics"] if d["code"] == "training_memory_over_budget"]


def test_sgd_by_module_by_hand():
    modules = estimate_training_memory(mlp, train={"optimizer": "sgd", "batch": 32}, **OPTIONS,
                                       count_flops=False)["by_module"]
    assert set(modules) == {"", "0", "1", "2"}
    first, relu, second = modules["0"], modules["1"], modules["2"]
    assert (first["parameters"], first["inputs"], first["outputs"]) == (W0 + B0, X, H)
    assert (relu["parameters"], relu["inputs"], relu["outputs"]) == (0, H, H)
    assert (second["parameters"], second["inputs"], second["outputs"]) == (W2 + B2, H, OUT)
    # while the first Linear runs: the parameters, the input and its output h
    assert first["forward_peak_bytes"] == P + X + H
    # while the second Linear's backward runs: besides the parameters, the input, out, the loss and
    # its gradient, relu's output r (saved, freed when this backward ends), the gradient of r, and
    # the weight and bias gradients
    assert second["backward_peak_bytes"] == P + X + OUT + LOSS + 4 + H + H + W2 + B2
    # the step's peak falls in the first Linear's backward
    assert first["backward_peak_bytes"] == modules[""]["backward_peak_bytes"] == SGD_PEAK


def test_a_step_the_estimate_puts_over_the_memory_limit_is_not_run():
    # the parameters alone are P = 788,992 bytes: under a limit of 1 MB (1,000,000 B) the peak,
    # with gradients as large, cannot fit; the estimate stands, the measured column says why
    report = analyse_training_step(mlp, train={"optimizer": "sgd", "batch": 32}, **OPTIONS,
                                   measure_limit=(1_000_000, "a 1 MB limit"))
    assert report["memory"]["estimated"]["peak"]["value"] > 2 * P
    measured = report["memory"]["measured"]
    assert measured["peak"]["status"] == "unavailable"
    assert measured["reason"].startswith("not run: the step needs about ")
    assert measured["reason"].endswith("more than a 1 MB limit; the estimate stands for it")
    # under a limit it fits, the step runs
    roomy = analyse_training_step(mlp, train={"optimizer": "sgd", "batch": 32}, **OPTIONS,
                                  measure_limit=(1 << 30, "a 1 GiB limit"))
    assert roomy["memory"]["measured"]["peak"]["status"] == "complete"

"""A Llama-7B-sized training step estimated on fake tensors, its categories derived by hand.

The timing and resident-memory targets (under 10 s, under 2 GB) are checked by
``benchmarks/train_llama7b.py``; this test checks the numbers.
"""

from __future__ import annotations

import torch

from torchscan_lsp.engine.training import analyse_training_step, estimate_training_memory

F32 = 4  # bytes per element


def _activations(b, s, d, h, f, vocab, layers):
    """Bytes live at the end of the forward of ``LlamaBlocks`` (fp32, SDPA, default loss), by hand.

    Per block, the tensors autograd keeps for the backward (each (b, s, d) unless noted):
      input norm: rsqrt's result r (b, s, 1), x * r, and (x * r) * weight (the projections' input);
      attention: q, k, v (saved by SDPA), SDPA's output and its log-sum-exp (b, h, s) -- the
        output's (b, s, h, d/h) layout makes the transpose + reshape a view, saved by o_proj;
      the residual sum x + attn (saved by the next norm's pow and multiplication);
      post norm: as the input norm; feed-forward: gate (b, s, f, saved by silu), silu(gate) and up
        (saved by their product), the product (saved by down_proj); the block's output.
    That is 10 (b, s, d) + 4 (b, s, f) + 2 (b, s, 1) + (b, h, s) per block; around the blocks the
    embedding's output, the final norm (r, x * r, its output), the logits (b, s, vocab) held as the
    step's output, and the 4-byte loss.
    """
    bsd, bsf, bs, bhs = b * s * d, b * s * f, b * s, b * h * s
    per_block = 10 * bsd + 4 * bsf + 2 * bs + bhs
    return F32 * (layers * per_block + bsd + (bs + 2 * bsd) + b * s * vocab) + 4


def test_activations_of_a_small_decoder_by_hand(llama_blocks):
    shape = {"vocab": 100, "width": 64, "layers": 2, "heads": 4, "hidden": 96}

    def build():
        return llama_blocks.LlamaBlocks(**shape), (torch.zeros(2, 16, dtype=torch.long),)

    estimate = estimate_training_memory(build, train={"optimizer": "sgd"}, count_flops=False)
    end = estimate["phases"]["forward"]["end_by_category"]
    expected = _activations(2, 16, 64, 4, 96, 100, 2)
    assert expected == 301_188
    assert end["activations"] == expected
    assert end["parameters"] == F32 * llama_blocks.parameter_count(**shape)


def test_llama_7b_categories(llama_blocks):
    config = llama_blocks.LLAMA_7B
    n = llama_blocks.parameter_count(**config)
    assert n == 6_738_415_616  # Llama-7B's parameter count
    tensors = 1 + config["layers"] * 9 + 2  # embedding, 9 per block (2 norms, 4 + 3 matrices), norm, head
    batch, length = 1, 8

    def build():
        return llama_blocks.LlamaBlocks(**config), (torch.zeros(batch, length, dtype=torch.long),)

    report = analyse_training_step(build, device="cuda", memory_budget="80 GiB")
    estimate = report["memory"]["estimated"]
    # steady-state AdamW with foreach (PyTorch's default on CUDA): the peak is in the optimizer step
    assert estimate["foreach"] is True and estimate["peak_phase"] == "optimizer_step"
    at_peak = estimate["by_category"]
    assert at_peak["parameters"] == 4 * n  # fp32
    assert at_peak["gradients"] == 4 * n
    assert at_peak["optimizer_state"] == 8 * n + 4 * tensors  # exp_avg, exp_avg_sq, a 4-byte step each
    assert at_peak["temporaries"] == 4 * n  # _foreach_sqrt(exp_avg_sqs)
    assert at_peak["activations"] == F32 * batch * length * config["vocab"] + 4  # the logits and the loss
    forward_end = estimate["phases"]["forward"]["end_by_category"]["activations"]
    assert forward_end == _activations(batch, length, config["width"], config["heads"], config["hidden"],
                                       config["vocab"], config["layers"])
    # a CUDA GPU cannot be measured here; the budget is held against the derived CUDA allocation
    assert report["memory"]["measured"]["peak"]["status"] == "unavailable"
    budget = report["memory"]["budget"]
    assert budget["fits"] is False and budget["compared"] == "estimated peak, CUDA allocated (derived)"
    assert budget["peak_bytes"] == estimate["cuda"]["allocated_peak_bytes"] >= estimate["peak"]["value"]
    (warning,) = [d for d in report["diagnostics"] if d["code"] == "training_memory_over_budget"]
    assert "optimizer state 50.2 GiB" in warning["message"] and "80.0 GiB" in warning["message"]
    # The forward's matrix products: 2 x (parameters outside the embedding and the norms) x tokens.
    # The rest is attention scores and weighted sums (4 b s^2 d per block, 34 MFLOPs here) and
    # element-wise work (tens of FLOPs per (b, s, d) element per block, about 30 MFLOPs): under 0.1 %
    # of the products' 105 GFLOPs, so 1 % bounds it. Every Linear's input requires grad (it comes
    # from the embedding, a parameter), so the backward's products are twice the forward's.
    flops = report["flops"]["totals"]
    assert flops["training_flops"]["status"] == "complete"
    norms = (2 * config["layers"] + 1) * config["width"]
    products = 2 * (n - config["vocab"] * config["width"] - norms) * batch * length
    assert products <= flops["forward_flops"]["value"] <= 1.01 * products
    assert 2 * products <= flops["backward_flops"]["value"] <= 1.01 * 2 * products

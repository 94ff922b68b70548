"""The training step's roofline, its MFU and the 6·N·tokens estimate (engine/reporting/roofline),
on a training report whose numbers are chosen here, so that every expected value is arithmetic on
them (docs/measurement.md, "Roofline"), and the nanoGPT-style example's real analysis report for
its parameters, tied head and position embedding."""

import sys
from pathlib import Path

import pytest

from torchscan_lsp import crawl_module
from torchscan_lsp.engine.reporting.roofline import measured_ceilings, roofline_report, table_ceilings

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import gpt  # noqa: E402

from test_roofline import MACHINE  # noqa: E402  (peak 1e11 FLOP/s, bandwidth 1e10 B/s, cpu)


def metric(value, unit):
    return {"status": "complete", "value": value, "known_value": value, "unit": unit, "scope": "workload", "method": "m"}


ATTENTION = {"operator": "aten._scaled_dot_product_flash_attention_for_cpu", "batch": 1, "heads": 4, "query_length": 16,
             "key_length": 16, "head_dim": 16, "causal": True}
CATEGORIES = {"parameters": 400, "buffers": 0, "gradients": 400, "optimizer_state": 800, "activations": 100,
              "temporaries": 50, "inputs": 128}


def training(device="cpu"):
    return {
        "kind": "training_step", "options": {"device": device},
        "flops": {"totals": {"training_flops": metric(1_000_000, "FLOPs")}, "recomputed": {"flops": 100_000, "calls": 2},
                  "attention_calls": [ATTENTION, ATTENTION], "attention_flops": 500_000},
        "memory": {"estimated": {"peak": metric(1878, "bytes"), "by_category": CATEGORIES},
                   "measured": {"peak": {"status": "unavailable"}}},
        "step_time": {"device": device, "time": metric(0.01, "seconds"), "iqr": metric(0.001, "seconds"),
                      "inputs": {"args": [{"kind": "tensor", "shape": [1, 16], "dtype": "torch.int64"}], "kwargs": {}}},
    }


@pytest.fixture(scope="module")
def report():
    model, args = gpt.gpt_small()
    return crawl_module(model, args=args)


def test_the_step_s_roofline(report):
    step = roofline_report(report, measured_ceilings(MACHINE), training=training())["training_step"]
    compute = 1_000_000 / 1e11
    forward_backward = (2 * 400 + 2 * 100 + 128) / 1e10  # parameters read, gradients written, activations twice, inputs
    optimizer = (2 * 400 + 400 + 2 * 800) / 1e10         # parameters read and written, gradients read, state twice
    assert step["compute_time"] == pytest.approx(compute)
    assert step["memory_time"] == pytest.approx(forward_backward)
    assert step["optimizer_time"] == pytest.approx(optimizer)
    assert step["roofline_time"]["value"] == pytest.approx(compute + optimizer)
    assert (step["bound"], step["bytes"]["categories_from"]) == ("compute", "estimated")


def test_the_update_moves_only_the_trainable_parameters(report):
    # a quarter of the parameters trainable (25 of 100 elements): the update reads and writes
    # 400 B × 1/4 of them, with the gradients and the optimizer state those 25 have (100 B, 200 B)
    frozen = {**training(), "parameters": {"parameters": metric(100, "elements"),
                                           "trainable_parameters": metric(25, "elements")}}
    frozen["memory"]["estimated"]["by_category"] = {**CATEGORIES, "gradients": 100, "optimizer_state": 200}
    step = roofline_report(report, measured_ceilings(MACHINE), training=frozen)["training_step"]
    assert step["bytes"]["optimizer"] == 2 * 400 // 4 + 100 + 2 * 200
    assert step["optimizer_time"] == pytest.approx(700 / 1e10)


def test_mfu_and_hfu(report):
    step = roofline_report(report, measured_ceilings(MACHINE), training=training())["training_step"]
    mfu = step["mfu"]
    assert mfu["value"] == pytest.approx((1_000_000 - 100_000) / (0.01 * 1e11))  # recomputation left out
    assert mfu["hfu"] == pytest.approx(1_000_000 / (0.01 * 1e11))
    assert (mfu["model_flops"], mfu["step_time"], mfu["peak_flops"]) == (900_000, 0.01, 1e11)


def test_the_estimate_and_what_makes_the_count_differ(report):
    estimate = roofline_report(report, measured_ceilings(MACHINE), training=training())["training_step"]["mfu"]["estimate"]
    parameters = 16384 + 2048 + 2 * (2 * 128 + 12480 + 4160 + 16640 + 16448) + 128  # wte (= head), wpe, 2 blocks, ln_f
    assert estimate["parameters"] == parameters == 118_528
    assert estimate["tokens"] == 16
    assert estimate["six_n_tokens"] == 6 * parameters * 16
    attention = 2 * 12 * 4 * 16 * 16 * 16  # 12·L·H·Q·T per token, 16 tokens
    assert (estimate["attention_term"], estimate["attention_layers"], estimate["heads"]) == (attention, 2, 4)
    assert estimate["value"] == 6 * parameters * 16 + attention
    # wpe is read by a lookup only; wte does its multiply-adds as the tied head, and stays in
    assert estimate["embedding_parameters"] == 32 * 64
    parts = estimate["parts"]
    assert parts["attention"] == 500_000 - attention
    assert parts["embeddings"] == -6 * 2048 * 16
    assert parts["other"] == 900_000 - estimate["value"] - parts["attention"] - parts["embeddings"]
    assert estimate["difference"] == 900_000 - estimate["value"]
    assert estimate["causal_skippable_flops"] == attention // 2  # both calls causal
    assert estimate["recomputed_flops"] == 100_000


def test_frozen_weights_forward_is_a_part_of_its_own():
    # LoRA-style: the blocks' Linear weights frozen, the embeddings (wte tied to the head, wpe a
    # lookup) and the norms trainable. 6·N counts the trainable only; each frozen weight still
    # multiplies in the forward: 2·N_frozen·tokens of the difference
    model, args = gpt.gpt_small()
    for name, parameter in model.named_parameters():
        if name.endswith(".weight") and parameter.dim() == 2 and "wte" not in name and "wpe" not in name:
            parameter.requires_grad_(False)
    frozen = 2 * (12288 + 4096 + 16384 + 16384)  # 2 blocks: qkv 64·192, proj 64·64, fc 64·256, fc2 256·64
    estimate = roofline_report(crawl_module(model, args=args), measured_ceilings(MACHINE),
                               training=training())["training_step"]["mfu"]["estimate"]
    assert estimate["frozen_parameters"] == frozen
    assert estimate["parameters"] == 118_528 - frozen
    parts = estimate["parts"]
    assert parts["frozen"] == 2 * frozen * 16
    assert sum(parts.values()) == estimate["difference"] == 900_000 - estimate["value"]


def test_no_mfu_against_a_device_the_step_did_not_run_on(report):
    step = roofline_report(report, table_ceilings("H100-SXM", "float32"), training=training("cpu"))["training_step"]
    assert step["mfu"] is None
    assert step["mfu_unavailable"] == "the step ran on cpu; H100-SXM's datasheet peak says nothing of it"
    # a step measured on a GPU is held against the datasheet's peak: what MFU means
    gpu = roofline_report(report, table_ceilings("H100-SXM", "bfloat16"), training=training("cuda:0"))["training_step"]
    assert gpu["mfu"]["value"] == pytest.approx(900_000 / (0.01 * 989.5e12))


def test_without_token_ids_the_estimate_says_why(report):
    images = training()
    images["step_time"]["inputs"] = {"args": [{"kind": "tensor", "shape": [1, 3, 8, 8], "dtype": "torch.float32"}]}
    estimate = roofline_report(report, measured_ceilings(MACHINE), training=images)["training_step"]["mfu"]["estimate"]
    assert estimate == {"available": False,
                        "reason": "the step has no integer input (token ids), and 6·N·tokens counts per token"}


def test_without_a_measured_step_there_is_no_mfu(report):
    estimated = training()
    estimated["step_time"] = None
    step = roofline_report(report, measured_ceilings(MACHINE), training=estimated)["training_step"]
    assert step["mfu"] is None
    assert step["mfu_unavailable"].startswith("no training step was measured")
    assert step["roofline_time"]["value"] == pytest.approx(1e-5 + 2800 / 1e10)

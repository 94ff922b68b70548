"""Sharded policies: FSDP2 run by PyTorch under a fake process group, DDP by the ZeRO stage 0 rule.

Every expected figure is derived here from the parameter count (``examples/llama_blocks.py``'s,
by hand) and the bytes per element: float32 parameters, gradients and AdamW's two moments are
4 + 4 + 8 = 16 bytes a parameter, sharded over N ranks; a gathered block is its parameters in
bfloat16 under FSDP2's mixed precision."""

from __future__ import annotations

import torch

from torchscan_lsp.contract.plan import Policy
from torchscan_lsp.contract.training import parse_train_options
from torchscan_lsp.engine.training import plan_training
from torchscan_lsp.engine.training.estimator import PolicyEstimator
from torchscan_lsp.engine.training.sharding import fake_process_group

GiB = 1 << 30


def _llama(blocks, config, tokens: int = 16):
    def build():
        with torch.device("meta"):
            model = blocks.LlamaBlocks(**config)
        return model, (torch.zeros(1, tokens, dtype=torch.long),)

    return build


def test_llama_7b_on_8_ranks_fsdp2_holds_a_sixteenth_of_the_model_state_and_one_gathered_block(llama_blocks):
    config = llama_blocks.LLAMA_7B
    n = llama_blocks.parameter_count(**config)
    assert n == 6_738_415_616  # Llama-7B's count
    d, f = config["width"], config["hidden"]
    block = 4 * d * d + 3 * d * f + 2 * d  # four projections, SwiGLU's three matrices, two norms
    expected = 16 * n / 8 + 2 * block  # sharded fp32 state, plus one block gathered in bfloat16
    policy = Policy("bfloat16-mixed", "adamw", "none", "fsdp", 8)
    with fake_process_group(8) as mesh, PolicyEstimator(_llama(llama_blocks, config), policy, parse_train_options({}),
                                                        cuda=True, mesh=mesh) as estimator:
        point = estimator.estimate(1)
    largest = point.largest
    state = largest["parameters"] + largest["gathered_parameters"] + largest["gradients"] + largest["optimizer_state"]
    assert abs(state - expected) <= 0.02 * expected, (state / GiB, expected / GiB)
    assert abs(largest["gathered_parameters"] - 2 * block) <= 0.02 * 2 * block  # one block at a time
    # every group is gathered in the forward and again in the backward (bf16), and every gradient
    # reduce-scattered once (fp32 reduce dtype): 2·2N and 4N bytes of collective tensors per step
    assert abs(point.communication["all_gather_bytes"] - 4 * n) <= 0.01 * 4 * n
    assert abs(point.communication["reduce_scatter_bytes"] - 4 * n) <= 0.01 * 4 * n


def test_fsdp2_shards_a_small_decoder_evenly_over_4_ranks(llama_blocks):
    config = {"vocab": 1000, "width": 128, "layers": 2, "heads": 4, "hidden": 344}
    n = llama_blocks.parameter_count(**config)  # 651,904; every first dimension divides by 4
    policy = Policy("float32", "adamw", "none", "fsdp", 4)
    with fake_process_group(4) as mesh, PolicyEstimator(_llama(llama_blocks, config, 64), policy, parse_train_options({}),
                                                        mesh=mesh) as estimator:
        point = estimator.estimate(2)
    assert point.largest["parameters"] == point.largest["gradients"] == 4 * n // 4
    # AdamW's two moments, sharded, and one 4-byte step counter per parameter tensor (unsharded)
    tensors = 2 + 1 + config["layers"] * (4 + 3 + 2)
    assert point.largest["optimizer_state"] == 8 * n // 4 + 4 * tensors


def test_ddp_adds_a_flat_copy_of_every_gradient_to_the_single_device_step(llama_blocks):
    config = {"vocab": 1000, "width": 128, "layers": 2, "heads": 4, "hidden": 344}
    n = llama_blocks.parameter_count(**config)
    report = plan_training(_llama(llama_blocks, config, 64),
                           plan={"precision": ["float32"], "checkpointing": ["none"], "sharding": ["single", "ddp"],
                                 "ranks": 4}, memory_budget="40 MiB")
    single, ddp = report["policies"]
    assert ddp["sharding"]["gradient_buckets_bytes"] == 4 * n
    # at the same batch, the DDP rank's peak is the single device's plus the buckets
    same = {p["batch"]: p["peak_bytes"] for p in single["batch"]["estimates"]}
    for point in ddp["batch"]["estimates"]:
        if point["batch"] in same:
            assert point["peak_bytes"] == same[point["batch"]] + 4 * n
    assert ddp["batch"]["largest"]["value"] < single["batch"]["largest"]["value"]
    assert ddp["sharding"]["global_batch"] == 4 * ddp["batch"]["largest"]["value"]
    assert "ZeRO stage 0 rule" in ddp["method"]


class _Layer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8, bias=False)

    def forward(self, x):
        return self.fc(x)


def test_an_fsdp2_rank_counts_every_flop_of_its_own_batch():
    # Two bias-free Linear(8, 8) layers on (B, 8), the loss their output's sum, by hand: forward
    # 2 · (2·B·8·8) = 256·B, the sum 8·B − 1 additions; backward: the second layer's input and
    # weight gradients (2 · 128·B), the first layer's weight gradient only (its input needs none),
    # 128·B. A rank's collectives and FSDP2's buffer copies are no arithmetic: the count is complete.
    def build():
        with torch.device("meta"):
            model = torch.nn.Sequential(_Layer(), _Layer())
        return model, (torch.zeros(2, 8),)

    report = plan_training(build, plan={"precision": ["float32"], "checkpointing": ["none"], "sharding": ["fsdp"],
                                        "ranks": 2, "max_batch": 64}, memory_budget="1 MiB")
    (policy,) = report["policies"]
    counted = [point for point in policy["batch"]["estimates"] if "training_flops" in point]
    assert len(counted) >= 3  # the fit's two sizes and the answer
    for point in counted:
        assert point["training_flops"]["status"] == "complete", point["training_flops"]
        assert point["training_flops"]["value"] == 256 * point["batch"] + 8 * point["batch"] - 1 + 384 * point["batch"]
    shown = policy["batch"]["training_flops"]
    assert shown["status"] == "complete"
    assert shown["value"] == 648 * policy["batch"]["at_largest"]["batch"] - 1

"""What each policy changes: the blocks it checkpoints, the bytes of its precision, its optimizer's
state; a policy the model cannot run says why."""

from __future__ import annotations

import pytest
import torch
from plan_models import gpt_factory, measured_peak, mlp
from torch import nn

from torchscan_lsp.contract.plan import Policy
from torchscan_lsp.contract.training import parse_train_options
from torchscan_lsp.engine.training import analyse_training_step, plan_training
from torchscan_lsp.engine.training.estimator import PolicyEstimator
from torchscan_lsp.engine.training.policies import repeated_blocks
from torchscan_lsp.session.plan_summary import plan_summary

#: the MLP's parameters: 256·512 + 512, 512·512 + 512, 512·10 + 10
MLP_PARAMETERS = 131_584 + 262_656 + 5_130


class BasicBlock(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width)

    def forward(self, x):
        return x + self.bn(self.conv(x))


def test_the_repeated_blocks_are_the_outermost_repeated_modules_with_children(llama_blocks):
    decoder = llama_blocks.LlamaBlocks(vocab=100, width=16, layers=3, heads=2, hidden=32)
    # the Blocks, not their Attention and FeedForward inside, nor the 7 RMSNorms (no children)
    assert [path for path, _ in repeated_blocks(decoder)] == ["layers.0", "layers.1", "layers.2"]
    assert repeated_blocks(mlp()) == []  # Linear layers have no children
    # the residual blocks inside two stages, not the stages (containers)
    stages = nn.Sequential(nn.Sequential(BasicBlock(4), BasicBlock(4)), nn.Sequential(BasicBlock(4), BasicBlock(4)))
    assert [path for path, _ in repeated_blocks(stages)] == ["0.0", "0.1", "1.0", "1.1"]


def _checkpoint_every_block(model: nn.Module) -> None:
    """The test's own checkpointing: each decoder block's forward through torch.utils.checkpoint."""
    for block in model.layers:
        forward = block.forward
        block.forward = lambda *args, f=forward: torch.utils.checkpoint.checkpoint(f, *args, use_reentrant=False)


def test_a_checkpointed_step_is_estimated_within_5_percent_of_a_real_one():
    policy = Policy("float32", "adamw", "blocks", "single")
    with PolicyEstimator(gpt_factory(4), policy, parse_train_options({})) as estimator:
        assert len(estimator.blocks) == 2
        checkpointed = estimator.estimate(4).peak_bytes
    real = measured_peak(gpt_factory(4), prepare=_checkpoint_every_block)
    assert abs(checkpointed - real) <= 0.05 * real, (checkpointed, real)
    assert real < measured_peak(gpt_factory(4))  # what checkpointing is for


def test_checkpointing_a_model_without_repeated_blocks_says_why_instead_of_a_number():
    report = plan_training(mlp, plan={"precision": ["float32"], "checkpointing": ["none", "blocks"]},
                           memory_budget="9 MiB", input_shape=(256,))
    plain, checkpointed = report["policies"]
    assert plain["status"] == "complete" and plain["batch"]["largest"]["value"] > 0
    assert checkpointed["status"] == "not_applicable" and checkpointed["batch"] is None
    assert "no repeated block to checkpoint" in checkpointed["reason"]
    row = plan_summary(report).rows[1]
    assert row.batch == "—" and "no repeated block" in row.reason


@pytest.mark.parametrize("precision, parameter_bytes", [("float32", 4), ("bfloat16-mixed", 4), ("bfloat16", 2)])
def test_each_precision_keeps_its_bytes_per_parameter_gradient_and_moment(precision, parameter_bytes):
    policy = Policy(precision, "adamw", "none", "single")
    with PolicyEstimator(mlp, policy, parse_train_options({}), input_shape=(256,)) as estimator:
        largest = estimator.estimate(8).largest
    assert largest["parameters"] == parameter_bytes * MLP_PARAMETERS
    assert largest["gradients"] == parameter_bytes * MLP_PARAMETERS
    # two moments in the parameters' dtype, and a 4-byte float32 step counter per tensor (6 tensors)
    assert largest["optimizer_state"] == 2 * parameter_bytes * MLP_PARAMETERS + 6 * 4


def test_adafactor_reads_tensor_values_so_its_plan_says_why_and_its_real_step_is_measured():
    # torch.optim.Adafactor's step calls .item() on its step count and the parameters' norms: fake
    # tensors hold no values, so no estimate; the policy beside it is planned as usual
    report = plan_training(mlp, plan={"precision": ["float32"], "checkpointing": ["none"],
                                      "optimizer": ["adamw", "adafactor"]}, memory_budget="9 MiB", input_shape=(256,))
    adamw, adafactor = report["policies"]
    assert adamw["status"] == "complete"
    assert adafactor["status"] == "unavailable" and "torch.optim.Adafactor" in adafactor["reason"]
    assert any(d["code"] == "plan_policy_unavailable" for d in report["diagnostics"])
    # the measured step runs it: a (rows, 1) and a (1, columns) factor per matrix, a full second
    # moment per vector, a 4-byte step per tensor, no first moment
    measured = analyse_training_step(mlp, train={"optimizer": "adafactor", "batch": 8}, input_shape=(256,))
    matrices = (512 + 256) + (512 + 512) + (10 + 512)
    vectors = 512 + 512 + 10
    assert measured["memory"]["measured"]["by_category"]["optimizer_state"] == 4 * matrices + 4 * vectors + 6 * 4

"""A checkpointed model's training estimate: the FLOPs are counted in a pass of their own, so the
memory pass sees what a real step holds. The reference is a real step on this CPU (PyTorch's
caching-free CPU allocator, measured by the engine's measured method), not the estimate's own
numbers: four residual blocks ``x + fc2(relu(fc1(x)))`` (64 -> 256 -> 64), each run through
``torch.utils.checkpoint`` (non-reentrant), which saves a block's input only and recomputes the
rest in the backward."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from torchscan_lsp.engine.training import estimate_training_memory, measure_training_memory

TRAIN = {"optimizer": "sgd", "batch": 4}
OPTIONS = {"input_shape": (16, 64)}


class Block(nn.Module):
    def __init__(self, d: int = 64) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(torch.relu(self.fc1(x)))


class Net(nn.Module):
    def __init__(self, checkpointed: bool) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(4)])
        self.checkpointed = checkpointed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.checkpointed else block(x)
        return x


def test_a_checkpointed_step_is_estimated_as_it_runs_and_the_same_each_time():
    build = lambda: Net(True)  # noqa: E731
    first = estimate_training_memory(build, train=TRAIN, **OPTIONS)
    again = estimate_training_memory(build, train=TRAIN, **OPTIONS)
    alone = estimate_training_memory(build, train=TRAIN, count_flops=False, **OPTIONS)
    assert first["peak"]["value"] == again["peak"]["value"] == alone["peak"]["value"]
    measured = measure_training_memory(build, train=TRAIN, **OPTIONS)["peak"]["value"]
    assert abs(first["peak"]["value"] - measured) <= 0.01 * measured, (first["peak"]["value"], measured)
    # checkpointing saves memory: the blocks' hidden (4, 16, 256) activations are not kept
    plain = estimate_training_memory(lambda: Net(False), train=TRAIN, **OPTIONS)
    assert first["by_category"]["activations"] < plain["phases"]["forward"]["end_by_category"]["activations"]
    # and the FLOPs are still counted: each block's fc1 and fc2 forward, 2·64·64·256 each, at least
    assert first["flops"]["totals"]["forward_flops"]["value"] >= 4 * 2 * (2 * 64 * 64 * 256)

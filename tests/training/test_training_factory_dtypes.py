"""A factory that builds its model in another dtype (``.to(torch.bfloat16)``, ``.double()``) is
estimated on fake tensors like any other, and agrees with the measured step.

The MLP is test_training_memory_mlp's: ``Linear(256, 512) -> ReLU -> Linear(512, 128)``, batch 32,
SGD without momentum, whose float32 step peaks at 1,692,680 bytes, every live tensor floating-point
(parameters, gradients, activations, the loss and its gradient). In another dtype each of them has
the same elements at another width: 2 bytes (bfloat16) halve the peak, 8 (float64) double it.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchscan_lsp.engine.training import analyse_training_step, estimate_training_memory

FLOAT32_PEAK = 1_692_680
PARAMETERS = 512 * 256 + 512 + 128 * 512 + 128  # elements: 197,248


@pytest.mark.parametrize(("convert", "width"), [
    (lambda m: m.to(torch.bfloat16), 2),
    (lambda m: m.double(), 8),
])
def test_a_model_built_in_another_dtype(convert, width):
    def build():
        return convert(nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 128)))

    report = analyse_training_step(build, train={"optimizer": "sgd", "batch": 32}, input_shape=(256,))
    estimated, measured = report["memory"]["estimated"], report["memory"]["measured"]
    assert estimated["peak"]["status"] == "complete", estimated.get("reason")
    assert report["diagnostics"] == []
    assert estimated["peak"]["value"] == FLOAT32_PEAK * width // 4
    assert estimated["by_category"]["parameters"] == PARAMETERS * width
    assert measured["peak"]["status"] == "complete"
    if width == 8:
        # the real step, measured by the profiler, is an independent count of the same bytes (CPU
        # kernels in bfloat16 allocate buffers of their own, which only the measurement sees)
        assert measured["peak"]["value"] == FLOAT32_PEAK * 2
        assert report["memory"]["comparison"]["agree"] is True


def test_tied_weights_stay_tied_through_a_conversion():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(10, 4)
            self.head = nn.Linear(4, 10, bias=False)
            self.head.weight = self.embed.weight

        def forward(self, ids):
            return self.head(self.embed(ids))

    estimate = estimate_training_memory(lambda: Tied().to(torch.bfloat16), train={"optimizer": "sgd"},
                                        input_shape=(3,), input_dtype=torch.long, count_flops=False)
    # one 10 x 4 table of 2-byte elements: tied, it is counted once
    assert estimate["persistent"]["by_category"]["parameters"] == 10 * 4 * 2


def test_the_swap_is_patched_only_while_estimating():
    original = torch.utils.swap_tensors
    estimate_training_memory(lambda: nn.Linear(4, 2).double(), input_shape=(4,), count_flops=False)
    assert torch.utils.swap_tensors is original

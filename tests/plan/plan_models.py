"""Models and real measurements shared by the training-plan tests.

Every model is small (its step takes milliseconds) and every budget a few MiB, so that the real
CPU steps the plans are held against -- PyTorch's profiler on an actual step, the independent
method -- stay fast."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from torchscan_lsp.contract.training import parse_train_options
from torchscan_lsp.engine.measuring.memory import measure_peak_memory
from torchscan_lsp.engine.training.step import build_training_step

_EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str):
    """``examples/<name>.py`` as a module."""
    spec = importlib.util.spec_from_file_location(f"{name}_plan_example", _EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class SmallCNN(nn.Module):
    """Two stride-1 convolutions (3 -> 8 -> 32 channels) with batch norm, max pooling, a linear head."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 32, 3, padding=1), nn.BatchNorm2d(32)
        self.pool, self.head, self.fc = nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Linear(32, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = F.relu(self.bn2(self.conv2(x)))
        return self.fc(self.head(x).flatten(1))


def mlp() -> nn.Module:
    """An MLP 256-512-512-10."""
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


def token_mlp() -> nn.Module:
    """An MLP 64-256-10 applied to every row of its input, for inputs of 40 rows a sample
    (``input_shape=(40, 64)``): 19,210 parameters, as many activations a sample as 40 samples of a
    plain MLP, so that with SGD's weight decay the step's peak is in the optimizer step at batch 1
    and in the backward from batch 2 on."""
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))


def gpt_factory(batch: int, tokens: int = 64):
    """A factory of ``examples/llama_blocks.py``'s decoder (2 blocks, width 128, vocabulary 1000)
    with its own ``batch`` × ``tokens`` ids and labels and a cross-entropy loss."""
    blocks = load_example("llama_blocks")

    def build():
        torch.manual_seed(0)
        model = blocks.LlamaBlocks(vocab=1000, width=128, layers=2, heads=4, hidden=344)
        ids, labels = torch.randint(0, 1000, (batch, tokens)), torch.randint(0, 1000, (batch, tokens))
        loss = lambda logits, target: F.cross_entropy(logits.flatten(0, 1), target.flatten())  # noqa: E731
        return {"model": model, "args": (ids,), "loss": loss, "targets": (labels,)}

    return build


def measured_peak(build, *, batch: int | None = None, input_shape=None, train=None, prepare=None) -> int:
    """The peak tensor bytes of one real steady-state CPU step (PyTorch's profiler memory timeline,
    ``measure_peak_memory``), of the factory's model at ``batch`` rows of generated inputs (or its
    own inputs), after ``prepare(model)``."""
    options = parse_train_options({**(train or {}), **({"batch": batch} if input_shape is not None else {})})
    step = build_training_step(build, options, input_shape=input_shape, prepare=prepare)
    step.init_optimizer_state()
    return measure_peak_memory(step.run, device="cpu")["peak_bytes"]


"""The training step built from a factory: what a factory may return, dtypes, devices, failures."""

from __future__ import annotations

import inspect

import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchscan_lsp.engine.training import (
    analyse_training_step,
    build_training_step,
    estimate_training_memory,
    parse_train_options,
)

DEFAULTS = parse_train_options(None)


def linear():
    return nn.Linear(4, 2)


def test_a_factory_may_return_its_loss_and_targets():
    calls = []

    def build():
        images, labels = torch.rand(3, 4), torch.tensor([0, 1, 1])

        def loss(output, target):
            calls.append((tuple(output.shape), tuple(target.shape)))
            return F.cross_entropy(output, target)

        return {"model": linear(), "args": (images,), "loss": loss, "targets": (labels,)}

    step = build_training_step(build, DEFAULTS)
    before = step.model.weight.detach().clone()
    step.run()
    # the loss got the model's output and the targets; the optimizer step changed the weights
    assert calls == [((3, 2), (3,))]
    assert not torch.equal(before, step.model.weight)
    assert step.model.weight.grad is None  # zero_grad(set_to_none=True) ends the step
    assert step.output is None and step.loss is None


def test_generated_inputs_take_the_batch_and_the_model_dtype():
    step = build_training_step(linear, parse_train_options({"batch": 5, "dtype": "float64"}), input_shape=(4,))
    (x,) = step.args
    assert x.shape == (5, 4) and x.dtype == torch.float64 and step.model.weight.dtype == torch.float64
    ids = build_training_step(lambda: nn.Embedding(10, 3), DEFAULTS, input_shape=(7,), input_dtype=torch.long).args[0]
    assert ids.shape == (1, 7) and ids.dtype == torch.long


def test_dtype_halves_every_floating_tensor():
    # The SGD step of test_training_memory_mlp in bfloat16: every tensor is half as large, the 4-byte
    # loss and loss gradient become 2 bytes each.
    def mlp():
        return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 128))

    estimate = estimate_training_memory(mlp, train={"optimizer": "sgd", "batch": 32, "dtype": "bfloat16"},
                                        input_shape=(256,), count_flops=False)
    assert estimate["peak"]["value"] == (1_692_680 - 8) // 2 + 2 + 2
    assert estimate["by_category"]["parameters"] == 788_992 // 2


@pytest.mark.parametrize(("produced", "message"), [
    (lambda: 3, "the factory must return a model"),
    (lambda: {"model": linear(), "optimizer": "sgd"}, "unknown keys"),
    (lambda: {"model": linear(), "loss": 1.0}, "'loss' must be callable"),
])
def test_what_a_factory_returns_is_checked(produced, message):
    with pytest.raises(TypeError, match=message):
        build_training_step(produced, DEFAULTS, input_shape=(4,))


def test_inputs_and_batch_are_checked():
    with pytest.raises(ValueError, match="give the step's inputs once"):
        build_training_step(linear, DEFAULTS)
    with pytest.raises(ValueError, match="give the step's inputs once"):
        build_training_step(lambda: (linear(), (torch.rand(1, 4),)), DEFAULTS, input_shape=(4,))
    with pytest.raises(ValueError, match="'batch' applies to inputs generated from input_shape"):
        build_training_step(lambda: (linear(), (torch.rand(1, 4),)), parse_train_options({"batch": 8}))


def test_a_model_that_cannot_be_trained():
    frozen = nn.Linear(4, 2).requires_grad_(False)
    with pytest.raises(ValueError, match="no parameter that requires grad"):
        build_training_step(lambda: frozen, DEFAULTS, input_shape=(4,))
    step = build_training_step(lambda: {"model": linear(), "args": (torch.rand(2, 4),), "loss": lambda out: out},
                               DEFAULTS)
    with pytest.raises(ValueError, match=r"loss must return a scalar tensor, got \(2, 2\)"):
        step.run()

    class Counts(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(x).argmax(-1)  # integer output: nothing to differentiate

    with pytest.raises(ValueError, match="holds no floating-point tensor that requires grad"):
        build_training_step(Counts, DEFAULTS, input_shape=(4,)).run()


def test_a_meta_model_is_estimated_not_measured():
    def build():
        with torch.device("meta"):
            return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64))

    report = analyse_training_step(build, input_shape=(64,))
    estimated, measured = report["memory"]["estimated"], report["memory"]["measured"]
    assert estimated["persistent"]["by_category"]["parameters"] == 4 * 2 * (64 * 64 + 64)
    assert measured["peak"]["status"] == "unavailable" and "meta device" in measured["reason"]
    assert report["memory"]["comparison"] is None
    assert json.loads(json.dumps(report)) == report  # JSON-safe


def test_an_absent_gpu_is_not_a_warning():
    report = analyse_training_step(linear, input_shape=(4,), device="cuda:0")
    assert "unavailable" in report["memory"]["measured"]["reason"]
    assert report["memory"]["estimated"]["foreach"] is True  # PyTorch's default for CUDA
    assert report["diagnostics"] == []


class ReadsValues(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        return y * 2 if y.sum().item() > 0 else y  # control flow on a value: fake tensors have none


def test_a_model_that_reads_values_is_measured_only():
    report = analyse_training_step(ReadsValues, input_shape=(4,))
    estimated = report["memory"]["estimated"]
    assert estimated["peak"]["status"] == "unavailable"
    lines, first = inspect.getsourcelines(ReadsValues.forward)
    line = first + next(i for i, text in enumerate(lines) if ".item()" in text)
    assert estimated["reason"] == (f"fake tensors hold no values, and the training step's forward reads one at "
                                   f"{inspect.getsourcefile(ReadsValues)}:{line}: no estimate (the measured step "
                                   "runs the model for real)")
    assert report["memory"]["measured"]["peak"]["status"] == "complete"
    # the FLOPs come from the measured step: (1 x 4) @ (4 x 4) forward; weight gradient backward
    assert report["flops"]["by_module"]["fc"]["forward_flops"]["value"] == 2 * 4 * 4
    assert report["flops"]["by_module"]["fc"]["backward_flops"]["value"] == 2 * 4 * 4
    assert [d["code"] for d in report["diagnostics"]] == ["training_memory_unavailable"]


def test_a_broken_model_is_an_error_not_a_blank():
    class Broken(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            raise KeyError("no such layer")

    with pytest.raises(KeyError, match="no such layer"):
        analyse_training_step(Broken, input_shape=(4,))


def test_options_are_checked_before_anything_runs():
    def build():
        raise AssertionError("the factory must not run")

    with pytest.raises(ValueError, match="unknown train option 'optimiser'"):
        analyse_training_step(build, train={"optimiser": "sgd"}, input_shape=(4,))
    with pytest.raises(ValueError, match="memory_budget"):
        analyse_training_step(build, input_shape=(4,), memory_budget="a lot")


def test_a_toy_model_agrees_within_the_byte_slack():
    # 136 bytes estimated (see tests/server/test_server_training.py); the profiler also sees a few
    # 4-byte scalars: more than 1 % of so small a step, within the 1 KiB slack
    report = analyse_training_step(linear, train={"optimizer": "sgd", "batch": 2}, input_shape=(4,))
    comparison = report["memory"]["comparison"]
    assert comparison["estimated_bytes"] == 136 and comparison["slack_bytes"] == 1024
    assert 0 <= comparison["difference_bytes"] <= 64 and comparison["agree"] is True

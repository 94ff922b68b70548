"""The estimate of a model whose construction reads tensor values (fake tensors hold none).

Two models of our own do what timm and torchvision do while building theirs: ``StochasticDepthNet``
reads its drop-path rates with ``.tolist()`` from ``torch.linspace`` (timm's ConvNeXt, Swin, ViT),
``RelativeBiasAttention`` initialises its relative-position table with ``nn.init.trunc_normal_``
(torchvision's Swin). The reference for each is the same architecture built without reading a
value (the rates written as Python floats, the table initialised with ``normal_``), estimated on
fake tensors as always, and the real step measured beside it: the model that reads values must
come out byte for byte the same.
"""

from __future__ import annotations

import inspect

import pytest
import torch
from torch import nn

from torchscan_lsp.engine.training import analyse_training_step, estimate_training_memory
from torchscan_lsp.engine.training.construction import ValueReadError

ADAMW = {"optimizer": "adamw", "batch": 2}
DEPTHS = (1, 2)


class Block(nn.Module):
    def __init__(self, dim: int, drop: float):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.drop = nn.Dropout(drop)

    def forward(self, x):
        return x + self.drop(torch.relu(self.fc(x)))


class StochasticDepthNet(nn.Module):
    def __init__(self, rates: list[list[float]] | None = None, drop_path_rate: float = 0.1):
        super().__init__()
        if rates is None:  # what timm does: the rates read from a tensor
            rates = [x.tolist() for x in torch.linspace(0, drop_path_rate, sum(DEPTHS)).split(DEPTHS)]
        self.stages = nn.Sequential(*(Block(8, rate) for stage in rates for rate in stage))
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.stages(x))


# linspace(0, 0.1, 3) split (1, 2): [[0.0], [0.05, 0.1]], written out
HAND_RATES = [[0.0], [0.05, 0.1]]


class RelativeBiasAttention(nn.Module):
    """A window of 3 x 3 tokens, 2 heads of 4: torchvision's Swin attention in small."""

    def __init__(self, window: int = 3, dim: int = 8, heads: int = 2, trunc_normal: bool = True):
        super().__init__()
        self.heads = heads
        self.table = nn.Parameter(torch.zeros((2 * window - 1) ** 2, heads))
        coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
        relative = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (window - 1)
        self.register_buffer("index", (relative[..., 0] * (2 * window - 1) + relative[..., 1]).flatten())
        (nn.init.trunc_normal_ if trunc_normal else nn.init.normal_)(self.table, std=0.02)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        bias = self.table[self.index].view(n, n, -1).permute(2, 0, 1)
        attention = ((q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5 + bias).softmax(-1)
        return self.proj((attention @ v).transpose(1, 2).reshape(b, n, c))


def _same_step(report, reference):
    """The estimate of ``report`` is the reference's, byte for byte and FLOP for FLOP."""
    ours, theirs = report["memory"]["estimated"], reference["memory"]["estimated"]
    assert ours["peak"]["status"] == "complete", ours.get("reason")
    assert ours["by_category"] == theirs["by_category"]
    assert ours["peak"]["value"] == theirs["peak"]["value"]
    assert report["flops"]["totals"] == reference["flops"]["totals"]
    assert report["memory"]["comparison"]["agree"]  # and the real step measured beside it agrees


def test_rates_read_with_tolist_are_built_for_real_and_converted():
    report = analyse_training_step(StochasticDepthNet, train=ADAMW, input_shape=(8,))
    reference = analyse_training_step(lambda: StochasticDepthNet(HAND_RATES), train=ADAMW, input_shape=(8,))
    assert reference["memory"]["estimated"]["stand_in"] is None  # fake tensors sufficed
    # the meta device cannot read a value either: the model was built for real, then faked
    assert report["memory"]["estimated"]["stand_in"] == "real"
    _same_step(report, reference)
    # 3 blocks of Linear(8, 8) and a Linear(8, 4) head, float32, all trained
    parameters = 3 * (8 * 8 + 8) + 8 * 4 + 4
    assert report["memory"]["estimated"]["by_category"]["parameters"] == parameters * 4
    assert report["diagnostics"] == []


def test_trunc_normal_runs_on_the_meta_device():
    def build():
        return RelativeBiasAttention(), (torch.rand(2, 9, 8),)

    def reference():
        return RelativeBiasAttention(trunc_normal=False), (torch.rand(2, 9, 8),)

    report = analyse_training_step(build, train={"optimizer": "adamw"})
    assert report["memory"]["estimated"]["stand_in"] == "meta"
    _same_step(report, analyse_training_step(reference, train={"optimizer": "adamw"}))
    # table 25 x 2, qkv 8 x 24 + 24, proj 8 x 8 + 8: 338 parameters; the index buffer 81 int64
    assert report["memory"]["estimated"]["by_category"]["parameters"] == (50 + 216 + 72) * 4
    assert report["memory"]["estimated"]["by_category"]["buffers"] == 81 * 8


def _line(source_object, text: str) -> tuple[str, int]:
    lines, first = inspect.getsourcelines(source_object)
    return inspect.getsourcefile(source_object), first + next(i for i, line in enumerate(lines) if text in line)


def test_a_construction_that_cannot_be_converted_is_one_message():
    # a real build is allowed up to real_build_limit bytes: 64 B is less than one Linear(8, 8)
    file, line = _line(StochasticDepthNet, ".tolist()")
    expected = (f"fake tensors hold no values, and building the model reads one at {file}:{line}; the meta "
                "device holds none either (NotImplementedError: Cannot copy out of meta tensor; no data!), and "
                "building it for real allocates more than 64 B: no estimate (the measured step runs the model "
                "for real)")
    with pytest.raises(ValueReadError) as info:
        estimate_training_memory(StochasticDepthNet, train=ADAMW, input_shape=(8,), real_build_limit=64)
    assert (str(info.value), info.value.file, info.value.line, info.value.phase) == (expected, file, line,
                                                                                    "construction")
    # in the analysis it is the estimate's reason and one warning, and the measured step still runs
    report = analyse_training_step(StochasticDepthNet, train=ADAMW, input_shape=(8,), real_build_limit=64)
    assert report["memory"]["estimated"]["reason"] == expected
    assert [d["message"] for d in report["diagnostics"]] == [f"estimated training memory is unavailable: {expected}"]
    assert report["memory"]["measured"]["peak"]["status"] == "complete"


class ReadsInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        scale = float(x.abs().max())
        return self.fc(x) / scale


def test_a_forward_that_reads_a_value_names_its_line():
    file, line = _line(ReadsInForward.forward, "float(")
    message = (f"fake tensors hold no values, and the training step's forward reads one at {file}:{line}: "
               "no estimate (the measured step runs the model for real)")
    report = analyse_training_step(ReadsInForward, train=ADAMW, input_shape=(8,), measure=False,
                                   name_file=lambda path: path.upper())
    # the caller names the file (the editor: workspace-relative)
    assert report["memory"]["estimated"]["reason"] == message.replace(file, file.upper())
    assert report["memory"]["estimated"]["value_read"] == {"file": file.upper(), "line": line, "phase": "forward"}
    assert report["flops"] is None  # no method ran a step: nothing is counted, nothing is claimed

"""Calls that share one module-formula evaluation (engine/recording/formula_memo.py).

Layers equal in type, hyperparameters, parameter shapes and call shapes share a result; each
expected value below is derived by hand from the layer's formula, so a key that missed something a
formula reads (dilation, ``inplace``, a dtype) gives one layer another's numbers and fails here.
"""

from __future__ import annotations

import torch
from torch import nn

from torchscan_lsp import crawl_module
from torchscan_lsp.engine.recording.formula_memo import FormulaMemo


def _metric(report, path: str, name: str):
    layer = next(layer for layer in report["layers"] if layer["path"] == path)
    return layer["metrics"][name]["value"]


def test_layers_that_differ_only_in_a_hyperparameter_keep_their_own_values():
    # Three convolutions with equal weights' and outputs' shapes on (1, 2, 8, 8); the third is
    # dilated. Local receptive field 1 + (k - 1)·d: 3, 3, 5. MACs each Cout·H·W·Cin·k² = 2·64·2·9.
    # ReLU reads 128 elements and writes 128 more unless in place: DMAs 256, then 128.
    model = nn.Sequential(
        nn.Conv2d(2, 2, 3, padding=1),
        nn.Conv2d(2, 2, 3, padding=1),
        nn.Conv2d(2, 2, 3, padding=2, dilation=2),
        nn.ReLU(),
        nn.ReLU(inplace=True),
    )
    report = crawl_module(model, (2, 8, 8))
    assert [_metric(report, p, "local_receptive_field") for p in "012"] == [3, 3, 5]
    assert [_metric(report, p, "macs") for p in "012"] == [2304] * 3
    assert [_metric(report, p, "receptive_field") for p in "012"] == [3, 5, 9]  # cumulative: 3, 3+2, 5+4
    assert [_metric(report, p, "dmas") for p in "34"] == [256, 128]


class TwoDtypes(nn.Module):
    """The same Linear(4, 3, bias=False) twice, once in float and once in complex arithmetic."""

    def __init__(self) -> None:
        super().__init__()
        self.real = nn.Linear(4, 3, bias=False)
        self.complex = nn.Linear(4, 3, bias=False, dtype=torch.complex64)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.real(x), self.complex(x.to(torch.complex64))


def test_a_dtype_alone_keeps_layers_apart():
    # (2, 4) @ (4, 3): 24 multiply-accumulates; complex ones are 4 real MACs each (docs/formulas.md).
    report = crawl_module(TwoDtypes(), args=(torch.zeros(2, 4),))
    assert _metric(report, "real", "macs") == 24
    assert _metric(report, "complex", "macs") == 96


class Unknown(nn.Module):
    """A leaf without a module formula."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def test_every_call_without_a_formula_names_itself():
    report = crawl_module(nn.Sequential(Unknown(), Unknown()), (3,))
    unsupported = {d["path"] for d in report["diagnostics"] if d["code"] == "unsupported_module_metric"}
    assert unsupported == {"0", "1"}


class Holder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.config = object()  # what a formula might read from it cannot be compared

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def test_keys_stand_only_for_what_can_be_compared():
    x = torch.zeros(2, 4)
    key = FormulaMemo.key
    assert key(nn.Linear(4, 4), (x,), x) == key(nn.Linear(4, 4), (x,), x)
    assert key(nn.Linear(4, 4), (x,), x) != key(nn.Linear(4, 4, bias=False), (x,), x)
    assert key(nn.Linear(4, 4), (x,), x) != key(nn.Linear(4, 4), (x.double(),), x)
    assert key(Holder(), (x,), x) is None
    assert key(nn.Sequential(nn.Linear(4, 4)), (x,), x) is None  # a formula may read its children

"""Sums over a module's subtree follow the calls (each layer record's ``parent``), not the names
(docs/report-schema.md, layer records).

``Linear(4, 4)`` on one token (docs/formulas.md): FLOPs ``out·T·(2·in − 1) + out·T`` = 4·7 + 4 = 32,
MACs ``in·out`` = 16; the dispatcher counts its ``addmm`` as 2·1·4·4 = 32 FLOPs and 16 MACs.
"""

from __future__ import annotations

import torch
from torch import nn

from torchscan_lsp.engine.crawler import crawl_module
from torchscan_lsp.session.results import ResultView


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, shared):
        return shared(self.fc(x))  # a module registered at the root, called inside this block


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.shared = nn.Linear(4, 4)

    def forward(self, x):
        return self.block(x, self.shared)


def _view() -> ResultView:
    return ResultView({"ok": True, "report": crawl_module(Net(), args=(torch.rand(1, 4),))})


def test_each_record_names_its_callers_record():
    view = _view()
    # Net (the root call, no caller), block (called by Net), block.fc and shared (both called by block)
    assert [(layer["path"], layer["parent"]) for layer in view.layers] == [
        ("", None), ("block", 0), ("block.fc", 1), ("shared", 1),
    ]


def test_a_subtree_holds_the_modules_its_calls_ran():
    summary = _view().module_summary(["block"])
    # block ran block.fc and shared: 2 x 32 FLOPs and 2 x 16 MACs by both methods. By names alone
    # the module formulas would see block.fc only (32 FLOPs) while the dispatcher saw both.
    assert (summary["module_flops"]["status"], summary["module_flops"]["value"]) == ("complete", 64)
    assert summary["macs"]["value"] == 32
    assert (summary["operator_flops"]["status"], summary["operator_flops"]["value"]) == ("complete", 64)
    assert summary["operator_macs"]["value"] == 32


def test_the_root_counts_a_shared_call_once_and_a_module_alone_is_its_own_calls():
    view = _view()
    assert view.module_summary([""])["module_flops"]["value"] == 64
    assert view.module_summary(["shared"])["module_flops"]["value"] == 32
    assert view.module_summary(["shared"])["operator_flops"]["value"] == 32

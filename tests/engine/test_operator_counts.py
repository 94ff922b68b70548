"""Dispatcher counts per module call (spec A.10): inclusive ``operator_flops`` and ``operator_macs``
on every layer record and in the totals, beside the module formulas, with hand-derived values."""

import torch
import torch.nn.functional as F
from torch import nn

from torchscan_lsp import crawl_module

FCM = "torch.utils.flop_counter.FlopCounterMode+torchscan_lsp.operator_formulas"
OPERATOR_MACS = "torchscan_operator_macs"


def counts(report):
    """path -> (operator_flops, operator_macs) as (status, known value) pairs."""
    return {
        layer["path"]: tuple(
            (layer["metrics"][name]["status"], layer["metrics"][name]["known_value"])
            for name in ("operator_flops", "operator_macs")
        )
        for layer in report["layers"]
    }


def total(report, name):
    metric = report["totals"][name]
    return metric["status"], metric["known_value"]


class Sum(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        return self.a(x) + self.b(x)


def test_a_container_includes_its_childrens_work_and_its_own():
    report = crawl_module(Sum(), args=(torch.rand(2, 4),))
    # each Linear(4, 4) on (2, 4) is aten.addmm: 2*2*4*4 = 64 FLOPs, 2*4*4 = 32 MACs; the root's own
    # x + y adds 2*4 = 8 elements (8 FLOPs, no MAC): 64 + 64 + 8 = 136 FLOPs, 32 + 32 = 64 MACs
    assert counts(report) == {
        "": (("complete", 136), ("complete", 64)),
        "a": (("complete", 64), ("complete", 32)),
        "b": (("complete", 64), ("complete", 32)),
    }
    assert total(report, "operator_flops") == ("complete", 136)
    assert total(report, "operator_macs") == ("complete", 64)
    root = report["layers"][0]["metrics"]
    assert root["operator_flops"]["method"] == FCM and root["operator_macs"]["method"] == OPERATOR_MACS
    assert root["operator_flops"]["scope"] == "module_call"
    # the module formulas keep their own meaning beside them: they do not see the root's add
    assert total(report, "module_flops") == ("partial", 128)
    assert total(report, "macs") == ("complete", 64)
    assert report["layers"][1]["metrics"]["macs"]["method"] == "torchscan_module_formula"


class Attention(nn.Module):
    def forward(self, q):
        return F.scaled_dot_product_attention(q, q, q)


def test_scaled_dot_product_attention_p06():
    report = crawl_module(Attention(), args=(torch.rand(1, 2, 16, 8),))
    # B=1, H=2, L=S=16, D=8: Q K^T is B*H*L*S*D = 4096 MACs, P V 4096: 8192 MACs. FLOPs of the CPU
    # flash kernel: 2*8192*2 = 16384 for the products, the scaling of the B*H*L*S = 512 scores (512)
    # and softmax 3*512 - B*H*L = 1536 - 32 = 1504: 18400
    assert counts(report) == {"": (("complete", 18400), ("complete", 8192))}
    assert total(report, "operator_macs") == ("complete", 8192)
    assert total(report, "macs")[0] == "partial"  # no module formula sees the functional attention


class HandAttention(nn.Module):
    def forward(self, q):
        weights = (q @ q.transpose(-2, -1)).softmax(-1)
        return weights @ q


def test_hand_written_attention():
    report = crawl_module(HandAttention(), args=(torch.rand(1, 2, 16, 8),))
    # q @ k^T: bmm (2, 16, 8) x (2, 8, 16) = 2*16*8*16 = 4096 MACs; weights @ v: (2, 16, 16) x
    # (2, 16, 8) = 4096 MACs; FLOPs 2*8192 = 16384 plus softmax over 512 scores in 32 rows:
    # 3*512 - 32 = 1504: 17888
    assert counts(report) == {"": (("complete", 17888), ("complete", 8192))}


def test_lstm_p10():
    report = crawl_module(nn.LSTM(5, 5), args=(torch.rand(3, 1, 5),))
    # LSTM(5, 5), T=3, B=1: gate products T*B*4H(I + H) = 3*20*10 = 600 MACs (1200 FLOPs); the cell's
    # element-wise work 32 FLOPs per unit and step: 32*3*5 = 480; 1680 FLOPs in aten.mkldnn_rnn_layer
    assert counts(report) == {"": (("complete", 1680), ("complete", 600))}
    assert total(report, "macs") == ("complete", 600)  # the module formula agrees


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 3, padding=1, bias=False)

    def forward(self, x):
        return x + self.conv(x)


def test_convolution_and_residual():
    report = crawl_module(Residual(), args=(torch.rand(1, 2, 4, 4),))
    # Conv2d(2, 2, 3, padding=1) on 4x4: Cout*Cin*9*16 = 2*2*9*16 = 576 MACs, 1152 FLOPs; the
    # residual adds 2*4*4 = 32 elements: 1184 FLOPs at the root
    assert counts(report) == {"": (("complete", 1184), ("complete", 576)), "conv": (("complete", 1152), ("complete", 576))}


class Traced(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        return y * torch.trace(y)  # aten.trace has no FLOP formula


def test_an_operator_without_formula_makes_exactly_the_calls_above_it_partial():
    report = crawl_module(nn.Sequential(nn.Linear(4, 4), Traced()), args=(torch.rand(4, 4),))
    # each Linear(4, 4) on (4, 4): aten.addmm 2*4*4*4 = 128 FLOPs, 64 MACs. "1" adds aten.trace
    # (uncounted) and y * trace (16 elements, 16 FLOPs): known 128 + 16 = 144 FLOPs, 64 MACs, both
    # lower bounds (trace could be anything); the root: 128 + 144 = 272 FLOPs, 128 MACs, partial
    assert counts(report) == {
        "": (("partial", 272), ("partial", 128)),
        "0": (("complete", 128), ("complete", 64)),
        "1": (("partial", 144), ("partial", 64)),
        "1.lin": (("complete", 128), ("complete", 64)),
    }
    uncounted = {layer["path"]: layer.get("uncounted_operators") for layer in report["layers"]}
    trace = {"flops": {"aten.trace": 1}, "macs": {"aten.trace": 1}}
    assert uncounted == {"": trace, "0": None, "1": trace, "1.lin": None}
    assert total(report, "operator_flops") == ("partial", 272)
    assert total(report, "operator_macs") == ("partial", 128)
    assert [d["operator"] for d in report["diagnostics"] if d["code"] == "uncounted_operator"] == ["aten.trace"]


def test_structure_mode_counts_no_operators():
    report = crawl_module(Sum(), args=(torch.rand(2, 4),), mode="structure")
    assert all("operator_flops" not in layer["metrics"] for layer in report["layers"])
    assert report["totals"]["operator_macs"]["status"] == "unavailable"
    assert report["totals"]["operator_macs"]["method"] == "not_requested"


def test_a_module_called_twice_counts_each_call():
    shared = nn.Linear(4, 4)
    report = crawl_module(nn.Sequential(shared, nn.ReLU(), shared), args=(torch.rand(1, 4),))
    # each call of Linear(4, 4) on (1, 4): 2*4*4 = 32 FLOPs, 16 MACs; ReLU 4 FLOPs
    assert [(layer["path"], layer["metrics"]["operator_macs"]["value"]) for layer in report["layers"]] == [
        ("", 32), ("0", 16), ("1", 0), ("0", 16)
    ]  # fmt: skip
    assert report["operator_flops"]["by_module"] == {"Sequential": 68, "Sequential.0": 64, "Sequential.1": 4}

"""Work in a container's own forward is never silent (docs/metrics.md), and measuring does not change the
program: the crawl dispatches what a plain forward dispatches and says which path ran."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from torchscan_lsp.engine.crawler import crawl_module


def container_diags(report):
    return [d for d in report["diagnostics"] if d["code"] == "container_work"]


class MatmulContainer(nn.Module):
    """A child Linear(4, 4) plus ``x @ w`` in the container's own forward."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.w = nn.Parameter(torch.rand(4, 4))

    def forward(self, x):
        return self.fc(x) @ self.w


def test_matmul_in_a_container_makes_module_totals_partial():
    report = crawl_module(MatmulContainer(), (4,))
    totals = report["totals"]
    # the Linear's formula: 1·4·4 = 16 MACs; the (1,4)@(4,4) product's 16 MACs escape it
    assert totals["macs"]["status"] == "partial" and totals["macs"]["known_value"] == 16
    assert totals["module_flops"]["status"] == "partial"
    assert totals["dmas"]["status"] == "partial"
    diags = container_diags(report)
    assert {d["metric"] for d in diags} == {"module_flops", "macs", "dmas"}
    assert all(d["path"] == "" and "aten.mm x1" in d["message"] for d in diags)
    # the operator counter still sees all of it: 2·16 (addmm) + 16 (bias) ... at least 2·(16 + 16)
    assert report["totals"]["operator_flops"]["value"] >= 64


class Blocks(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Sequential(MatmulContainer())

    def forward(self, x):
        return self.inner(x)


def test_the_diagnostic_names_the_nested_container_path():
    report = crawl_module(Blocks(), (4,))
    assert {d["path"] for d in container_diags(report)} == {"inner.0"}


class Gated(nn.Sequential):
    """x + g_k·block_k(x): the gates' mul and add are element-wise work, not multiply-accumulates."""

    def __init__(self) -> None:
        super().__init__(nn.Linear(3, 3), nn.Linear(3, 3))
        self.gates = nn.Parameter(torch.zeros(2))

    def forward(self, x):
        for k, block in enumerate(self):
            x = x + self.gates[k] * block(x)
        return x


def test_elementwise_container_work_leaves_macs_complete():
    report = crawl_module(Gated(), (3,))
    totals = report["totals"]
    # 2 Linear(3, 3) on one row: 2·3·3 = 18 MACs, complete: a mul and an add are not matrix work
    assert totals["macs"] == {**totals["macs"], "status": "complete", "value": 18}
    assert totals["module_flops"]["status"] == totals["dmas"]["status"] == "partial"
    (flops_diag, dmas_diag) = container_diags(report)
    assert flops_diag["metric"] == "module_flops" and dmas_diag["metric"] == "dmas"
    assert "aten.add x2" in flops_diag["message"] and "aten.mul x2" in flops_diag["message"]


class Views(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)
        self.fc = nn.Linear(2 * 4 * 4, 2)

    def forward(self, x):
        return self.fc(torch.flatten(self.conv(x), 1).contiguous())


def test_views_and_copies_are_not_work():
    report = crawl_module(Views(), (1, 6, 6))
    assert container_diags(report) == []
    assert all(report["totals"][name]["status"] == "complete" for name in ("module_flops", "macs", "dmas"))


class FunctionalAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(8, 24)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return F.scaled_dot_product_attention(q, k, v)


def test_functional_attention_in_a_container_is_named():
    report = crawl_module(FunctionalAttention(), (5, 8))
    assert report["totals"]["macs"]["status"] == "partial"
    (macs_diag,) = [d for d in container_diags(report) if d["metric"] == "macs"]
    # 3-D inputs take SDPA's math path on CPU: the products show up as the bmm operators that ran
    assert "scaled_dot_product" in macs_diag["message"] or "aten.bmm x2" in macs_diag["message"]


class Einsum(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        y = self.proj(x)
        return torch.einsum("bij,bkj->bik", y, y)


def test_einsum_is_matrix_work():
    report = crawl_module(Einsum(), (3, 4))
    assert report["totals"]["macs"]["status"] == "partial"
    assert any("aten.bmm" in d["message"] for d in container_diags(report) if d["metric"] == "macs")


def test_scripted_submodule_work_is_not_silent():
    model = nn.Sequential(torch.jit.script(nn.Linear(4, 4)), nn.ReLU())
    report = crawl_module(model, (4,))
    # the scripted Linear cannot be measured by a formula: its calls are unavailable or escaped,
    # either way the MACs total is not complete and a diagnostic says why
    assert report["totals"]["macs"]["status"] != "complete"
    assert any(d.get("path") in ("0", "") for d in report["diagnostics"])


def test_fused_fast_path_is_covered_by_the_layer_formula():
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    report = crawl_module(layer, args=(torch.rand(1, 8, 32),))
    assert container_diags(report) == []
    # P05's hand count: qkv 8·3·32·32 + out 8·32·32 + ffn 8·2·32·64 + QK^T and AV 2·8·8·32 = 69632
    assert report["totals"]["macs"] == {**report["totals"]["macs"], "status": "complete", "value": 69632}
    assert report["context"]["execution_path"]["fused_kernels"] == ["aten._transformer_encoder_layer_fwd"]


class Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func._overloadpacket)
        self.ops[name] = self.ops.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


def test_crawl_dispatches_what_a_plain_forward_dispatches():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True).eval()
    x = torch.rand(2, 8, 32)
    with torch.no_grad(), Recorder() as plain:
        layer(x)
    report = crawl_module(layer, args=(x,))
    flops = report["operator_flops"]
    seen = set(flops["by_operator"]) | set(flops["ignored_operators"]) | {d["operator"] for d in flops["diagnostics"]}
    assert "aten._transformer_encoder_layer_fwd" in plain.ops
    assert seen == set(plain.ops)
    assert report["context"]["execution_path"] == {
        "grad_mode": "no_grad",
        "module_hooks": "global",
        "fused_kernels": ["aten._transformer_encoder_layer_fwd"],
    }

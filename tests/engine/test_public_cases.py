"""The 21 public bug cases (P01-P21): small models on which other tools were wrong, with the right
values derived by hand (each case's derivation is repeated in its test).

Conventions of the cases: ``macs`` are matrix, convolution and attention multiply-accumulates and
equal the report's module MACs total; ``flops`` is 2 x macs for that work, so operator FLOPs, which
also count element-wise work, must be at least that and ``complete``. Where module formulas cannot
see the work (a leaf module that only calls functional operators: P06, P17) the module totals are
``partial`` with a diagnostic and the true MACs are checked against the operator count instead.
"""

from __future__ import annotations

import json

import torch
import torch.nn.functional as F
from torch import nn

from torchscan_lsp.engine.crawler import crawl_module
from torchscan_lsp.engine.recording.operators import measure_flops


def total(report, name):
    return report["totals"][name]


def check(report, *, params, macs, flops, trainable=None):
    """Parameters, complete module MACs and complete operator FLOPs of at least ``flops``."""
    assert total(report, "parameters")["value"] == params
    if trainable is not None:
        assert total(report, "trainable_parameters")["value"] == trainable
    assert total(report, "macs")["status"] == "complete", report["diagnostics"]
    assert total(report, "macs")["value"] == macs
    operator = total(report, "operator_flops")
    assert operator["status"] == "complete", report["operator_flops"]["diagnostics"]
    assert operator["value"] >= flops
    assert json.loads(json.dumps(report)) == report


def tensor(*shape, dtype="torch.float32"):
    return {"kind": "tensor", "shape": list(shape), "dtype": dtype, "device": "cpu", "requires_grad": False}


def test_p01_shared_activation_runs_four_times():
    # 4 Linear(6,6): params 4·(36 + 6) = 168; MACs 4·B·6·6 = 4·2·36 = 288; one GELU object, 4 calls
    gelu = nn.GELU()
    model = nn.Sequential(*(nn.Sequential(nn.Linear(6, 6), gelu, nn.Linear(6, 6), gelu) for _ in range(2)))
    report = crawl_module(model, args=(torch.rand(2, 6),))
    check(report, params=168, macs=288, flops=576)
    gelu_calls = [layer["call_index"] for layer in report["layers"] if layer["type"] == "GELU"]
    assert gelu_calls == [0, 1, 2, 3]
    assert "aten.gelu" in report["operator_flops"]["by_operator"]


class Gated(nn.Sequential):
    def __init__(self) -> None:
        super().__init__(nn.Linear(3, 3), nn.Linear(3, 3))
        self.gates = nn.Parameter(torch.zeros(2))

    def forward(self, x):
        for k, block in enumerate(self):
            x = x + self.gates[k] * block(x)
        return x


def test_p02_container_parameter_counts_and_its_work_is_named():
    # 2·Linear(3,3) = 2·12 = 24 plus gates (2) = 26, all trainable; MACs 2·1·3·3 = 18
    report = crawl_module(Gated(), args=(torch.rand(1, 3),))
    check(report, params=26, trainable=26, macs=18, flops=36)
    # the gate mul/add run in the container's own forward: module FLOPs are partial and say why
    assert total(report, "module_flops")["status"] == "partial"
    assert any(d["code"] == "container_work" and d["path"] == "" for d in report["diagnostics"])


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 8)
        self.head = nn.Linear(8, 50, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(self.emb(ids))


def test_p03_tied_weight_counted_once_but_its_matmul_runs():
    # one 50x8 tensor: 400 unique elements; the head still multiplies: 4·8·50 = 1600 MACs
    report = crawl_module(Tied(), args=(torch.zeros(1, 4, dtype=torch.long),))
    check(report, params=400, macs=1600, flops=3200)
    # the embedding's record counts the 400 elements (4 bytes each); the head's says with whom it shares them
    emb, head = (next(layer for layer in report["layers"] if layer["path"] == path) for path in ("emb", "head"))
    assert emb["parameters"] == {
        "trainable": 400, "frozen": 0, "bytes": 1600, "shared": False, "shared_elements": 0, "shared_with": [],
    }  # fmt: skip
    assert head["parameters"] == {
        "trainable": 0, "frozen": 0, "bytes": 0, "shared": True, "shared_elements": 400, "shared_with": ["emb"],
    }  # fmt: skip


def test_p04_multihead_attention_in_train_mode():
    # E=16, H=2, L=10: params 4E² + 4E = 1088; in_proj 3·L·E² = 7680, QKᵀ L·L·E = 1600, AV 1600,
    # out_proj L·E² = 2560 -> 13440 MACs
    model = nn.MultiheadAttention(16, 2, batch_first=True).train()
    x = torch.rand(1, 10, 16)
    report = crawl_module(model, args=(x, x, x))
    check(report, params=1088, macs=13440, flops=26880)
    assert model.training and report["context"]["training_before"] is True


def test_p05_fused_encoder_layer_is_counted_not_zeroed():
    # d=32, L=8, ff=64: qkv 8·3·32·32 = 24576, out 8·32·32 = 8192, ffn 8·2·32·64 = 32768,
    # QKᵀ + AV 2·8·8·32 = 4096 -> 69632 MACs; params 3168 + 1056 + 2112 + 2080 + 128 = 8544
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True).eval()
    for param in layer.parameters():
        param.requires_grad_(False)
    with torch.no_grad():
        report = crawl_module(layer, args=(torch.rand(1, 8, 32),))
    check(report, params=8544, macs=69632, flops=139264)
    assert total(report, "frozen_parameters")["value"] == 8544
    assert report["operator_flops"]["by_operator"]["aten._transformer_encoder_layer_fwd"] >= 139264
    assert report["context"]["execution_path"]["fused_kernels"] == ["aten._transformer_encoder_layer_fwd"]


class Sdpa(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


def test_p06_functional_attention_is_partial_for_module_formulas_but_counted_by_operators():
    # B=1, H=2, L=S=16, D=8: QKᵀ B·H·L·S·D = 4096 MACs, AV 4096 -> 8192 MACs = 16384 FLOPs
    q = torch.rand(1, 2, 16, 8)
    report = crawl_module(Sdpa(), args=(q, q, q))
    assert total(report, "parameters")["value"] == 0
    assert total(report, "macs")["status"] == "partial"  # no module formula sees F.sdpa
    assert any(d["path"] == "" and d["metric"] == "macs" for d in report["diagnostics"] if "path" in d)
    operator = total(report, "operator_flops")
    assert operator["status"] == "complete" and operator["value"] >= 16384
    assert "aten._scaled_dot_product_flash_attention_for_cpu" in report["operator_flops"]["by_operator"]


def test_p07_conv_transpose_macs_use_the_input_size():
    # Cin=8, Cout=2, k=2, s=2, input 3x3: Cin·Cout·k·k·Hin·Win = 8·2·4·9 = 576
    report = crawl_module(nn.ConvTranspose2d(8, 2, 2, stride=2, bias=False), (8, 3, 3))
    check(report, params=64, macs=576, flops=1152)


def test_p08_conv_transpose_forward_and_backward():
    # B=2, Cin=4, Cout=8, k=2, s=2, input 5x5: forward 2·4·8·4·25 = 6400 MACs = 12800 FLOPs;
    # backward = grad_input + grad_weight = 2 x forward -> 3·12800 = 38400 for the convolution
    model = nn.ConvTranspose2d(4, 8, 2, stride=2, bias=False).train()
    report = crawl_module(model, (4, 5, 5))
    assert total(report, "parameters")["value"] == 128
    x = torch.rand(2, 4, 5, 5, requires_grad=True)
    flops = measure_flops(lambda: model(x).sum().backward())
    by_op = flops["by_operator"]
    assert by_op["aten.convolution"] == 12800 and by_op["aten.convolution_backward"] == 25600
    assert flops["total"]["status"] == "complete" and flops["total"]["value"] >= 38400
    batch = crawl_module(model, args=(torch.rand(2, 4, 5, 5),))
    assert total(batch, "macs")["value"] == 6400


def test_p09_linear_on_a_sequence_counts_every_position():
    # (2,10,16) -> (2,10,32): MACs 2·10·16·32 = 10240
    report = crawl_module(nn.Linear(16, 32), args=(torch.rand(2, 10, 16),))
    check(report, params=544, macs=10240, flops=20480)


def test_p10_lstm_nested_tuple_output():
    # LSTM(5,5): 4·5·10 + 8·5 = 240 params; T=3: 3·4·5·(5 + 5) = 600 MACs
    report = crawl_module(nn.LSTM(5, 5), args=(torch.rand(3, 1, 5),))
    check(report, params=240, macs=600, flops=1200)
    assert report["layers"][0]["output"] == {
        "kind": "tuple", "items": [tensor(3, 1, 5), {"kind": "tuple", "items": [tensor(1, 1, 5), tensor(1, 1, 5)]}]
    }


def test_p11_leaf_returning_values_and_indices():
    # Conv2d(1,4,3,p=1) on 8x8: 4·9 + 4 = 40 params, 4·1·9·64 = 2304 MACs; max-pool: no MACs
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.MaxPool2d(2, return_indices=True))
    report = crawl_module(model, (1, 8, 8))
    check(report, params=40, macs=2304, flops=4608)
    pool = [layer for layer in report["layers"] if layer["path"] == "1"][0]
    assert pool["output"] == {"kind": "tuple", "items": [tensor(1, 4, 4, 4), tensor(1, 4, 4, 4, dtype="torch.int64")]}
    assert pool["metrics"]["macs"]["value"] == 0


class WithNone(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x), None


def test_p12_none_in_the_output_tuple():
    # Linear(4,2) on (3,4): 10 params; 3·4·2 = 24 MACs
    report = crawl_module(WithNone(), args=(torch.rand(3, 4),))
    check(report, params=10, macs=24, flops=48)
    assert report["layers"][0]["output"] == {"kind": "tuple", "items": [tensor(3, 2), {"kind": "none"}]}


def test_p13_compiled_module():
    # Linear(16,16) + Linear(16,4): 272 + 68 = 340 params; B=2: 2·16·16 + 2·16·4 = 512 + 128 = 640 MACs
    model = torch.compile(nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4)), backend="eager")
    report = crawl_module(model, args=(torch.rand(2, 16),))
    check(report, params=340, macs=640, flops=1280)


def test_p14_inside_inference_mode():
    # Linear(16,32) on (4,16): 4·16·32 = 2048 MACs
    with torch.inference_mode():
        report = crawl_module(nn.Linear(16, 32), args=(torch.rand(4, 16),))
    check(report, params=544, macs=2048, flops=4096)


class Inner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        return (self.fc(x),)


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        return self.inner(x)[0]


def test_p15_one_element_tuple_reaches_the_parent_unchanged():
    # Linear(4,5) on (3,4): 25 params; 3·4·5 = 60 MACs; the parent indexes the tuple -> (3, 5)
    report = crawl_module(Outer(), args=(torch.rand(3, 4),))
    check(report, params=25, macs=60, flops=120)
    by_path = {layer["path"]: layer for layer in report["layers"]}
    assert by_path["inner"]["output"] == {"kind": "tuple", "items": [tensor(3, 5)]}
    assert by_path[""]["output"] == tensor(3, 5)


def test_p16_repeated_analyses_are_identical():
    # LayerNorm(256): 2·256 params; no matrix work: 0 MACs (normalisation is element-wise here too)
    model = nn.LayerNorm(256)
    reports = [crawl_module(model, (256,)) for _ in range(3)]
    check(reports[0], params=512, macs=0, flops=0)
    assert reports[0] == reports[1] == reports[2]
    assert "aten.native_layer_norm" in reports[0]["operator_flops"]["by_operator"]


class LeakyCell(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.W = nn.Parameter(torch.rand(8, 8))

    def forward(self, x, h):
        return h + 0.1 * (torch.tanh(x @ self.W) - h)


def test_p17_elementwise_work_is_counted_by_operators():
    # x(4,8) @ W(8,8): 4·8·8 = 256 MACs = 512 FLOPs; tanh, sub, mul, add each touch 32 elements
    report = crawl_module(LeakyCell(), args=(torch.rand(4, 8), torch.rand(4, 8)))
    assert total(report, "parameters")["value"] == 64
    assert total(report, "macs")["status"] == "partial"  # a custom leaf: no module formula
    by_op = report["operator_flops"]["by_operator"]
    assert by_op["aten.mm"] == 512
    for op in ("aten.tanh", "aten.sub", "aten.mul", "aten.add"):
        assert by_op[op] >= 32
    assert total(report, "operator_flops")["status"] == "complete"
    assert total(report, "operator_flops")["value"] >= 512 + 4 * 32


def test_p18_macs_and_flops_are_different_units():
    # 784·512 + 512·512 + 512·10 = 668672 MACs = 1337344 FLOPs; params 401920 + 262656 + 5130
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    report = crawl_module(model, args=(torch.rand(1, 1, 28, 28),))
    check(report, params=669706, macs=668672, flops=1337344)
    assert total(report, "macs")["unit"] == "MACs" and total(report, "operator_flops")["unit"] == "FLOPs"


class DictModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.fc = nn.Linear(8, 3)

    def forward(self, batch):
        embedded = self.emb(batch["tokens"])
        mask = batch["mask"].unsqueeze(-1).to(embedded.dtype)
        pooled = (embedded * mask).sum(1) / mask.sum(1).clamp(min=1)
        return {"logits": self.fc(pooled), "pooled": pooled}


def test_p19_dict_input_and_output():
    # Embedding(20,8) = 160 + Linear(8,3) = 27 -> 187; classifier 1·8·3 = 24 MACs
    batch = {"tokens": torch.zeros(1, 6, dtype=torch.long), "mask": torch.ones(1, 6, dtype=torch.bool)}
    report = crawl_module(DictModel(), args=(batch,))
    check(report, params=187, macs=24, flops=48)
    output = report["layers"][0]["output"]
    assert output["kind"] == "mapping" and [entry["key"] for entry in output["items"]] == ["logits", "pooled"]


def test_p20_bf16_inputs_and_bytes():
    # Linear(16,32) bf16: 544 params · 2 bytes = 1088; FLOPs dtype-agnostic: 2·4·16·32 = 4096
    model = nn.Linear(16, 32).to(torch.bfloat16)
    report = crawl_module(model, (16,))
    assert report["inputs"]["args"][0]["dtype"] == "torch.bfloat16"
    assert total(report, "parameter_bytes")["value"] == 1088
    batch = crawl_module(model, args=(torch.rand(4, 16, dtype=torch.bfloat16),))
    check(batch, params=544, macs=2048, flops=4096)


def test_p21_meta_device_model():
    # Linear(32,64) + Linear(64,32): 2112 + 2080 = 4192 params; B=2: 2·32·64·2 = 8192 MACs
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))
    report = crawl_module(model, args=(torch.empty(2, 32, device="meta"),))
    check(report, params=4192, macs=8192, flops=16384)
    assert report["context"]["devices"] == ["meta"]


def test_p05_crawl_restores_training_flags():
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True).train()
    crawl_module(layer, args=(torch.rand(1, 8, 32),))
    assert all(module.training for module in layer.modules())

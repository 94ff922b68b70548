"""Meta device (docs/report-schema.md): structure, parameters and FLOPs without allocating memory."""

from __future__ import annotations

import torch
from torch import nn

from torchscan_lsp.engine.crawler import crawl_module
from torchscan_lsp.engine.recording.operators import measure_flops
from torchscan_lsp.engine.dataflow.tracker import META_UNAVAILABLE


def cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4),
    )


def test_meta_model_matches_the_real_model():
    real = crawl_module(cnn(), (3, 16, 16))
    with torch.device("meta"):
        model = cnn()
    meta = crawl_module(model, args=(torch.empty(1, 3, 16, 16, device="meta"),))
    # nothing was materialised: every parameter and buffer is still a meta tensor
    assert all(t.is_meta for t in (*model.parameters(), *model.buffers()))
    for name in ("parameters", "parameter_bytes", "buffer_elements", "module_flops", "macs", "dmas", "operator_flops"):
        assert meta["totals"][name] == real["totals"][name], name
    assert meta["operator_flops"]["by_operator"] == real["operator_flops"]["by_operator"]
    shapes = lambda report: [(layer["path"], layer["output"].get("shape")) for layer in report["layers"]]  # noqa: E731
    assert shapes(meta) == shapes(real)
    # the cumulative receptive field needs no data either
    rf = lambda report: [layer["metrics"].get("receptive_field") for layer in report["layers"]]  # noqa: E731
    assert rf(meta) == rf(real)
    assert meta["context"]["devices"] == ["meta"] and real["context"]["devices"] == ["cpu"]


def test_meta_context_says_memory_and_latency_are_unavailable():
    with torch.device("meta"):
        model = nn.Linear(4, 2)
    report = crawl_module(model, args=(torch.empty(3, 4, device="meta"),))
    assert report["context"]["execution_path"]["unavailable_on_meta"] == META_UNAVAILABLE
    assert "unavailable_on_meta" not in crawl_module(nn.Linear(4, 2), (4,))["context"]["execution_path"]


def test_meta_transformer_layer_macs_match_the_fused_cpu_count():
    # on the CPU in eval + no_grad the layer runs one fused kernel; on meta it decomposes into
    # its children: the module MACs must agree. d=32, L=8, B=2, ff=64:
    # 2·(8·3·32·32 + 8·32·32 + 8·2·32·64 + 2·8·8·32) = 2·69632 = 139264
    def layer() -> nn.Module:
        return nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)

    real = crawl_module(layer(), args=(torch.rand(2, 8, 32),))
    with torch.device("meta"):
        model = layer()
    meta = crawl_module(model, args=(torch.empty(2, 8, 32, device="meta"),))
    assert real["totals"]["macs"]["value"] == meta["totals"]["macs"]["value"] == 139264
    assert meta["totals"]["parameters"] == real["totals"]["parameters"]
    assert meta["totals"]["operator_flops"]["status"] == "complete"
    assert real["context"]["execution_path"]["fused_kernels"] == ["aten._transformer_encoder_layer_fwd"]
    assert meta["context"]["execution_path"]["fused_kernels"] == []


def test_measure_flops_on_meta():
    # Linear(32, 64) on (2, 32): 2·2·32·64 = 8192 FLOPs for the product
    with torch.device("meta"):
        model = nn.Linear(32, 64)
        x = torch.empty(2, 32)
    report = measure_flops(lambda: model(x))
    assert report["total"]["status"] == "complete"
    assert report["by_operator"]["aten.addmm"] == 8192

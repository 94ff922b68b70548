"""Nested, jagged, sparse, quantized and subclassed tensors never fail an analysis (issue: nested
tensors). What has a shape is recorded; what has none is unavailable with a diagnostic that says why."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from torchscan_lsp import crawl_module, summary
from torchscan_lsp.engine.recording.inputs import value_meta
from torchscan_lsp.engine.recording.tensor_shapes import irregular_reason, regular_shape
from torchscan_lsp.engine.dataflow.tokens import mask_relation

pytestmark = [
    pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning"),
    pytest.mark.filterwarnings("ignore:Sparse CSR tensor support:UserWarning"),
    pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning"),
]


def _nested(layout=torch.strided) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([torch.rand(3, 4), torch.rand(5, 4)], layout=layout)


def _padded_encoder():
    torch.manual_seed(0)
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), 2).eval()
    x = torch.rand(2, 5, 32)
    # sequence 0 has 3 real tokens (positions 3 and 4 are padding), sequence 1 has all 5
    mask = torch.zeros(2, 5, dtype=torch.bool)
    mask[0, 3:] = True
    return model, x, mask


def test_padded_transformer_encoder_is_analysed_not_crashed():
    """TransformerEncoder packs a padded batch into a nested tensor (lengths 3 and 5) for its fused
    layers; reading that tensor's shape used to raise ``NestedTensorImpl doesn't support sizes``."""
    model, x, mask = _padded_encoder()
    report = crawl_module(model, args=(x,), kwargs={"src_key_padding_mask": mask})
    layer = next(layer for layer in report["layers"] if layer["path"] == "layers.0")
    assert layer["input"]["args"][0] == {
        "kind": "tensor", "shape": None, "dtype": "torch.float32", "device": "cpu", "requires_grad": False,
        "layout": "nested", "components": 2, "component_shapes": [[3, 32], [5, 32]],
    }
    stage = layer["token_dependencies"]["dependencies"][0]
    # inside each sequence every token sees every token of its own sequence
    assert stage["relation"] == "all_tokens"
    assert stage["query_axis"] == {"role": "src", "dim": 1, "length": None, "lengths": [3, 5]}
    # the encoder itself received the padding mask: 2 of the 5 key positions are hidden in a sequence
    root = report["layers"][0]["token_dependencies"]["dependencies"][0]
    assert root["relation"] == "unknown" and "hides 2 of 5 key positions" in root["reason"]
    # the layers' module formulas need one shape: unavailable, with a diagnostic that names it
    irregular = [d for d in report["diagnostics"] if d["code"] == "irregular_tensor" and d.get("path") == "layers.0"]
    assert {d["metric"] for d in irregular} == {"module_flops", "macs", "dmas"}
    assert "a nested tensor of 2 components with shapes (3, 32), (5, 32)" in irregular[0]["message"]
    assert layer["metrics"]["module_flops"]["status"] == "unavailable"


def test_padded_encoder_operator_flops_equal_the_sequences_run_alone():
    """Independent derivation: the nested fast path runs each sequence on its own tokens, so the
    fused kernel's FLOPs on the padded batch equal those of the two sequences run separately."""
    model, x, mask = _padded_encoder()
    padded = crawl_module(model, args=(x,), kwargs={"src_key_padding_mask": mask})["operator_flops"]
    kernel = "aten._transformer_encoder_layer_fwd"
    alone = sum(
        crawl_module(model, args=(torch.rand(1, length, 32),))["operator_flops"]["by_operator"][kernel]
        for length in (3, 5)
    )
    assert padded["by_operator"][kernel] == alone
    assert padded["total"]["status"] == "complete"


def test_padded_encoder_in_structure_mode_and_summary(capsys):
    model, x, mask = _padded_encoder()
    structure = crawl_module(model, args=(x,), kwargs={"src_key_padding_mask": mask}, mode="structure")
    assert structure["layers"][1]["input"]["args"][0]["layout"] == "nested"
    summary(model, args=(x,), kwargs={"src_key_padding_mask": mask})
    assert "├─layers.1" in capsys.readouterr().out


class _LinearThenAdd(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        return self.lin(x) + 1  # element-wise work in the container's own forward


@pytest.mark.parametrize("layout", [torch.strided, torch.jagged], ids=["nested", "jagged"])
def test_nested_input_through_linear_is_unavailable_with_reasons(layout):
    report = crawl_module(_LinearThenAdd(), args=(_nested(layout),))
    flops = report["operator_flops"]
    # no operator formula can read a nested shape: nothing counted, each operator named with why
    assert flops["total"]["status"] == "partial" and flops["total"]["known_value"] == 0
    named = {d["operator"]: d["message"] for d in flops["diagnostics"]}
    assert set(named) == {"aten.linear", "aten.add"}
    kind = "a jagged nested tensor" if layout is torch.jagged else "a nested tensor"
    assert f"{kind} of 2 components with shapes (3, 4), (5, 4)" in named["aten.linear"]
    assert report["layers"][1]["output"]["component_shapes"] == [[3, 3], [5, 3]]


def test_sparse_input_keeps_its_shape_and_layout():
    class SparseFirst(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 3)

        def forward(self, x):
            return self.lin(torch.sparse.mm(x, torch.eye(4)))

    report = crawl_module(SparseFirst(), args=(torch.rand(2, 4).to_sparse(),))
    assert report["inputs"]["args"][0]["shape"] == [2, 4]
    assert report["inputs"]["args"][0]["layout"] == "sparse_coo"
    # Linear(4, 3) on (2, 4): 2*4*3 = 24 MACs, counted as for a dense input
    assert report["layers"][1]["metrics"]["macs"]["value"] == 24


def test_value_metadata_of_every_layout():
    assert value_meta(torch.rand(3, 4).to_sparse_csr())["layout"] == "sparse_csr"
    quantized = value_meta(torch.quantize_per_tensor(torch.rand(3, 4), 0.1, 0, torch.quint8))
    assert quantized["shape"] == [3, 4] and quantized["dtype"] == "torch.quint8"
    assert quantized["qscheme"] == "per_tensor_affine"

    class Tagged(torch.Tensor):
        pass

    tagged = value_meta(torch.rand(2).as_subclass(Tagged))
    assert tagged["shape"] == [2] and tagged["subclass"].endswith("Tagged")
    jagged = value_meta(_nested(torch.jagged))
    assert jagged["shape"] is None and jagged["layout"] == "jagged"
    assert jagged["component_shapes"] == [[3, 4], [5, 4]]
    plain = value_meta(nn.Parameter(torch.rand(2)))
    assert set(plain) == {"kind", "shape", "dtype", "device", "requires_grad"}


def test_shape_helpers_never_raise():
    nested = _nested()
    assert regular_shape(nested) is None and regular_shape(_nested(torch.jagged)) is None
    assert regular_shape(torch.rand(2, 3).to_sparse()) == (2, 3)
    assert irregular_reason(nested) == "a nested tensor of 2 components with shapes (3, 4), (5, 4), which has no single shape"


def test_masks_that_cannot_be_read_are_unknown_with_a_reason():
    dense = torch.zeros(4, 4)
    assert mask_relation("attn_mask", dense.to_sparse(), None, False, 4, 4) == ("unknown", "the mask is a sparse_coo tensor")
    assert mask_relation("attn_mask", None, None, False, 4, 4)[0] == "all_tokens"

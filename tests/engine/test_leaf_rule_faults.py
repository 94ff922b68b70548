"""Faults of the leaf rule (issue 12): lazy modules, parametrized weights, quantized models, stock
Transformer layers off their fused path, shared parameters. Every expected value is derived by hand."""

import warnings

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import weight_norm

from torchscan_lsp import crawl_module, summary
from torchscan_lsp.engine.recording.module_info import is_metric_leaf
from torchscan_lsp.engine.type_names import type_name


def value(report, name):
    metric = report["totals"][name]
    return metric["status"], metric["known_value"]


def lazy_model():
    return nn.Sequential(nn.LazyLinear(8), nn.ReLU())


@pytest.mark.parametrize("mode", ["full", "structure"])
def test_lazy_modules_are_counted_after_they_initialise(mode):
    # LazyLinear(8) meets a (2, 4) input: weight 8x4 = 32 + bias 8 = 40 parameters; 2*4*8 = 64 MACs
    report = crawl_module(lazy_model(), args=(torch.rand(2, 4),), mode=mode)
    assert value(report, "parameters") == ("complete", 40)
    assert report["layers"][1]["parameters"]["trainable"] == 40
    if mode == "full":
        assert value(report, "macs") == ("complete", 64)
        assert value(report, "operator_macs") == ("complete", 64)


def test_lazy_modules_in_summary(capsys):
    summary(lazy_model(), (4,))  # a generated (1, 4) input: 1*4*8 = 32 MACs
    out = capsys.readouterr().out
    assert "Trainable params: 40" in out and "Module-formula forward MACs: 32.00 MACs" in out


class Symmetric(nn.Module):
    def forward(self, weight):
        return weight.triu() + weight.triu(1).transpose(-1, -2)


@pytest.mark.parametrize("parametrized", ["weight_norm", "custom"])
def test_parametrized_modules_are_counted_like_their_plain_form(parametrized):
    if parametrized == "weight_norm":
        # weight_norm splits Linear(4, 8)'s weight into g (8x1 = 8) and v (8x4 = 32), + bias 8 = 48
        linear, parameters = weight_norm(nn.Linear(4, 8)), 48
    else:
        linear = nn.Linear(4, 8)
        linear.weight = nn.Parameter(torch.rand(8, 8)[:, :4].contiguous())
        parametrize.register_parametrization(linear, "weight", nn.Identity())
        parameters = 8 * 4 + 8  # the original weight and the bias
    model = nn.Sequential(linear, nn.ReLU())
    assert is_metric_leaf(linear)
    report = crawl_module(model, args=(torch.rand(2, 4),))
    # the matmul of a Linear(4, 8) on (2, 4): 2*4*8 = 64 MACs, counted by the Linear formula
    assert [layer["path"] for layer in report["layers"]] == ["", "0", "1"]  # no parametrization records
    assert report["layers"][1]["metrics"]["macs"] == {
        "status": "complete", "value": 64, "known_value": 64, "unit": "MACs", "scope": "module_call",
        "method": "torchscan_module_formula",
    }  # fmt: skip
    assert value(report, "macs") == ("complete", 64)
    assert value(report, "operator_macs") == ("complete", 64)
    assert value(report, "parameters") == ("complete", parameters)
    assert report["layers"][1]["parameters"]["trainable"] == parameters


def quantized_mlp():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 4)))


def test_quantized_packed_weights_are_counted_and_named_in_full():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = crawl_module(quantized_mlp(), args=(torch.rand(2, 16),))
    # packed weights: 8x16 = 128 + bias 8 = 136, and 4x8 = 32 + bias 4 = 36: 172 elements; the int8
    # weights take 1 byte each and the float biases 4: 128 + 32 + 4*(8 + 4) = 208 bytes
    assert value(report, "parameters") == ("complete", 172)
    assert value(report, "frozen_parameters") == ("complete", 172)
    assert value(report, "parameter_bytes") == ("complete", 208)
    full = "torch.ao.nn.quantized.dynamic.Linear"
    assert [(layer["path"], layer["type"]) for layer in report["layers"]] == [
        ("", "Sequential"), ("0", full), ("1", "ReLU"), ("2", full)
    ]  # fmt: skip
    assert [layer["parameters"]["frozen"] for layer in report["layers"]] == [0, 136, 0, 36]
    messages = [d["message"] for d in report["diagnostics"] if d.get("path") == "0"]
    assert messages and all(full in message for message in messages if "not supported" in message)
    assert type_name(nn.Linear) == "Linear"


def decoder_layer():
    torch.manual_seed(0)
    return nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0)


# d=8, nhead=2, feed-forward 16, target length L=3, memory length S=4, batch 1. MACs:
#   self-attention: in_proj 3*L*d^2 = 576, Q K^T L*L*d = 72, A V 72, out_proj L*d^2 = 192 -> 912
#   cross-attention: q L*d^2 = 192, k and v 2*S*d^2 = 512, Q K^T L*S*d = 96, A V 96, out 192 -> 1088
#   feed-forward: 2*L*d*ff = 768
DECODER_LAYER_MACS = 912 + 1088 + 768  # 2768
# encoder layer on (3, 1, 8): in_proj 576, Q K^T 72, A V 72, out_proj 192, feed-forward 768
ENCODER_LAYER_MACS = 576 + 72 + 72 + 192 + 768  # 1680


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.Transformer(8, 2, 1, 1, 16, dropout=0.0)

    def forward(self, src, tgt):
        return self.transformer(src, tgt)


@pytest.mark.parametrize(
    "name, build, args, macs",
    [
        ("decoder layer", decoder_layer, (torch.rand(3, 1, 8), torch.rand(4, 1, 8)), DECODER_LAYER_MACS),
        ("decoder", lambda: nn.TransformerDecoder(decoder_layer(), 2), (torch.rand(3, 1, 8), torch.rand(4, 1, 8)),
         2 * DECODER_LAYER_MACS),
        ("encoder layer, sequence first", lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0),
         (torch.rand(3, 1, 8),), ENCODER_LAYER_MACS),
        # src (3, 1, 8) through one encoder layer: 1680; tgt L=2 against memory S=3 through one
        # decoder layer: self 3*2*64 + 2*2*8*2 + 2*64 = 576, cross 2*64 + 2*3*64 + 2*2*3*8 + 2*64 = 736,
        # feed-forward 2*2*8*16 = 512: 1824
        ("nn.Transformer inside a module", Outer, (torch.rand(3, 1, 8), torch.rand(2, 1, 8)), 1680 + 576 + 736 + 512),
    ],
)  # fmt: skip
def test_stock_transformer_modules_are_counted_whole_on_every_path(name, build, args, macs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = crawl_module(build().eval(), args=args)
    assert value(report, "macs") == ("complete", macs), name
    assert value(report, "operator_macs") == ("complete", macs), name
    assert report["totals"]["module_flops"]["status"] == "complete", name
    assert report["totals"]["dmas"]["status"] == "complete", name
    assert not [d for d in report["diagnostics"] if d["code"] == "container_work"], name


class Branch(nn.Module):
    def __init__(self):
        super().__init__()
        self.used = nn.Linear(3, 4)
        self.unused = nn.LazyLinear(4)

    def forward(self, x):
        return self.used(x)


def test_a_lazy_module_that_never_ran_makes_the_parameter_totals_partial():
    report = crawl_module(Branch(), args=(torch.rand(2, 3),))
    # Linear(3, 4): 12 + 4 = 16 known parameters; the lazy module has no sizes yet
    assert value(report, "parameters") == ("partial", 16)
    assert report["diagnostics"][0]["code"] == "uninitialized_parameters"
    assert "'unused'" in report["diagnostics"][0]["message"]
    assert value(report, "operator_macs") == ("complete", 2 * 3 * 4)


class Guarded(nn.Module):
    def __init__(self):
        super().__init__()
        self.lazy = nn.LazyLinear(4)

    def forward(self, x):
        try:
            return self.lazy("not a tensor")  # the lazy module fails to initialise
        except AttributeError:
            return x


def test_a_lazy_module_whose_call_raised_counts_nothing():
    report = crawl_module(Guarded(), args=(torch.rand(2, 3),), mode="structure")
    lazy = report["layers"][1]
    assert lazy["path"] == "lazy" and lazy["output"] == {"kind": "pending"}
    assert lazy["parameters"]["trainable"] == 0
    assert value(report, "parameters") == ("partial", 0)

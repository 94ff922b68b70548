"""The one leaf rule and the one pass over a model (engine/recording/module_info.py)."""

import torch
from torch import nn
from torch.nn.utils.parametrizations import weight_norm

from torchscan_lsp.engine.recording.module_info import ModelScan, is_metric_leaf, module_infos, named_modules


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(2, 2)
        self.b = self.a  # the same module under a second name
        self.c = nn.Sequential(self.a, nn.ReLU())
        self.empty = None
        self.register_buffer("steps", torch.zeros(1))


def test_the_pass_sees_what_named_modules_parameters_and_buffers_see():
    model = Shared()
    scan = ModelScan(model)
    assert [(path, id(m)) for path, m in scan.named] == [(path, id(m)) for path, m in model.named_modules()]
    assert [(path, id(m)) for path, m in named_modules(model)] == [(path, id(m)) for path, m in model.named_modules()]
    assert [id(t) for t in scan.parameters] == [id(t) for t in model.parameters()]
    assert [id(t) for t in scan.buffers] == [id(t) for t in model.buffers()]


class OwnEncoderLayer(nn.TransformerEncoderLayer):
    def forward(self, src, *args, **kwargs):  # not the stock forward: its children are what ran
        return super().forward(src, *args, **kwargs) * 2


def test_the_leaf_rule():
    assert is_metric_leaf(nn.Linear(2, 2)) and is_metric_leaf(nn.ReLU())
    assert not is_metric_leaf(nn.Sequential(nn.Linear(2, 2)))
    assert is_metric_leaf(nn.MultiheadAttention(4, 2))
    assert is_metric_leaf(nn.TransformerEncoderLayer(4, 2, 8)) and is_metric_leaf(nn.TransformerDecoderLayer(4, 2, 8))
    # a stack only calls its layers (and its final norm): a container
    assert not is_metric_leaf(nn.TransformerDecoder(nn.TransformerDecoderLayer(4, 2, 8), 2))
    transformer = nn.Transformer(8, 2, 1, 1, 16)
    assert is_metric_leaf(transformer, root=True) and not is_metric_leaf(transformer)  # one record as the model
    assert not is_metric_leaf(OwnEncoderLayer(4, 2, 8))
    assert is_metric_leaf(weight_norm(nn.Linear(2, 2)))


def test_calls_below_a_metric_leaf_are_not_recorded():
    model = nn.Sequential(nn.TransformerEncoderLayer(4, 2, 8), nn.Linear(4, 4))
    infos = {info.path: info for info in module_infos(model).values()}
    assert infos[""].recorded and not infos[""].leaf
    assert infos["0"].recorded and infos["0"].leaf and infos["0"].recurse
    assert not infos["0.self_attn"].recorded and not infos["0.linear1"].recorded
    assert infos["1"].recorded and infos["1"].leaf and not infos["1"].recurse
    assert infos["0.linear1"].label == "Sequential.0.linear1"  # still labelled for operator attribution

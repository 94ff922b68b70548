"""Observers of the crawl's one recording pass see every call and operator exactly once, with the
report's own layer indices."""

import pytest
import torch
from torch import nn

from torchscan_lsp import crawl_module
from torchscan_lsp.engine.crawler import record_pass
from torchscan_lsp.engine.recording.observers import PassObserver, overriding


class Log(PassObserver):
    def __init__(self):
        self.events = []

    def call_started(self, module, info, layer, args):
        self.events.append(("start", info.path, layer))

    def call_ended(self, module, info, layer, args, kwargs, output, error):
        self.events.append(("end", info.path, layer, None if error is None else type(error).__name__))

    def operator_ran(self, func, args, kwargs, out, flops, macs, layer):
        self.events.append(("op", str(func._overloadpacket), flops, macs, layer))


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def test_every_call_and_operator_once_with_its_layer():
    log = Log()
    report = crawl_module(mlp(), args=(torch.rand(3, 4),), observers=[log])
    assert [(layer["path"], layer["call_index"]) for layer in report["layers"]] == [("", 0), ("0", 0), ("1", 0), ("2", 0)]
    # Linear(4, 8) on (3, 4) is aten.t (a view: no formula) then aten.addmm: 2*3*4*8 = 192 FLOPs,
    # 3*4*8 = 96 MACs (the bias add is folded into the accumulation); ReLU on 3*8 = 24 elements is
    # 24 FLOPs and no MAC; Linear(8, 2): 2*3*8*2 = 96 FLOPs, 48 MACs.
    assert log.events == [
        ("start", "", 0),
        ("start", "0", 1),
        ("op", "aten.t", None, None, 1),
        ("op", "aten.addmm", 192, 96, 1),
        ("end", "0", 1, None),
        ("start", "1", 2),
        ("op", "aten.relu", 24, 0, 2),
        ("end", "1", 2, None),
        ("start", "2", 3),
        ("op", "aten.t", None, None, 3),
        ("op", "aten.addmm", 96, 48, 3),
        ("end", "2", 3, None),
        ("end", "", 0, None),
    ]


def test_structure_mode_and_record_pass_observe_calls_only():
    for run in (
        lambda log: crawl_module(mlp(), args=(torch.rand(3, 4),), mode="structure", observers=[log]),
        lambda log: record_pass(mlp(), (torch.rand(3, 4),), observers=[log]),
    ):
        log = Log()
        run(log)
        assert [e for e in log.events if e[0] == "op"] == []
        assert [e[:3] for e in log.events] == [
            ("start", "", 0), ("start", "0", 1), ("end", "0", 1), ("start", "1", 2), ("end", "1", 2),
            ("start", "2", 3), ("end", "2", 3), ("end", "", 0),
        ]  # fmt: skip


class Fails(nn.Module):
    def forward(self, x):
        raise ValueError("no")


class Catches(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Fails()

    def forward(self, x):
        try:
            return self.inner(x)
        except ValueError:
            return x


def test_a_call_that_raises_ends_with_its_error():
    log = Log()
    crawl_module(Catches(), args=(torch.rand(2),), mode="structure", observers=[log])
    assert log.events == [("start", "", 0), ("start", "inner", 1), ("end", "inner", 1, "ValueError"), ("end", "", 0, None)]


def test_calls_below_a_metric_leaf_open_no_record():
    """An nn.Transformer root is measured as one unit: its descendants' calls are observed with
    layer None, and their operators are attributed to the root's record (layer 0)."""
    log = Log()
    model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=8)
    crawl_module(model, args=(torch.rand(3, 1, 8), torch.rand(2, 1, 8)), observers=[log])
    starts = [e for e in log.events if e[0] == "start"]
    assert starts[0] == ("start", "", 0) and len(starts) > 1
    assert all(layer is None for _, _, layer in starts[1:])
    assert {e[-1] for e in log.events if e[0] == "op"} == {0}


def test_unoverridden_methods_are_never_called():
    class OnlyOperators(PassObserver):
        def operator_ran(self, *args):
            pass

    observer = OnlyOperators()
    assert overriding([observer], "call_started") == ()
    assert len(overriding([observer], "operator_ran")) == 1


def test_an_object_without_observer_methods_is_refused():
    with pytest.raises(TypeError, match="observers must be PassObserver"):
        crawl_module(mlp(), args=(torch.rand(3, 4),), observers=[object()])

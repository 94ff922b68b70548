"""Modules called through ``module.forward(...)`` (llama2.c's ``self.attention.forward(...)``): no hook
fires for them, and the engine finds them by their ``forward`` frames. Counts derived by hand below:
a product of an (m, k) and a (k, n) matrix is 2·m·k·n FLOPs and m·k·n MACs, an addition one FLOP per
output element."""

import sys

import torch
from torch import nn

from torchscan_lsp import crawl_module
from torchscan_lsp.engine.crawler import record_pass
from torchscan_lsp.engine.recording.observers import PassObserver

T, D = 4, 8  # tokens, width


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.wq = nn.Linear(D, D, bias=False)
        self.wk = nn.Linear(D, D, bias=False)
        self.wv = nn.Linear(D, D, bias=False)

    def forward(self, x):
        q, k, v = self.wq(x), self.wk(x), self.wv(x)
        scores = q @ k.transpose(-2, -1)
        return scores @ v


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = Attention()
        self.proj = nn.Linear(D, D, bias=False)

    def forward(self, x):
        h = x + self.attention.forward(x)
        return self.proj.forward(h)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return self.block(x)


# each Linear(D, D) on (T, D): 2·T·D·D = 512 FLOPs, 256 MACs
LINEAR_FLOPS, LINEAR_MACS = 2 * T * D * D, T * D * D
# q @ kᵀ: (T, D) @ (D, T), then scores @ v: (T, T) @ (T, D): 2·T·D·T each
PRODUCT_FLOPS, PRODUCT_MACS = 2 * T * D * T, T * D * T
ATTENTION_FLOPS = 3 * LINEAR_FLOPS + 2 * PRODUCT_FLOPS  # 1536 + 512 = 2048
ATTENTION_MACS = 3 * LINEAR_MACS + 2 * PRODUCT_MACS  # 768 + 256 = 1024
ADD_FLOPS = T * D  # the residual x + attention: 32
BLOCK_FLOPS = ATTENTION_FLOPS + ADD_FLOPS + LINEAR_FLOPS  # 2048 + 32 + 512 = 2592


def model():
    torch.manual_seed(0)
    return Net()


def by_path(report):
    return {layer["path"]: (index, layer) for index, layer in enumerate(report["layers"])}


def test_a_forward_called_directly_has_its_own_record_with_its_own_work():
    report = crawl_module(model(), args=(torch.rand(1, T, D),))
    layers = by_path(report)
    assert list(layers) == ["", "block", "block.attention", "block.attention.wq", "block.attention.wk",
                            "block.attention.wv", "block.proj"]
    block_index, block = layers["block"]
    attention_index, attention = layers["block.attention"]
    # found by its frame: a record under the block, its children under it
    assert attention["direct"] is True and attention["parent"] == block_index
    assert attention["metrics"]["calls"]["method"] == "forward_frame"
    assert "direct" not in block
    assert {layers[f"block.attention.{name}"][1]["parent"] for name in ("wq", "wk", "wv")} == {attention_index}
    # its own products are its work, no longer the block's
    assert attention["metrics"]["operator_flops"] == {**attention["metrics"]["operator_flops"], "status": "complete",
                                                      "value": ATTENTION_FLOPS}
    assert attention["metrics"]["operator_macs"]["value"] == ATTENTION_MACS
    assert block["metrics"]["operator_flops"]["value"] == BLOCK_FLOPS
    assert report["totals"]["operator_flops"]["value"] == BLOCK_FLOPS
    # its input read from its frame, its output what its forward returned: (1, T, T) @ (1, T, D)
    assert [arg["shape"] for arg in attention["input"]["args"]] == [[1, T, D]]
    assert attention["output"]["shape"] == [1, T, D]
    # the block's own work is the residual addition alone, named as container work of the block
    own = [d for d in report["diagnostics"] if d["code"] == "container_work"]
    assert {d["path"] for d in own} == {"block", "block.attention"}
    assert sys.gettrace() is None


def test_a_leaf_called_directly_gets_its_module_formulas():
    report = crawl_module(model(), args=(torch.rand(1, T, D),))
    _, proj = by_path(report)["block.proj"]
    assert proj["direct"] is True
    assert proj["metrics"]["operator_flops"]["value"] == LINEAR_FLOPS
    # the Linear formula: one MAC per output element and input feature, T·D·D = 256
    assert proj["metrics"]["macs"] == {**proj["metrics"]["macs"], "status": "complete", "value": LINEAR_MACS}
    assert proj["output"]["shape"] == [1, T, D]


def test_the_same_work_as_when_called_through_call():
    class Called(Block):
        def forward(self, x):
            h = x + self.attention(x)
            return self.proj(h)

    direct = crawl_module(model(), args=(torch.rand(1, T, D),))
    hooked_model = model()
    hooked_model.block.__class__ = Called
    hooked = crawl_module(hooked_model, args=(torch.rand(1, T, D),))
    strip = lambda report: [(l["path"], l["parent"], l["metrics"]["operator_flops"]["value"], l["output"]["shape"])
                            for l in report["layers"]]
    assert strip(direct) == strip(hooked)
    assert direct["totals"]["macs"] == hooked["totals"]["macs"]


def test_super_forward_and_a_second_direct_call():
    class Doubled(nn.Linear):
        def forward(self, x):
            return super().forward(x) * 2

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = Doubled(D, D, bias=False)
            self.inner = nn.Linear(D, D, bias=False)

        def forward(self, x):
            x = self.fc(x)
            return self.inner.forward(self.inner.forward(x))

    report = crawl_module(Twice(), args=(torch.rand(1, T, D),))
    # super().forward runs inside the hooked call of fc: no record of its own
    assert [(l["path"], l["call_index"], l.get("direct", False)) for l in report["layers"]] == [
        ("", 0, False), ("fc", 0, False), ("inner", 0, True), ("inner", 1, True)]
    # fc: a product and the doubling (T·D = 32 FLOPs); each inner call a product
    assert [l["metrics"]["operator_flops"]["value"] for l in report["layers"]] == [
        3 * LINEAR_FLOPS + T * D, LINEAR_FLOPS + T * D, LINEAR_FLOPS, LINEAR_FLOPS]


class Log(PassObserver):
    def __init__(self):
        self.events = []

    def call_started(self, module, info, layer, args):
        self.events.append(("start", info.path))

    def forward_started(self, module, info, layer, args, frame):
        self.events.append(("forward", info.path, frame.f_code.co_name, frame.f_back.f_code.co_name))

    def call_ended(self, module, info, layer, args, kwargs, output, error):
        self.events.append(("end", info.path))


def test_observers_see_direct_calls_in_nesting_order():
    log = Log()
    crawl_module(model(), args=(torch.rand(1, T, D),), observers=[log])
    assert log.events == [
        ("start", ""), ("start", "block"),
        # found at its first event, the call of wq; its frame is Attention.forward, called by Block.forward
        ("forward", "block.attention", "forward", "forward"),
        ("start", "block.attention.wq"), ("end", "block.attention.wq"),
        ("start", "block.attention.wk"), ("end", "block.attention.wk"),
        ("start", "block.attention.wv"), ("end", "block.attention.wv"),
        ("end", "block.attention"),
        ("forward", "block.proj", "forward", "forward"), ("end", "block.proj"),
        ("end", "block"), ("end", ""),
    ]


def test_structure_mode_finds_a_direct_call_by_the_calls_inside_it():
    layers = record_pass(model(), (torch.rand(1, T, D),))
    # without operators, only the calls of wq, wk and wv reveal the attention; proj reveals nothing
    assert [(l["path"], l.get("direct", False)) for l in layers] == [
        ("", False), ("block", False), ("block.attention", True), ("block.attention.wq", False),
        ("block.attention.wk", False), ("block.attention.wv", False)]


def test_under_another_trace_function_the_output_is_unknown_and_said():
    seen = []

    def tracer(frame, event, arg):
        seen.append(event)
        return None

    sys.settrace(tracer)
    try:
        report = crawl_module(model(), args=(torch.rand(1, T, D),))
    finally:
        installed = sys.gettrace()
        sys.settrace(None)
    assert installed is tracer and seen  # left as it was, and still called
    layers = by_path(report)
    assert layers["block.attention"][1]["output"] == {"kind": "unknown"}
    proj = layers["block.proj"][1]
    assert proj["metrics"]["operator_flops"]["value"] == LINEAR_FLOPS  # still counted
    assert proj["metrics"]["macs"]["status"] == "unavailable"
    codes = {(d["code"], d["path"]) for d in report["diagnostics"]}
    assert ("direct_forward_output", "block.proj") in codes
    assert report["totals"]["macs"]["status"] != "complete"


def test_a_direct_call_that_raises_leaves_no_trace_function():
    class Broken(Attention):
        def forward(self, x):
            self.wq(x)
            raise ValueError("boom")

    class Caller(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = Broken()

        def forward(self, x):
            return self.attention.forward(x)

    try:
        crawl_module(Caller(), args=(torch.rand(1, T, D),))
    except ValueError:
        pass
    else:  # pragma: no cover
        raise AssertionError("the forward's exception propagates")
    assert sys.gettrace() is None
    # and the next analysis is whole
    report = crawl_module(model(), args=(torch.rand(1, T, D),))
    assert report["totals"]["operator_flops"]["value"] == BLOCK_FLOPS

"""The parts of a training count the MFU and the 6·N·tokens estimate treat apart
(engine/training/flop_parts.py): module forwards recomputed in the backward under activation
checkpointing, and the forward's fused attention calls, each worked out by hand."""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from torchscan_lsp.contract.training import parse_train_options
from torchscan_lsp.engine.training.flops import TrainingFlopCounter
from torchscan_lsp.engine.training.step import build_training_step


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 64)
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(self.fc(x))


class Net(nn.Module):
    def __init__(self, reentrant=None):
        super().__init__()
        self.reentrant = reentrant
        self.a, self.b = Block(), Block()

    def forward(self, x):
        x = self.a(x) if self.reentrant is None else checkpoint(self.a, x, use_reentrant=self.reentrant)
        q = x.view(1, 4, 8, 8)  # 1 batch, 4 heads, 8 positions, head dim 8
        y = nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        return self.b(x + y.reshape(4, 64))


def count(reentrant):
    torch.manual_seed(0)
    inputs = torch.rand(4, 64, requires_grad=reentrant is True)  # re-entrant checkpointing needs an input that requires grad
    step = build_training_step(lambda: (Net(reentrant), (inputs,)), parse_train_options(None), foreach_device="cpu")
    step.init_optimizer_state()
    counter = TrainingFlopCounter(step.model)
    with counter:
        step.run(counter.enter_phase)
    return counter.report()


LINEAR = 2 * 4 * 64 * 64  # Linear(64, 64) on 4 rows: 32,768 FLOPs
GELU = 5 * 4 * 64         # the operator formula's 5 FLOPs per element: 1,280


def test_recomputed_forwards_are_counted_apart():
    plain, early, whole = count(None), count(False), count(True)
    assert plain["recomputed"] == {"flops": 0, "calls": 0}
    assert plain["by_module"]["a"]["forward_flops"]["value"] == LINEAR + GELU
    backward = plain["totals"]["backward_flops"]["value"]
    # non-reentrant: the recomputation stops once the tensor the backward needs (the Linear's
    # output) exists, before the GELU
    assert early["recomputed"] == {"flops": LINEAR, "calls": 1}
    assert early["totals"]["backward_flops"]["value"] == backward + LINEAR
    # re-entrant: block `a` runs whole again; its input now requires grad, so the Linear's backward
    # also computes the input's gradient, one more 4 x 64 x 64 product
    assert whole["recomputed"] == {"flops": LINEAR + GELU, "calls": 1}
    assert whole["totals"]["backward_flops"]["value"] == backward + LINEAR + GELU + LINEAR
    for report in (early, whole):
        assert report["totals"]["forward_flops"] == plain["totals"]["forward_flops"]


def test_the_forward_s_attention_calls():
    calls = count(None)["attention_calls"]
    assert calls == [{"operator": "aten._scaled_dot_product_flash_attention_for_cpu", "batch": 1, "heads": 4,
                      "query_length": 8, "key_length": 8, "head_dim": 8, "causal": True}]
    report = count(None)
    by_operator = {**report["phases"]["forward"]["by_operator"], **report["phases"]["backward"]["by_operator"]}
    attention = {name: flops for name, flops in by_operator.items() if "scaled_dot_product" in name}
    assert report["attention_flops"] == sum(attention.values()) > 0

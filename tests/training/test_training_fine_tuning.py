"""A training step with frozen parameters: a frozen layer, and ``peft``'s LoRA adapters.

Counted by hand from what autograd computes, on a batch of ``B = 2`` (FlopCounterMode's convention:
an (m x k) @ (k x n) product is ``2 m k n`` FLOPs; the bias of ``addmm`` is not counted):

* the backward of a frozen layer computes only its input gradient (no weight gradient), and a
  layer whose input needs no gradient (data) only its weight gradient;
* gradients and optimizer state exist for the trainable parameters only: 4 bytes per float32
  element each, AdamW two moments (``exp_avg``, ``exp_avg_sq``) per parameter plus its ``step``, a
  float32 scalar tensor (4 bytes) per parameter tensor.
"""

from __future__ import annotations

import pytest
from torch import nn

from torchscan_lsp.engine.training import analyse_training_step

B = 2
ADAMW = {"optimizer": "adamw", "batch": B}


def frozen_head():
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    model[2].requires_grad_(False)
    return model


def _value(metric):
    assert metric["status"] == "complete", metric
    return metric["value"]


def _matmul_flops(report, phase):
    """The FLOPs of the phase's matrix products (``addmm`` with a bias, ``mm`` without)."""
    by_operator = report["flops"]["phases"][phase]["by_operator"]
    return by_operator.get("aten.addmm", 0) + by_operator.get("aten.mm", 0)


@pytest.mark.parametrize("method", ["estimated", "measured"])
def test_a_frozen_layer_gets_no_weight_gradient(method):
    # this crashed both methods: "cannot register a hook on a tensor that doesn't require gradient"
    report = analyse_training_step(frozen_head, train=ADAMW, input_shape=(8,),
                                   estimate=method == "estimated", measure=method == "measured")
    # forward: (2 x 8) @ (8 x 16) and (2 x 16) @ (16 x 4)
    assert _matmul_flops(report, "forward") == 2 * B * 8 * 16 + 2 * B * 16 * 4 == 768
    # backward: layer 2 is frozen, its input (the ReLU's output) needs a gradient: the input gradient
    # (2 x 4) @ (4 x 16) only; layer 0 trains on data: the weight gradient (16 x 2) @ (2 x 8) only.
    # A 2x-the-forward rule would say 2 * 768 - 512 = 1,024.
    assert _matmul_flops(report, "backward") == 2 * B * 4 * 16 + 2 * 16 * B * 8 == 768
    assert _value(report["flops"]["by_module"]["2"]["backward_flops"]) == 2 * B * 4 * 16
    # the rest of the count, element-wise: the ReLU (32 outputs) forward, the loss's sum of the
    # (2, 4) output (7 additions); backward the ReLU's mask (2 per element) and layer 0's bias
    # gradient, a sum over the batch (16 x (2 - 1)); the frozen bias gets none
    assert _value(report["flops"]["totals"]["forward_flops"]) == 768 + B * 16 + (B * 4 - 1)
    assert _value(report["flops"]["totals"]["backward_flops"]) == 768 + 2 * B * 16 + 16 * (B - 1)
    memory = report["memory"][method]
    trainable = 8 * 16 + 16  # layer 0's weight and bias: 144 elements
    assert memory["by_category"]["gradients"] == trainable * 4 == 576
    assert memory["by_category"]["optimizer_state"] == 2 * trainable * 4 + 2 * 4 == 1_160
    assert memory["by_category"]["parameters"] == (trainable + 16 * 4 + 4) * 4
    parameters = report["parameters"]
    assert (_value(parameters["trainable_parameters"]), _value(parameters["parameters"])) == (144, 144 + 68)


RANK, ALPHA = 2, 4


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def lora_mlp():
    peft = pytest.importorskip("peft")
    config = peft.LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=["fc1", "fc2"], lora_dropout=0.0)
    return peft.get_peft_model(MLP(), config)


def _lora(in_features, out_features):
    """One adapted Linear: the frozen base W (out x in, and its bias), A (r x in), B (out x r), on
    (B x in) inputs: the forward adds ((x @ A^T) @ B^T) * (alpha / r) to x @ W^T + b."""
    r = RANK
    return {
        "frozen": out_features * in_features + out_features,
        "trainable": r * in_features + out_features * r,
        "forward_base": 2 * B * in_features * out_features,
        "forward_adapter": 2 * B * in_features * r + 2 * B * r * out_features,
        # the adapter's weight gradients: dA = (dY B)^T x (r x in), dB = dY^T (x A^T) (out x r)
        "weight_gradients": 2 * r * B * in_features + 2 * out_features * B * r,
        # the gradient through the adapter to its input: (dY B) (B x r), then (dY B) A (B x in)
        "input_gradient_adapter": 2 * B * out_features * r + 2 * B * r * in_features,
        # and through the frozen base: dY W (B x in)
        "input_gradient_base": 2 * B * out_features * in_features,
        "elements_out": B * out_features,
    }


def test_lora_counts_follow_the_ranks():
    fc1, fc2 = _lora(8, 16), _lora(16, 4)
    report = analyse_training_step(lora_mlp, train=ADAMW, input_shape=(8,))
    by_operator = {phase: report["flops"]["phases"][phase]["by_operator"] for phase in ("forward", "backward")}
    # forward: the base layers are addmm (with their bias), the adapters mm (no bias)
    assert by_operator["forward"]["aten.addmm"] == fc1["forward_base"] + fc2["forward_base"] == 768
    assert by_operator["forward"]["aten.mm"] == fc1["forward_adapter"] + fc2["forward_adapter"] == 352
    # the scaling (alpha / r) and the sum with the base output: one multiply and one add per output
    assert by_operator["forward"]["aten.mul"] == by_operator["forward"]["aten.add"] == (
        fc1["elements_out"] + fc2["elements_out"])
    # backward: fc1's input is data: its adapters' weight gradients and the gradient from B back to
    # A's output only; fc2's input (the ReLU's) needs a gradient: through its base and its adapter
    backward = (fc1["weight_gradients"] + 2 * B * 16 * RANK
                + fc2["weight_gradients"] + fc2["input_gradient_adapter"] + fc2["input_gradient_base"])
    assert by_operator["backward"]["aten.mm"] == backward == 896
    trainable = fc1["trainable"] + fc2["trainable"]
    frozen = fc1["frozen"] + fc2["frozen"]
    assert (trainable, frozen) == (88, 212)
    for method in ("estimated", "measured"):
        categories = report["memory"][method]["by_category"]
        assert categories["parameters"] == (trainable + frozen) * 4
        assert categories["gradients"] == trainable * 4
        # four adapter matrices, each with two moments and a step
        assert categories["optimizer_state"] == 2 * trainable * 4 + 4 * 4 == 720
    assert (_value(report["parameters"]["trainable_parameters"]), _value(report["parameters"]["parameters"])) == (
        trainable, trainable + frozen)
    assert _value(report["parameters"]["frozen_parameters"]) == frozen


def test_the_summary_says_what_trains():
    from torchscan_lsp.session.training import training_summary

    report = analyse_training_step(lora_mlp, train=ADAMW, input_shape=(8,), measure=False)
    assert training_summary(report).trainable == "trainable 88 of 300 parameters"


def test_a_model_with_nothing_to_train_is_refused():
    frozen = nn.Linear(4, 2).requires_grad_(False)
    with pytest.raises(ValueError, match="no parameter that requires grad"):
        analyse_training_step(lambda: frozen, train=ADAMW, input_shape=(4,))


@pytest.mark.parametrize("difference, why", [
    (4096, "kernels allocate buffers the estimate cannot see"),
    (-3768, "the real step needed less than the estimate, which errs on the safe side"),
])
def test_the_note_on_two_methods_that_differ_says_which_side_is_short(difference, why):
    # measured − estimated: above zero the estimate missed buffers, below zero it kept more than the
    # real step did (71,624 B measured against 75,392 B estimated: −3,768 B, −5.3 % of the measured peak)
    from torchscan_lsp.session.training import training_summary

    report = {"options": {}, "memory": {"estimated": {}, "measured": {}, "comparison": {
        "difference_bytes": difference, "relative_difference": difference / 71_624, "agree": False}}}
    (note,) = [n for n in training_summary(report).notes if n.startswith("The two methods differ")]
    assert why in note

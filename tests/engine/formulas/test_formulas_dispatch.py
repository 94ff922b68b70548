"""The dispatchers: registry order, unsupported modules, accepted argument forms, and the promise
that formulas do no tensor work (so the operator counter never sees them)."""

import warnings

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from torchscan_lsp.engine.formulas import (
    REGISTRY,
    family_of,
    first_tensor,
    module_dmas,
    module_flops,
    module_macs,
    module_rf,
)
from torchscan_lsp.engine.formulas.activation import ELEMENTWISE_COSTS


class Unsup(nn.Module):
    def forward(self, x):
        return x * 2


def test_no_family_is_shadowed_by_an_earlier_one():
    families = list(REGISTRY)
    for i, later in enumerate(families):
        for earlier in families[:i]:
            for cls in later.types:
                assert not issubclass(cls, earlier.types), f"{cls.__name__} is caught by {earlier.name}"


def test_activation_table_order():
    rows = [row[0] for row in ELEMENTWISE_COSTS]
    for i, cls in enumerate(rows):
        assert not any(issubclass(cls, earlier) for earlier in rows[:i]), cls


@pytest.mark.parametrize(
    ("module", "family"),
    [
        (nn.ConvTranspose2d(2, 2, 2), "conv_transpose"),
        (nn.LazyConvTranspose1d(2, 2), "conv_transpose"),
        (nn.Conv2d(2, 2, 2), "conv"),
        (nn.MultiheadAttention(4, 2).out_proj, "linear"),
        (nn.SyncBatchNorm(2), "batch_norm"),
        (nn.UpsamplingNearest2d(scale_factor=2), "upsample"),
        (nn.ZeroPad2d(1), "padding"),
    ],
)
def test_subclasses_reach_their_family(module, family):
    assert family_of(module).name == family


def test_unsupported_module_warns_and_returns_zero():
    module, x = Unsup(), torch.zeros(1, 3)
    for fn, args, expected in [
        (module_flops, ((x,), x), 0),
        (module_macs, (x, x), 0),
        (module_dmas, (x, x), 0),
        (module_rf, (x, x), (1.0, 1.0, 0.0)),
    ]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert fn(module, *args) == expected
        # a class outside torch is named by its module too, never read as a torch.nn namesake
        assert [str(w.message) for w in caught] == [f"Module type not supported: {Unsup.__module__}.Unsup"]
        assert caught[0].category is UserWarning


# Every family named in docs/formulas.md (and the reference families) has formulas that run without a
# "not supported" warning.
A5_CALLS = [
    (nn.GELU(), (2, 3)),
    (nn.SiLU(), (2, 3)),
    (nn.Mish(), (2, 3)),
    (nn.Hardswish(), (2, 3)),
    (nn.Hardsigmoid(), (2, 3)),
    (nn.Hardtanh(), (2, 3)),
    (nn.Softplus(), (2, 3)),
    (nn.PReLU(), (2, 3)),
    (nn.Softmax(dim=-1), (2, 3)),
    (nn.LogSoftmax(dim=-1), (2, 3)),
    (nn.GroupNorm(1, 3), (2, 3, 2)),
    (nn.InstanceNorm1d(3), (2, 3, 4)),
    (nn.InstanceNorm2d(3), (2, 3, 4, 4)),
    (nn.InstanceNorm3d(3), (2, 3, 2, 2, 2)),
    (nn.LocalResponseNorm(2), (2, 3, 4)),
    (nn.LayerNorm(3), (2, 3)),
    (nn.Upsample(scale_factor=2), (1, 2, 3)),
    (nn.PixelShuffle(2), (1, 4, 2, 2)),
    (nn.PixelUnshuffle(2), (1, 1, 4, 4)),
    (nn.Dropout1d(), (1, 2, 3)),
    (nn.Dropout2d(), (1, 2, 3, 3)),
    (nn.Dropout3d(), (1, 2, 3, 3, 3)),
    (nn.AlphaDropout(), (2, 3)),
    (nn.ConvTranspose1d(2, 2, 3), (1, 2, 5)),
    (nn.ConvTranspose3d(2, 2, 3), (1, 2, 3, 3, 3)),
    (nn.ReLU(), (2, 3)),
    (nn.ELU(), (2, 3)),
    (nn.LeakyReLU(), (2, 3)),
    (nn.ReLU6(), (2, 3)),
    (nn.Tanh(), (2, 3)),
    (nn.Sigmoid(), (2, 3)),
    (nn.BatchNorm1d(3), (2, 3)),
    (nn.MaxPool1d(2), (1, 2, 4)),
    (nn.AvgPool1d(2), (1, 2, 4)),
    (nn.AdaptiveMaxPool1d(2), (1, 2, 4)),
    (nn.AdaptiveAvgPool1d(2), (1, 2, 4)),
    (nn.Identity(), (2, 3)),
    (nn.Flatten(), (2, 3)),
]
if hasattr(nn, "RMSNorm"):
    A5_CALLS.append((nn.RMSNorm(3), (2, 3)))


@pytest.mark.parametrize(
    ("module", "shape"), A5_CALLS, ids=lambda v: type(v).__name__ if isinstance(v, nn.Module) else ""
)
def test_covered_family_runs_without_unsupported_warning(module, shape, measure):
    got = measure(module, torch.randn(*shape))
    assert not got.warnings
    assert all(isinstance(v, int) for v in (got.flops, got.macs, got.dmas))
    assert all(isinstance(v, (int, float)) for v in got.rf)
    assert got.rf[0] >= 1


def test_arguments_in_either_form():
    layer = nn.Linear(4, 3)
    x, y = torch.zeros(5, 4), torch.zeros(5, 3)
    # inputs as a lone tensor or a list; out as a tuple; x/y as 1-tuples
    assert module_flops(layer, x, y) == module_flops(layer, [x], (y, None)) == 120
    assert module_macs(layer, (x,), (y,)) == module_macs(layer, x, y) == 60
    assert module_dmas(layer, [x], [y]) == module_dmas(layer, x, y, inputs=(x,)) == 20 + 15 + 15
    # a pooling module with return_indices gives a (values, indices) output
    pool = nn.MaxPool2d(2, return_indices=True)
    values, indices = pool(torch.zeros(1, 1, 4, 4))
    assert module_flops(pool, (torch.zeros(1, 1, 4, 4),), (values, indices)) == 4 * 3


class _Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def _calls():
    """(module, ordered inputs, whole output) for a spread of families, computed outside the mode."""
    torch.manual_seed(0)
    calls = []
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = torch.randn(1, 4, 8)
    calls.append((mha, (x, x, x, None, True, None, True, False), mha(x, x, x)))
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    calls.append((layer, (x, None, None, False), layer(x)))
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True).eval()
    seq = torch.randn(5, 2, 3)
    calls.append((lstm, (seq, None), lstm(seq)))
    for module, shape in [
        (nn.Conv2d(3, 4, 3), (1, 3, 6, 6)),
        (nn.ConvTranspose2d(3, 4, 3, stride=2), (1, 3, 4, 4)),
        (nn.BatchNorm2d(3), (2, 3, 4, 4)),
        (nn.LayerNorm(8), (2, 8)),
        (nn.AdaptiveAvgPool2d(3), (1, 2, 7, 7)),
        (nn.Upsample(scale_factor=2, mode="bilinear"), (1, 2, 3, 3)),
        (nn.GELU(), (2, 8)),
        (nn.Softmax(dim=-1), (2, 8)),
    ]:
        module.eval()
        inp = torch.randn(*shape)
        calls.append((module, (inp,), module(inp)))
    emb = nn.Embedding(10, 4)
    ids = torch.tensor([[1, 2, 3]])
    calls.append((emb, (ids,), emb(ids)))
    return calls


def test_formulas_dispatch_no_tensor_operator():
    calls = _calls()
    recorder = _Recorder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with recorder:
            for module, inputs, out in calls:
                x, y = first_tensor(inputs), first_tensor(out)
                module_flops(module, inputs, out)
                module_macs(module, x, y, inputs=inputs)
                module_dmas(module, x, y, inputs=inputs)
                module_rf(module, x, y)
    assert recorder.ops == []
    # the recorder does see tensor work (the check above is not vacuous)
    control = _Recorder()
    with control:
        calls[-1][2].sum()
    assert control.ops == ["aten.sum.default"]


def test_meta_tensors_give_the_same_counts():
    conv = nn.Conv2d(3, 8, 3)
    x, y = torch.empty(1, 3, 32, 32, device="meta"), torch.empty(1, 8, 30, 30, device="meta")
    assert module_flops(conv.to("meta"), (x,), y) == 388800
    assert module_macs(conv, x, y) == 194400
    assert module_dmas(conv, x, y) == 201824


@pytest.mark.parametrize(
    ("module", "shape"),
    [
        (nn.Conv2d(3, 4, 3, groups=1), (1, 3, 6, 6)),
        (nn.ConvTranspose2d(4, 2, 2, stride=2), (1, 4, 3, 3)),
        (nn.LayerNorm(6), (2, 6)),
        (nn.GroupNorm(2, 4), (1, 4, 3, 3)),
        (nn.GELU(), (2, 6)),
        (nn.Upsample(scale_factor=2, mode="bilinear"), (1, 2, 3, 3)),
        (nn.AvgPool2d(2), (1, 2, 4, 4)),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, nn.Module) else "",
)
def test_bf16_and_fp16_give_the_float32_counts(module, shape, measure):
    reference = measure(module, torch.randn(*shape))
    for dtype in (torch.bfloat16, torch.float16):
        low = measure(module.to(dtype), torch.randn(*shape, dtype=dtype))
        assert (low.flops, low.macs, low.dmas, low.rf) == (
            reference.flops,
            reference.macs,
            reference.dmas,
            reference.rf,
        )
    module.float()


def test_reference_helper_names_are_exported():
    import torchscan_lsp.engine.formulas as formulas

    names = [
        "flops_linear", "flops_convnd", "flops_convtransposend", "flops_bn", "flops_maxpool", "flops_avgpool",
        "flops_adaptive_maxpool", "flops_adaptive_avgpool", "flops_dropout", "flops_relu", "flops_elu",
        "flops_leakyrelu", "flops_relu6", "flops_tanh", "flops_sigmoid", "flops_mha", "flops_layernorm",
        "flops_transformer", "flops_transformer_encoderlayer", "flops_transformer_decoderlayer",
        "flops_transformer_feedforward", "macs_linear", "macs_convnd", "dmas_linear", "dmas_convnd",
        "num_params", "rf_aggregnd", "rf_convtransposend", "rf_adaptive_poolnd",
    ]  # fmt: skip
    assert [n for n in names if not callable(getattr(formulas, n, None))] == []
    assert set(names) <= set(formulas.__all__)
    assert formulas.rf_aggregnd(nn.Conv2d(3, 3, 3, dilation=2, stride=2, padding=1)) == (5, 2, 1)
    assert formulas.rf_aggregnd(nn.AvgPool2d(2)) == (2, 2, 0)

"""Convolution and transposed-convolution formulas; expected values derived by hand."""

import pytest
import torch
from torch import nn

from torchscan_lsp.engine.formulas import module_macs, module_rf


def test_contract_conv2d(measure):
    # docs/report-schema.md: Conv2d(3, 8, 3) on (1, 3, 32, 32) → y (1, 8, 30, 30), Ny = 7200, K = 9
    # FLOPs = Ny·(2·9·3 − 1 + 1) = 7200·54 = 388800; MACs = 7200·3·9 = 194400
    # DMAs = 3·9·7200 + 224 + 7200 = 201824
    got = measure(nn.Conv2d(3, 8, 3), torch.randn(1, 3, 32, 32))
    assert (got.flops, got.macs, got.dmas, got.rf) == (388800, 194400, 201824, (3, 1, 0))
    assert got.warnings == []


def test_contract_partial_model_conv(measure):
    # docs/report-schema.md: Conv2d(3, 4, 3, padding=1) on (1, 3, 8, 8): Ny = 256
    # FLOPs 256·54 = 13824; MACs 256·27 = 6912; DMAs 6912 + 112 + 256 = 7280; RF (3, 1, 1)
    got = measure(nn.Conv2d(3, 4, 3, padding=1), torch.randn(1, 3, 8, 8))
    assert (got.flops, got.macs, got.dmas, got.rf) == (13824, 6912, 7280, (3, 1, 1))


def test_grouped_conv(measure, meta_operator_flops):
    # Conv2d(4, 8, 3, groups=2, bias=False) on (1, 4, 6, 6) → (1, 8, 4, 4), Ny = 128, Cg = 2
    # FLOPs 128·(2·9·2 − 1) = 4480; MACs 128·2·9 = 2304; P = 8·2·9 = 144
    # DMAs (4·9·128)//2 + 144 + 128 = 2576
    conv, x = nn.Conv2d(4, 8, 3, groups=2, bias=False), torch.randn(1, 4, 6, 6)
    got = measure(conv, x)
    assert (got.flops, got.macs, got.dmas) == (4480, 2304, 2576)
    assert meta_operator_flops(conv, x) == 2 * got.macs


def test_depthwise_conv(measure, meta_operator_flops):
    # Conv2d(4, 4, 3, groups=4, padding=1) on (2, 4, 5, 5) → Ny = 200, Cg = 1
    # FLOPs 200·(18 − 1 + 1) = 3600; MACs 200·9 = 1800; DMAs 1800 + (36 + 4) + 200 = 2040
    conv, x = nn.Conv2d(4, 4, 3, groups=4, padding=1), torch.randn(2, 4, 5, 5)
    got = measure(conv, x)
    assert (got.flops, got.macs, got.dmas, got.rf) == (3600, 1800, 2040, (3, 1, 1))
    assert meta_operator_flops(conv, x) == 2 * got.macs


def test_dilated_strided_conv(measure, meta_operator_flops):
    # Conv2d(3, 3, 3, dilation=2, stride=2, padding=1) on (1, 3, 9, 9):
    # out = (9 + 2 − 2·2 − 1)//2 + 1 = 4 → Ny = 48; MACs 48·3·9 = 1296; FLOPs 48·54 = 2592
    # RF (docs/formulas.md verified example): k_eff = 2·2 + 1 = 5 → (5, 2, 1)
    conv, x = nn.Conv2d(3, 3, 3, dilation=2, stride=2, padding=1), torch.randn(1, 3, 9, 9)
    got = measure(conv, x)
    assert (got.flops, got.macs, got.rf) == (2592, 1296, (5, 2, 1))
    assert meta_operator_flops(conv, x) == 2 * got.macs


def test_conv3d_and_conv1d_match_flop_counter(meta_operator_flops):
    # Conv3d(2, 4, (1, 3, 3)) on (1, 2, 3, 5, 5) → (1, 4, 3, 3, 3): MACs 108·2·9 = 1944
    conv, x = nn.Conv3d(2, 4, (1, 3, 3)), torch.randn(1, 2, 3, 5, 5)
    assert module_macs(conv, x, torch.zeros(1, 4, 3, 3, 3)) == 1944
    assert meta_operator_flops(conv, x) == 2 * 1944
    # Conv1d(2, 3, 4, stride=2) on (2, 2, 10) → (2, 3, 4): MACs 24·2·4 = 192
    conv, x = nn.Conv1d(2, 3, 4, stride=2), torch.randn(2, 2, 10)
    assert module_macs(conv, x, torch.zeros(2, 3, 4)) == 192
    assert meta_operator_flops(conv, x) == 384


@pytest.mark.parametrize(
    ("conv", "expected"),
    [
        # "same": PyTorch pads d·(k − 1) in total, the smaller half first
        (nn.Conv1d(2, 2, 4, padding="same"), (4, 1, 1)),  # total 3 → 1 before
        (nn.Conv2d(1, 1, 3, padding="same", dilation=2), (5, 1, 2)),  # total 4 → 2 before
        (nn.Conv2d(1, 1, 3, padding="valid"), (3, 1, 0)),
    ],
)
@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_string_padding_gives_numbers(conv, expected, measure):
    x = torch.randn(1, conv.in_channels, *([9] * (conv.weight.ndim - 2)))
    got = measure(conv, x)
    assert got.rf == expected
    assert all(isinstance(v, int) for v in got.rf)


def test_same_padding_counts(measure):
    # Conv2d(2, 3, 3, padding="same") on (1, 2, 5, 5) → (1, 3, 5, 5), Ny = 75
    # FLOPs 75·(2·9·2 − 1 + 1) = 2700; MACs 75·18 = 1350
    got = measure(nn.Conv2d(2, 3, 3, padding="same"), torch.randn(1, 2, 5, 5))
    assert (got.flops, got.macs) == (2700, 1350)


def test_conv_transpose_case_p07(measure, meta_operator_flops):
    # case P07: ConvTranspose2d(8, 2, k=2, s=2, no bias) on (1, 8, 3, 3) → (1, 2, 6, 6)
    # MACs = Cin·Cout·k·k·Hin·Win = 8·2·4·9 = 576 (the output-size formula would give 2304)
    # FLOPs = 2·576 = 1152; DMAs = 576 + P (8·2·4 = 64) + Ny (72) = 712
    conv, x = nn.ConvTranspose2d(8, 2, 2, stride=2, bias=False), torch.randn(1, 8, 3, 3)
    got = measure(conv, x)
    assert (got.flops, got.macs, got.dmas) == (1152, 576, 712)
    assert meta_operator_flops(conv, x) == 2 * got.macs
    # each output depends on exactly one input (k = s): rf 1, stride 1/2, padding (1 − 0)/2
    assert got.rf == (1, 0.5, 0.5)


def test_conv_transpose_groups_output_padding(measure, meta_operator_flops):
    # ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2) on (1, 4, 5, 5):
    # out = (5 − 1)·2 − 2 + 2 + 1 + 1 = 10 → (1, 6, 10, 10), Ny = 600
    # MACs = Nx·(Cout/groups)·K = 100·3·9 = 2700; FLOPs = 2·2700 + 600 (bias) = 6000
    # P = 4·3·9 + 6 = 114; DMAs = 2700 + 114 + 600 = 3414
    conv = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
    x = torch.randn(1, 4, 5, 5)
    got = measure(conv, x)
    assert (got.flops, got.macs, got.dmas) == (6000, 2700, 3414)
    # FlopCounterMode excludes the bias: 2·MACs
    assert meta_operator_flops(conv, x) == 5400
    # k = 3, s = 2: at most ceil(3/2) = 2 taps per output, adjacent inputs → rf 2;
    # padding (1·2 − 1)/2 = 0.5
    assert got.rf == (2, 0.5, 0.5)


def test_conv_transpose_1d_and_3d_match_flop_counter(meta_operator_flops):
    # ConvTranspose1d(3, 5, 4, stride=3) on (2, 3, 6): MACs = 36·5·4 = 720
    conv, x = nn.ConvTranspose1d(3, 5, 4, stride=3), torch.randn(2, 3, 6)
    y = conv(x)
    assert module_macs(conv, x, y) == 720
    assert meta_operator_flops(conv, x) == 1440
    # ConvTranspose3d(2, 2, 2, stride=2) on (1, 2, 2, 2, 2): MACs = 16·2·8 = 256
    conv, x = nn.ConvTranspose3d(2, 2, 2, stride=2), torch.randn(1, 2, 2, 2, 2)
    assert module_macs(conv, x, conv(x)) == 256
    assert meta_operator_flops(conv, x) == 512


def _brute_force_transpose_rf(k, s, d, p, n_in=20):
    """Widest first-to-last span of inputs feeding one output, from o = i·s − p + j·d."""
    n_out = (n_in - 1) * s - 2 * p + d * (k - 1) + 1
    span = 0
    for o in range(n_out):
        deps = [i for i in range(n_in) for j in range(k) if i * s - p + j * d == o]
        if deps:
            span = max(span, max(deps) - min(deps) + 1)
    return span


@pytest.mark.parametrize(
    ("k", "s", "d", "p"),
    [(3, 1, 1, 0), (3, 2, 1, 0), (2, 2, 1, 0), (4, 2, 1, 1), (3, 2, 2, 0), (5, 3, 1, 2), (3, 3, 2, 1), (1, 2, 1, 0)],
)
def test_conv_transpose_rf_is_the_exact_dependency_span(k, s, d, p):
    conv = nn.ConvTranspose1d(1, 1, k, stride=s, dilation=d, padding=p)
    rf, stride, padding = module_rf(conv, None, None)
    assert rf == _brute_force_transpose_rf(k, s, d, p)
    assert rf >= 1
    assert stride == 1 / s
    assert padding == (d * (k - 1) - p) / s


def test_conv_transpose_stride_one_is_a_full_convolution():
    # ConvTranspose2d(3, 8, 3): a stride-1 transposed conv is a conv padded by k − 1 = 2
    assert module_rf(nn.ConvTranspose2d(3, 8, 3), None, None) == (3, 1.0, 2.0)


def test_bf16_conv(measure):
    # same counts as float32: Conv2d(3, 8, 3) on (1, 3, 32, 32)
    conv = nn.Conv2d(3, 8, 3).to(torch.bfloat16)
    got = measure(conv, torch.randn(1, 3, 32, 32, dtype=torch.bfloat16))
    assert (got.flops, got.macs, got.dmas) == (388800, 194400, 201824)

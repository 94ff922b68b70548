"""Complex tensors are counted in real arithmetic, by both methods, one convention everywhere
(docs/formulas.md and docs/operator-formulas.md, "Complex tensors"):

a complex addition is 2 real FLOPs (a real plus a complex number 1), a complex multiplication 6
(4 multiplies, 2 additions; a real times a complex number 2), a complex multiply-accumulate 4 real
MACs. The independent reference for the products is ``FlopCounterMode`` on the real
decomposition (``(A + iB)(C + iD) = (AC − BD) + i(AD + BC)``: four real products).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from torchscan_lsp import crawl_module, measure_flops

CF = torch.complex64


def _totals(report):
    return {name: (metric["status"], metric.get("value"), metric.get("known_value"))
            for name, metric in report["totals"].items() if name in ("module_flops", "macs", "operator_flops",
                                                                     "operator_macs")}


def _decomposed_flops(x, weight):
    """FlopCounterMode's count of ``x @ weight.T`` written as four real products."""
    a, b = x.real, x.imag
    c, d = weight.real.T, weight.imag.T
    with FlopCounterMode(display=False) as counter:
        _ = (a @ c - b @ d, a @ d + b @ c)
    return counter.get_total_flops()


def test_a_complex_linear_is_four_real_products():
    torch.manual_seed(0)
    linear = nn.Linear(4, 3, bias=False, dtype=CF)
    x = torch.randn(2, 4, dtype=CF)
    # 2 x 4 x 3 = 24 complex multiply-accumulates = 96 real MACs = 192 real FLOPs
    assert _decomposed_flops(x, linear.weight.detach()) == 4 * (2 * 2 * 4 * 3) == 192
    report = crawl_module(linear, args=(x,))
    # the module formula's convention (n − 1 additions per dot product): each of the 6 outputs is
    # 4 complex multiplies (6 FLOPs each) and 3 complex additions (2 each): 30, so 180
    assert _totals(report) == {
        "module_flops": ("complete", 6 * (4 * 6 + 3 * 2), 180),
        "macs": ("complete", 96, 96),
        "operator_flops": ("complete", 192, 192),
        "operator_macs": ("complete", 96, 96),
    }


def test_a_complex_matrix_product_under_measure_flops():
    x, w = torch.randn(3, 5, dtype=CF), torch.randn(5, 2, dtype=CF)
    expected = 4 * 2 * 3 * 5 * 2  # 3 x 5 x 2 complex MACs: four real products of 2 FLOPs per MAC
    assert _decomposed_flops(x, w.T) == expected
    report = measure_flops(lambda: x @ w)
    assert report["by_operator"] == {"aten.mm": expected}
    assert report["total"]["status"] == "complete"


@pytest.mark.parametrize("workload, operator, per_element", [
    (lambda z, r: z + z, "aten.add", 2),          # both components added
    (lambda z, r: z + r, "aten.add", 1),          # a real added to the real part only
    (lambda z, r: z - z, "aten.sub", 2),
    (lambda z, r: z * z, "aten.mul", 6),          # 4 multiplies, 2 additions
    (lambda z, r: z * r, "aten.mul", 2),          # each component times a real
    (lambda z, r: z * 2.0, "aten.mul", 2),
    (lambda z, r: z * 1j, "aten.mul", 6),         # a complex scalar is a complex multiplication
    (lambda z, r: z / z, "aten.div", 11),         # ((ac + bd) + (bc − ad)i) / (c² + d²)
    (lambda z, r: z / r, "aten.div", 2),
    (lambda z, r: z.abs(), "aten.abs", 4),        # sqrt(re² + im²)
    (lambda z, r: -z, "aten.neg", 2),
    (lambda z, r: z.angle(), "aten.angle", 1),    # one atan2
])
def test_element_wise_operations(workload, operator, per_element):
    z, r = torch.randn(2, 6, dtype=CF), torch.randn(2, 6)
    report = measure_flops(lambda: workload(z, r))
    assert report["by_operator"] == {operator: per_element * 12}
    assert report["total"]["status"] == "complete"


def test_a_sum_adds_both_components():
    z = torch.randn(3, 8, dtype=CF)
    # each of the 3 rows: 7 complex additions, 2 real FLOPs each
    assert measure_flops(lambda: z.sum(-1))["by_operator"] == {"aten.sum": 3 * 7 * 2}


def test_an_operator_without_a_complex_formula_is_a_lower_bound():
    z = torch.randn(4, dtype=CF)
    report = measure_flops(lambda: torch.exp(z) * z)
    assert report["total"] == {**report["total"], "status": "partial", "known_value": 6 * 4}
    (diagnostic,) = report["diagnostics"]
    assert diagnostic["operator"] == "aten.exp"
    assert diagnostic["message"] == ("aten.exp was observed 1 time(s); its FLOP formula could not be applied to 1 of "
                                     "them: complex operands: no formula counts aten.exp in real arithmetic.")


def test_a_module_without_a_complex_formula_is_a_lower_bound():
    x = torch.randn(2, 4, dtype=CF)
    report = crawl_module(nn.Sequential(nn.Linear(4, 4, bias=False, dtype=CF), nn.Tanh()), args=(x,))
    tanh = next(layer for layer in report["layers"] if layer["type"] == "Tanh")
    assert tanh["metrics"]["module_flops"]["status"] == "partial"
    assert report["totals"]["module_flops"]["status"] == "partial"
    assert report["totals"]["macs"] == {**report["totals"]["macs"], "status": "complete", "value": 4 * 2 * 4 * 4}
    assert any(d["code"] == "module_metric_warning" and "Complex tensors: no formula counts Tanh" in d["message"]
               for d in report["diagnostics"])


@pytest.mark.parametrize("bias", [True, False])
def test_a_complex_convolution_is_pytorchs_three_real_ones(bias):
    # PyTorch's complex_convolution (Gauss's trick): a = conv(xr, Wr, br), b = conv(xi, Wi),
    # c = conv(xr + xi, Wr + Wi, br + bi), y = a - b + i (c - a - b)
    conv = nn.Conv1d(2, 3, 3, bias=bias, dtype=CF)
    x = torch.randn(1, 2, 5, dtype=CF)
    with FlopCounterMode(display=False) as counter:  # it sees the three real convolutions
        conv(x)
    ny, real_macs = 3 * 3, 3 * 3 * 2 * 3  # (1, 3, 3) outputs, each 2 channels x 3 taps
    assert counter.get_total_flops() == 3 * 2 * real_macs
    sums = 10 + 18 + (3 if bias else 0)  # xr + xi, Wr + Wi, br + bi
    report = crawl_module(conv, args=(x,))
    assert report["operator_flops"]["by_operator"] == {
        "aten.convolution": 3 * 2 * real_macs,
        "aten.add": sums + ny,   # the sums, then a - b added to the imaginary part (a real + a complex: 1)
        "aten.sub": 3 * ny,      # a - b, c - a, (c - a) - b
        "aten.mul": 2 * ny,      # i times a real tensor: two multiplies per element
    }
    # module formula: the three convolutions by its convention (each output 2·6 − 1 FLOPs, plus
    # the bias in a and c), the same sums and the same 6 per output of the combination
    three = 3 * ny * (2 * 6 - 1) + (2 * ny if bias else 0)
    assert report["totals"]["module_flops"]["value"] == three + sums + 6 * ny
    assert report["totals"]["macs"]["value"] == report["totals"]["operator_macs"]["value"] == 3 * real_macs


def test_a_complex_transposed_convolution():
    conv = nn.ConvTranspose1d(2, 3, 3, stride=2, dtype=CF)
    x = torch.randn(1, 2, 5, dtype=CF)
    report = crawl_module(conv, args=(x,))
    # each of the 10 input elements scattered over 3 output channels x 3 taps: 90 real MACs per
    # real convolution, three of them; output (1, 3, 11): 33 elements
    ny, real_macs = 33, 10 * 3 * 3
    assert report["totals"]["macs"]["value"] == report["totals"]["operator_macs"]["value"] == 3 * real_macs
    # module formula per real convolution 2·MACs (+ Ny for the bias, in a and c)
    sums = 10 + 18 + 3
    assert report["totals"]["module_flops"]["value"] == 3 * 2 * real_macs + 2 * ny + sums + 6 * ny
    assert report["totals"]["module_flops"]["status"] == report["totals"]["operator_flops"]["status"] == "complete"

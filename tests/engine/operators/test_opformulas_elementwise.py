"""Element-wise arithmetic: values derived by hand for small shapes."""

from __future__ import annotations

import torch
from opformula_models import op_flops

A = torch.randn(2, 3)
B = torch.randn(3)  # broadcasts against A: the output has 6 elements


def test_binary_arithmetic_counts_output_elements():
    # each: 1 FLOP per output element, output (2, 3) = 6 elements
    assert op_flops(lambda: A + B) == {"aten.add": 6}
    assert op_flops(lambda: A - B) == {"aten.sub": 6}
    assert op_flops(lambda: A * B) == {"aten.mul": 6}
    assert op_flops(lambda: A / B) == {"aten.div": 6}
    assert op_flops(lambda: torch.maximum(A, B)) == {"aten.maximum": 6}
    assert op_flops(lambda: torch.minimum(A, B)) == {"aten.minimum": 6}
    assert op_flops(lambda: torch.max(A, B.expand(2, 3))) == {"aten.maximum": 6}


def test_scalar_operand_and_alpha():
    assert op_flops(lambda: A + 1) == {"aten.add": 6}
    # a + alpha * b: multiply and add = 2 per element -> 12
    assert op_flops(lambda: torch.add(A, B, alpha=2)) == {"aten.add": 12}
    assert op_flops(lambda: torch.sub(A, B, alpha=0.5)) == {"aten.sub": 12}
    # rsub: 1 - A = 6
    assert op_flops(lambda: 1 - A) == {"aten.rsub": 6}
    # division with rounding: divide + floor = 2 per element
    assert op_flops(lambda: torch.div(A, B, rounding_mode="floor")) == {"aten.div": 12}


def test_inplace_variants_are_separate_packets():
    x = torch.randn(4, 5)
    assert op_flops(lambda: x.add_(1)) == {"aten.add_": 20}
    assert op_flops(lambda: x.mul_(2)) == {"aten.mul_": 20}
    assert op_flops(lambda: x.clamp_(0, 1)) == {"aten.clamp_": 40}
    assert op_flops(lambda: x.sigmoid_()) == {"aten.sigmoid_": 80}  # 4 per element


def test_out_variants_count_like_the_operator():
    out = torch.empty(2, 3)
    assert op_flops(lambda: torch.add(A, B, out=out)) == {"aten.add": 6}
    assert op_flops(lambda: torch.exp(A, out=out)) == {"aten.exp": 6}


def test_unary_math_functions():
    x = torch.rand(10) + 0.5
    for fn, name in [(torch.neg, "neg"), (torch.sqrt, "sqrt"), (torch.exp, "exp"), (torch.log, "log"),
                     (torch.abs, "abs"), (torch.sin, "sin"), (torch.erf, "erf"), (torch.floor, "floor"),
                     (torch.reciprocal, "reciprocal")]:
        assert op_flops(lambda fn=fn: fn(x)) == {f"aten.{name}": 10}, name
    # rsqrt = 1 / sqrt(x): 2 per element
    assert op_flops(lambda: torch.rsqrt(x)) == {"aten.rsqrt": 20}
    # x ** 3: one pow per element
    assert op_flops(lambda: x**3) == {"aten.pow": 10}


def test_clamp_counts_its_bounds():
    x = torch.randn(8)
    assert op_flops(lambda: x.clamp(-1, 1)) == {"aten.clamp": 16}  # min and max: 2 per element
    assert op_flops(lambda: x.clamp(min=0)) == {"aten.clamp": 8}  # one bound: 1 per element
    assert op_flops(lambda: torch.clamp(x, max=torch.zeros(8))) == {"aten.clamp": 8}  # tensor bound
    assert op_flops(lambda: torch.clamp_max(x, 0.5)) == {"aten.clamp_max": 8}


def test_where_masked_fill_and_comparisons():
    x = torch.randn(3, 4)
    cond = x > 0
    assert op_flops(lambda: x > 0) == {"aten.gt": 12}
    assert op_flops(lambda: torch.where(cond, x, 0.0)) == {"aten.where": 12}
    assert op_flops(lambda: x.masked_fill(cond, 0.0)) == {"aten.masked_fill": 12}
    assert op_flops(lambda: cond & cond) == {"aten.bitwise_and": 12}
    # where(condition) alone is nonzero (index generation, on the ignore list): no FLOPs
    assert op_flops(lambda: torch.where(cond)) == {}


def test_fused_pointwise():
    t1, t2 = torch.randn(5), torch.randn(5)
    x = torch.randn(5)
    # input + t1 * t2: 2 per element; with value=0.5: 3 per element
    assert op_flops(lambda: torch.addcmul(x, t1, t2)) == {"aten.addcmul": 10}
    assert op_flops(lambda: torch.addcmul(x, t1, t2, value=0.5)) == {"aten.addcmul": 15}
    assert op_flops(lambda: torch.addcdiv(x, t1, t2)) == {"aten.addcdiv": 10}
    # start + w * (end - start): 3 per element
    assert op_flops(lambda: torch.lerp(x, t1, 0.3)) == {"aten.lerp": 15}


def test_dropout_in_training():
    x = torch.randn(4, 8)
    counted = op_flops(lambda: torch.nn.functional.dropout(x, 0.5, training=True))
    # CPU composite: bernoulli_ (random, ignored), div_ by (1 - p) on the mask (32), mul (32)
    assert counted == {"aten.div_": 32, "aten.mul": 32}
    assert op_flops(lambda: torch.nn.functional.dropout(x, 0.5, training=False)) == {}

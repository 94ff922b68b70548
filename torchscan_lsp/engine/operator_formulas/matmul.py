"""Matrix products that PyTorch's counter has no formula for (it covers mm, addmm, bmm, baddbmm).

Convention (PyTorch's): a product of (M x K) and (K x N) is 2*M*N*K FLOPs (one multiply-add = 2);
an added bias / ``self`` term is folded into the accumulation and not counted, as in PyTorch's
``addmm`` formula.
"""

from __future__ import annotations

import math
from typing import Any

from ._base import arg, is_shape, numel, out_numel, register
from .activation import GELU_TANH, RELU


@register("mv", "addmv", family="matmul")
def mv_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """2*M*N for an (M x N) matrix times an N-vector (``addmv``'s added vector folded in, as addmm)."""
    mat = args[1] if len(args) > 2 and is_shape(args[1]) and len(args[1]) == 2 else (args[0] if args else None)
    return 2 * numel(mat) if is_shape(mat) else 0


@register("dot", "vdot", family="matmul")
def dot_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """2*N for a dot product of two N-vectors (N multiply-adds)."""
    return 2 * numel(args[0]) if args and is_shape(args[0]) else 0


@register("addbmm", family="matmul")
def addbmm_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """2*B*M*N*K: the B products (M x K)(K x N) summed into one (M x N) matrix (the sum over the
    batch is part of the accumulation)."""
    b1 = arg(args, kwargs, 1, "batch1")
    b2 = arg(args, kwargs, 2, "batch2")
    if not (is_shape(b1) and is_shape(b2)):
        return 0
    batch, m, k = b1
    return 2 * batch * m * k * b2[-1]


@register("addr", family="matmul")
def addr_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """2*M*N: the outer product (M*N multiplies) added to ``self`` (M*N additions)."""
    return 2 * out_numel(out_shape)


def trilinear_macs(*args: Any, **kwargs: Any) -> int:
    """Multiply-accumulates of ``aten._trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim)``,
    as PyTorch's kernel (``_trilinear`` in ATen's ``Linear.cpp``) computes it: each input gets
    size-1 axes at its ``expand`` positions; a summed axis where ``i1`` and ``i2`` both have extent
    and ``i3`` has none is reduced in the first product ``i1·i2``, the other summed axes in the
    second, ``(i1·i2)·i3``; a sum-product costs one MAC per element of its operands' broadcast.
    ``nn.Bilinear`` (``x1 (N, a)``, ``W (o, a, b)``, ``x2 (N, b)``): ``N·o·a·b + N·o·b``."""
    if len(args) < 7 or not all(is_shape(a) for a in args[:3]):
        return 0
    shapes = []
    for operand, expand in zip(args[:3], args[3:6]):
        full, source = [], iter(operand)
        for axis in range(len(operand) + len(expand)):
            full.append(1 if axis in expand else next(source))
        shapes.append(full)
    i1, i2, i3 = shapes
    summed = set(args[6])
    first = [max(a, b) for a, b in zip(i1, i2)]
    reduced = [1 if axis in summed and i1[axis] != 1 and i2[axis] != 1 and i3[axis] == 1 else size
               for axis, size in enumerate(first)]
    second = [max(a, b) for a, b in zip(reduced, i3)]
    return math.prod(first) + math.prod(second)


@register("_trilinear", family="matmul")
def trilinear_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """2 per multiply-accumulate of :func:`trilinear_macs` (PyTorch's convention for products)."""
    return 2 * trilinear_macs(*args, **kwargs)


@register("_addmm_activation", family="matmul")
def addmm_activation_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """2*M*N*K (as addmm) plus the fused activation on the M*N outputs: ReLU 1 or GELU (tanh
    approximation, the cuBLASLt epilogue) 13 per element."""
    mat1 = arg(args, kwargs, 1, "mat1")
    mat2 = arg(args, kwargs, 2, "mat2")
    if not (is_shape(mat1) and is_shape(mat2)):
        return 0
    m, k = mat1
    n = mat2[-1]
    per = GELU_TANH if kwargs.get("use_gelu", False) else RELU
    return 2 * m * n * k + per * m * n


@register("_int_mm", family="matmul")
def int_mm_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """2*M*N*K integer multiply-adds for an (M x K)(K x N) product."""
    a = args[0] if args else None
    b = args[1] if len(args) > 1 else None
    if not (is_shape(a) and is_shape(b)):
        return 0
    return 2 * a[0] * a[1] * b[1]


@register("linear", "mkldnn_linear", family="matmul")
def linear_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """2 * T * in * out for T = prod(input.shape[:-1]) rows (bias folded, as addmm).

    ``aten.linear`` normally decomposes into addmm/mm before reaching the counter; this formula
    covers the cases where it is dispatched whole."""
    x = args[0] if args else None
    w = args[1] if len(args) > 1 else None
    if not (is_shape(x) and is_shape(w)):
        return 0
    rows = math.prod(x[:-1])
    out_features = w[0] if len(w) == 2 else 1
    return 2 * rows * x[-1] * out_features


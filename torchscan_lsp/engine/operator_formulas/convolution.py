"""Convolution backward, replacing PyTorch's formula, whose grad-weight term ignores groups.

Convention: each requested gradient (input, weight) makes one product per product of the forward, 2
FLOPs each, as the forward; the bias gradient is excluded as PyTorch excludes the forward's bias add.
"""

from __future__ import annotations

import math
from typing import Any

from ._base import arg, is_shape, register


def conv_forward_macs(x: Any, w: Any, grad_out: Any, transposed: bool) -> int:
    """Multiply-accumulates of the forward convolution whose gradients are computed.

    ``w`` is ``(Cout, Cin/g, *k)`` for a convolution, ``(Cin, Cout/g, *k)`` for a transposed one, so
    ``w[0] * w[1]`` is always ``Cin * Cout / g``. A convolution makes one product per output
    position and weight entry: ``B * prod(out spatial) * Cin * Cout / g * prod(k)``; a transposed
    one scatters each *input* position over the kernel: ``B * prod(in spatial) * Cin * Cout / g *
    prod(k)`` (PyTorch's ``conv_flop_count`` conventions, padding products included).
    """
    batch = int(x[0])
    positions = math.prod(int(d) for d in (x if transposed else grad_out)[2:])
    return batch * positions * math.prod(int(d) for d in w)


@register("convolution_backward", family="backward", corrects_pytorch=True)
def convolution_backward_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``convolution_backward(grad_out, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask)``: 2 x forward MACs per requested gradient.

    grad_input is the transposed operation of the forward on grad_out with the same weight (for a
    transposed convolution, a plain convolution): one product per forward product, so the forward's
    MACs. grad_weight[co, ci, k] = sum over (b, position) of grad_out * input: again one product per
    forward product — ``B * positions * Cin * Cout / g * prod(k)``. Each is 2 FLOPs per MAC, as the
    forward. The bias gradient (a sum of grad_out) is excluded, as PyTorch excludes the bias add of
    the forward.

    Replaces PyTorch's ``conv_backward_flop``, whose grad-weight term counts ``Cin * Cout`` channel
    pairs whatever the groups (g times too many): ``Conv2d(4, 4, 3, groups=2)`` on (2, 4, 6, 6)
    gives 13,824 there instead of 9,216.
    """
    grad_out, x, w = (args + (None,) * 3)[:3]
    if not (is_shape(grad_out) and is_shape(x) and is_shape(w)):
        return 0
    transposed = bool(arg(args, kwargs, 7, "transposed", False))
    mask = arg(args, kwargs, 10, "output_mask", (True, True, True))
    wanted = list(mask) if isinstance(mask, (list, tuple)) and len(mask) >= 2 else [True, True]
    macs = conv_forward_macs(x, w, grad_out, transposed)
    return 2 * macs * (bool(wanted[0]) + bool(wanted[1]))

"""Convolutions: ``Conv1/2/3d`` (``_ConvNd``) and ``ConvTranspose1/2/3d`` (``_ConvTransposeNd``).

``_ConvTransposeNd`` derives from ``_ConvNd``, so its family is registered first.

Direct convolution (the reference contract's, unchanged). With ``K = prod(kernel_size)``,
``Cg = in_channels // groups``:

* FLOPs ``Ny·(2·K·Cg − 1 + [bias])``: each output element is a dot product of length ``K·Cg``
  (``K·Cg`` multiplies, ``K·Cg − 1`` adds) plus one bias add.
* MACs ``Ny·Cg·K``. PyTorch's ``FlopCounterMode`` counts ``2·MACs`` for ``aten.convolution``.
* DMAs ``(in_channels·K·Ny) // groups + P + Ny``: one input read per multiply-accumulate, every
  parameter once, one write per output element.

Transposed convolution (a departure from the reference, which prices it with the direct-convolution
formula on the *output* size and over-counts; see docs/formulas.md). Each input element is
multiplied by every kernel tap of every output channel of its group and scattered into the output:

* MACs ``Nx·(out_channels // groups)·K`` — per batch element ``Cin·Cout/groups·K·prod(input
  spatial)``, exactly what ``FlopCounterMode`` counts (``2·MACs``) for a transposed
  ``aten.convolution``. Taps that land in the cropped border (``padding``) are still computed, as
  in PyTorch's kernels; ``output_padding`` only enlarges the output and adds no products.
* FLOPs ``2·MACs + [bias]·Ny``: the output starts at zero and every scattered product costs one
  multiply and one add into its output element; the bias adds one per output element. (The direct
  convolution's reference convention instead lets the first product initialise the accumulator,
  hence its ``− 1`` per output element; a scatter has no such first product.)
* DMAs ``MACs + P + Ny``: the direct-convolution rule (one input read per product, parameters once,
  one write per output element).
"""

from __future__ import annotations

import math

from torch import nn

from ._common import input_tensor, num_params, numel, output_tensor
from ._registry import Family

__all__ = [
    "dmas_convnd",
    "dmas_convtransposend",
    "flops_convnd",
    "flops_convtransposend",
    "macs_convnd",
    "macs_convtransposend",
    "rf_convnd",
    "rf_convtransposend",
]


def _kernel_volume(module: nn.modules.conv._ConvNd) -> int:
    return math.prod(module.kernel_size)


def flops_convnd(module: nn.modules.conv._ConvNd, inputs, out) -> int:
    """``Ny·(2·K·(in_channels // groups) − 1 + [bias])``."""
    y = output_tensor(out, module)
    per_output = 2 * _kernel_volume(module) * (module.in_channels // module.groups) - 1
    return numel(y) * (per_output + (module.bias is not None))


def macs_convnd(module: nn.modules.conv._ConvNd, x, y, *, inputs=None) -> int:
    """``Ny·(in_channels // groups)·K``."""
    return numel(y) * (module.in_channels // module.groups) * _kernel_volume(module)


def dmas_convnd(module: nn.modules.conv._ConvNd, x, y, *, inputs=None) -> int:
    """``(in_channels·K·Ny) // groups + P + Ny``."""
    reads = (module.in_channels * _kernel_volume(module) * numel(y)) // module.groups
    return reads + num_params(module) + numel(y)


def _same_padding(module: nn.modules.conv._ConvNd) -> int:
    # PyTorch pads d·(k−1) in total for "same", the smaller half before the input.
    return module.dilation[0] * (module.kernel_size[0] - 1) // 2


def rf_convnd(module: nn.modules.conv._ConvNd, x=None, y=None) -> tuple[int, int, int]:
    """``(d·(k − 1) + 1, s, p)`` along the first spatial axis.

    ``padding="same"`` gives the padding PyTorch applies before the input (``d·(k − 1) // 2``; with
    an even extent the extra element goes after the input); ``padding="valid"`` gives 0.
    """
    k, s, d = module.kernel_size[0], module.stride[0], module.dilation[0]
    padding = module.padding
    if padding == "same":
        p = _same_padding(module)
    elif padding == "valid":
        p = 0
    else:
        p = padding[0]
    return d * (k - 1) + 1, s, p


def macs_convtransposend(module: nn.modules.conv._ConvTransposeNd, x, y, *, inputs=None) -> int:
    """``Nx·(out_channels // groups)·K`` — every input element scattered over the kernel."""
    return numel(x) * (module.out_channels // module.groups) * _kernel_volume(module)


def flops_convtransposend(module: nn.modules.conv._ConvTransposeNd, inputs, out) -> int:
    """``2·MACs + [bias]·Ny``."""
    x = input_tensor(inputs, module)
    y = output_tensor(out, module)
    flops = 2 * macs_convtransposend(module, x, y)
    if module.bias is not None:
        flops += numel(y)
    return flops


def dmas_convtransposend(module: nn.modules.conv._ConvTransposeNd, x, y, *, inputs=None) -> int:
    """``MACs + P + Ny``."""
    return macs_convtransposend(module, x, y) + num_params(module) + numel(y)


def rf_convtransposend(module: nn.modules.conv._ConvTransposeNd, x=None, y=None) -> tuple[int, float, float]:
    """Module-local ``(rf, stride, padding)`` of a transposed convolution, first spatial axis.

    A transposed convolution with stride ``s`` is a stride-1 convolution of kernel extent
    ``d·(k − 1) + 1`` over the input with ``s − 1`` zeros inserted between elements, padded by
    ``d·(k − 1) − p``. Measured in *input* elements:

    * ``rf``: how many input elements the widest output element depends on, first to last:
      ``(ceil(k·g / s) − 1)·d/g + 1`` with ``g = gcd(s, d)`` — an int ≥ 1 (``k_eff`` when ``s = 1``;
      ``1`` when ``k ≤ s`` and ``d = 1``, since the kernels of neighbouring inputs do not overlap).
    * ``stride``: ``1/s`` input elements per output step (a float).
    * ``padding``: ``(d·(k − 1) − p)/s`` (a float), the equivalent convolution's padding expressed in
      input elements; it locates output 0's window at input ``−padding``. Negative when ``p``
      crops more than the kernel extent. ``output_padding`` adds elements after the last output and
      changes none of the three.

    These compose like a direct convolution's values: ``rf += (rf_local − 1)·jump``,
    ``jump *= stride``, ``padding_total += padding_local·jump``.
    """
    k, s, d, p = module.kernel_size[0], module.stride[0], module.dilation[0], module.padding[0]
    g = math.gcd(s, d)
    taps = -(-k * g // s)  # ceil(k·g/s): kernel taps that can hit one output element
    rf = (taps - 1) * (d // g) + 1
    return rf, 1.0 / s, (d * (k - 1) - p) / s


FAMILIES = [
    Family(
        "conv_transpose",
        (nn.modules.conv._ConvTransposeNd,),
        flops_convtransposend,
        macs_convtransposend,
        dmas_convtransposend,
        rf_convtransposend,
    ),
    Family("conv", (nn.modules.conv._ConvNd,), flops_convnd, macs_convnd, dmas_convnd, rf_convnd),
]

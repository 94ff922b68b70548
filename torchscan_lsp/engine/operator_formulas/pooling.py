"""Pooling: max, average, adaptive, fractional and Lp pooling.

K = prod(kernel_size) with an integer kernel expanded to every spatial dimension (k^ndim, as the
module formulas do: docs/formulas.md).

* Max pooling: K - 1 comparisons per output element (TorchScan's MaxPool formula).
* Average pooling: K per output element (K - 1 additions and one division). Padding, ``ceil_mode``
  and ``count_include_pad`` do not change the count: every window is counted at its full size.
* Adaptive pooling: the exact windows PyTorch uses (start = floor(i*I/O), end = ceil((i+1)*I/O) per
  dimension), summed: average = window elements, max = window elements - 1 per output.
"""

from __future__ import annotations

import math
from typing import Any

from ._base import arg, describe, expand_ints, first_shape, is_shape, out_numel, register


def _kernel_volume(args: tuple[Any, ...], kwargs: dict[str, Any], ndim: int) -> int:
    return math.prod(expand_ints(arg(args, kwargs, 1, "kernel_size"), ndim, 1))


def _maxpool(ndim: int):
    def formula(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        return max(_kernel_volume(args, kwargs, ndim) - 1, 0) * out_numel(out_shape)

    return describe(formula, f"max_pool{ndim}d_flop", (
        f"Max pooling ({ndim}-D): K - 1 comparisons per output element, K = prod(kernel_size) "
        "(an int kernel k gives k^ndim). Source: max over each window of K values; TorchScan's "
        "MaxPool module formula Ny * (K - 1)."
    ))


def _avgpool(ndim: int):
    def formula(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        return _kernel_volume(args, kwargs, ndim) * out_numel(out_shape)

    return describe(formula, f"avg_pool{ndim}d_flop", (
        f"Average pooling ({ndim}-D): K FLOPs per output element (K - 1 additions, one division), "
        "K = prod(kernel_size). Source: mean over each window of K values."
    ))


for _nd in (1, 2, 3):
    register(f"max_pool{_nd}d", f"max_pool{_nd}d_with_indices", f"mkldnn_max_pool{_nd}d",
             f"quantized_max_pool{_nd}d", family="pooling")(_maxpool(_nd))
    register(f"avg_pool{_nd}d", f"mkldnn_avg_pool{_nd}d", family="pooling")(_avgpool(_nd))


def adaptive_window_sum(in_size: int, out_size: int) -> int:
    """Total window length over the ``out_size`` adaptive windows of one dimension.

    Window i spans [floor(i*I/O), ceil((i+1)*I/O)), as in PyTorch's AdaptiveAvgPool kernels.
    """
    if out_size <= 0:
        return 0
    total = 0
    for i in range(out_size):
        start = (i * in_size) // out_size
        end = -((-(i + 1) * in_size) // out_size)
        total += end - start
    return total


def _adaptive_volume(x: Any, out: Any, ndim: int) -> tuple[int, int]:
    """(window elements summed over all outputs, output elements)."""
    if not is_shape(x) or out is None:
        return 0, 0
    lead = math.prod(x[:-ndim]) if len(x) > ndim else 1
    total = lead
    for i_size, o_size in zip(x[-ndim:], out[-ndim:]):
        total *= adaptive_window_sum(int(i_size), int(o_size))
    return total, math.prod(out)


def _adaptive_avg(ndim: int):
    def formula(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        total, _ = _adaptive_volume(args[0] if args else None, first_shape(out_shape), ndim)
        return total

    return describe(formula, f"adaptive_avg_pool{ndim}d_flop", (
        f"Adaptive average pooling ({ndim}-D): the size of each output's window (its additions and "
        "one division), summed exactly over PyTorch's windows [floor(iI/O), ceil((i+1)I/O)). "
        "For I divisible by O this is Ny * (I/O)^ndim = the input element count."
    ))


def _adaptive_max(ndim: int):
    def formula(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        total, outputs = _adaptive_volume(args[0] if args else None, first_shape(out_shape), ndim)
        return max(total - outputs, 0)

    return describe(formula, f"adaptive_max_pool{ndim}d_flop", (
        f"Adaptive max pooling ({ndim}-D): window size - 1 comparisons per output element, summed "
        "exactly over PyTorch's windows [floor(iI/O), ceil((i+1)I/O))."
    ))


register("adaptive_avg_pool1d", family="pooling")(_adaptive_avg(1))
register("adaptive_avg_pool2d", "_adaptive_avg_pool2d", "mkldnn_adaptive_avg_pool2d", family="pooling")(_adaptive_avg(2))
register("adaptive_avg_pool3d", "_adaptive_avg_pool3d", family="pooling")(_adaptive_avg(3))
register("adaptive_max_pool1d", family="pooling")(_adaptive_max(1))
register("adaptive_max_pool2d", family="pooling")(_adaptive_max(2))
register("adaptive_max_pool3d", family="pooling")(_adaptive_max(3))


@register("fractional_max_pool2d", "fractional_max_pool3d", family="pooling")
def fractional_max_pool_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """Fractional max pooling: K - 1 comparisons per output element, K = prod(kernel_size).

    Source: max over each (pseudo-randomly placed) window of K values.
    """
    out = first_shape(out_shape)
    ndim = len(expand_ints(arg(args, kwargs, 2, "output_size"), 1)) or 2
    k = math.prod(expand_ints(arg(args, kwargs, 1, "kernel_size"), ndim, 1))
    return max(k - 1, 0) * (math.prod(out) if out is not None else 0)

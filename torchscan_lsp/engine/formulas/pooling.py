"""Pooling: ``MaxPool1/2/3d``, ``AvgPool1/2/3d`` and their adaptive versions.

Fixed-kernel pools (the reference contract's, with an integer kernel expanded to every spatial
dimension: docs/formulas.md). ``k`` is the number of elements in one window: ``prod(kernel_size)``
for a tuple and ``kernel_size ** nd`` for an integer (``nd`` = spatial dimensions of the class: 1,
2 or 3). The reference used the bare integer for FLOPs
and MACs (``MaxPool2d(2)`` → ``k = 2``) but ``k**nd`` for DMAs; we use ``k**nd`` for all three.

* Max pool: FLOPs = ``Ny·(k − 1)`` (``k − 1`` comparisons per output element) and 0 MACs: a
  comparison multiplies and accumulates nothing (the reference filed the comparisons under MACs too,
  which made a max-pool look like a matmul). DMAs ``k·Ny + Ny``: each output reads its window, then
  is written.
* Average pool: FLOPs = MACs = ``Ny·(k − 1 + nd)`` (``k − 1`` adds and, following the reference, one
  more operation per spatial dimension for the division). DMAs ``k·Ny + Ny``.
* RF ``(k_eff, s, p)`` of the first spatial axis, ``k_eff = d·(k − 1) + 1`` for max pools (which
  have ``dilation``), ``k`` for average pools.

Adaptive pools. PyTorch's adaptive window for output ``j`` of an axis of input length ``i`` and
output length ``o`` is ``[floor(j·i/o), ceil((j+1)·i/o))``. We sum the *exact* window sizes ``W``
(the product over axes of each axis' window-size sum, times batch and channels). When ``i`` is a
multiple of ``o`` every window is ``i/o`` and this equals the reference's values; otherwise the
reference's approximation (``i % o + 1`` per axis) is neither exact nor a bound (7 → 3 has windows
of 3, the approximation says 2; 2 → 3 has windows of 1 and 2, it says 3), so we depart from it.

* Adaptive max: FLOPs = ``W − Ny``, 0 MACs; adaptive average: ``W − Ny + nd·Ny``. DMAs ``W + Ny``.
* RF of the first spatial axis: ``(largest window, i/o, 0)`` — windows start at 0 and end at ``i``,
  their starts advance by ``i/o`` on average (an int when ``o`` divides ``i``, else a float). The
  reference's ``p = (i − k·s)/2`` is not a padding (it gives −21 for a global pool over 7).
"""

from __future__ import annotations

import math
from functools import lru_cache

from torch import nn

from ._common import input_tensor, numel, output_tensor, shape
from ._registry import Family
from .conv import rf_convnd, rf_convtransposend

__all__ = [
    "flops_adaptive_avgpool",
    "flops_adaptive_maxpool",
    "flops_avgpool",
    "flops_maxpool",
    "macs_adaptive_avgpool",
    "macs_adaptive_maxpool",
    "macs_avgpool",
    "macs_maxpool",
    "rf_aggregnd",
    "adaptive_window_total",
    "adaptive_windows",
    "window_volume",
    "dmas_adaptive_poolnd",
    "dmas_poolnd",
    "flops_adaptive_avgpoolnd",
    "flops_adaptive_maxpoolnd",
    "flops_avgpoolnd",
    "flops_maxpoolnd",
    "macs_adaptive_avgpoolnd",
    "macs_adaptive_maxpoolnd",
    "macs_avgpoolnd",
    "macs_maxpoolnd",
    "rf_adaptive_poolnd",
    "rf_poolnd",
]

_ONE_D = (nn.MaxPool1d, nn.AvgPool1d, nn.AdaptiveMaxPool1d, nn.AdaptiveAvgPool1d)
_TWO_D = (nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveMaxPool2d, nn.AdaptiveAvgPool2d)
_THREE_D = (nn.MaxPool3d, nn.AvgPool3d, nn.AdaptiveMaxPool3d, nn.AdaptiveAvgPool3d)


def _spatial_dims(module: nn.Module) -> int:
    if isinstance(module, _ONE_D):
        return 1
    if isinstance(module, _TWO_D):
        return 2
    if isinstance(module, _THREE_D):
        return 3
    raise NotImplementedError(f"{type(module).__name__}: unknown number of spatial dimensions.")


def _first(value):
    return value[0] if isinstance(value, (tuple, list)) else value


def window_volume(module: nn.Module) -> int:
    """Elements per pooling window: ``prod(kernel_size)``, an int kernel expanded to ``k**nd``."""
    kernel = module.kernel_size
    if isinstance(kernel, int):
        return kernel ** _spatial_dims(module)
    return math.prod(kernel)


def flops_maxpoolnd(module: nn.modules.pooling._MaxPoolNd, inputs, out) -> int:
    """``Ny·(k − 1)``."""
    return numel(output_tensor(out, module)) * (window_volume(module) - 1)


def macs_maxpoolnd(module: nn.modules.pooling._MaxPoolNd, x, y, *, inputs=None) -> int:
    """0: a max-pool only compares (see the module docstring)."""
    return 0


def flops_avgpoolnd(module: nn.modules.pooling._AvgPoolNd, inputs, out) -> int:
    """``Ny·(k − 1 + nd)``."""
    return numel(output_tensor(out, module)) * (window_volume(module) - 1 + _spatial_dims(module))


def macs_avgpoolnd(module: nn.modules.pooling._AvgPoolNd, x, y, *, inputs=None) -> int:
    """``Ny·(k − 1 + nd)``."""
    return numel(y) * (window_volume(module) - 1 + _spatial_dims(module))


def dmas_poolnd(module: nn.Module, x, y, *, inputs=None) -> int:
    """``k·Ny + Ny``."""
    return (window_volume(module) + 1) * numel(y)


def rf_poolnd(module: nn.Module, x=None, y=None) -> tuple[int, int, int]:
    """``(d·(k − 1) + 1, s, p)`` of the first spatial axis (``d = 1`` for average pools)."""
    k = _first(module.kernel_size)
    s = _first(module.stride) if module.stride is not None else k
    p = _first(module.padding)
    d = _first(getattr(module, "dilation", 1))
    return d * (k - 1) + 1, s, p


@lru_cache(maxsize=1024)
def adaptive_windows(in_size: int, out_size: int) -> tuple[int, ...]:
    """Exact sizes of PyTorch's adaptive windows along one axis."""
    return tuple(-(-(j + 1) * in_size // out_size) - (j * in_size // out_size) for j in range(out_size))


def adaptive_window_total(x, y, nd: int) -> int:
    """Input elements read by all adaptive windows of an ``x → y`` resize over the last ``nd`` axes."""
    out_sp = shape(y)[-nd:]
    lead = numel(y) // math.prod(out_sp) if math.prod(out_sp) else 0
    return lead * math.prod(sum(adaptive_windows(i, o)) for i, o in zip(shape(x)[-nd:], out_sp, strict=True))


def _adaptive_totals(module: nn.Module, x, y) -> tuple[int, int, int]:
    """(W, Ny, nd): total window elements over all outputs, outputs, spatial dims."""
    nd = _spatial_dims(module)
    return adaptive_window_total(x, y, nd), numel(y), nd


def macs_adaptive_maxpoolnd(module, x, y, *, inputs=None) -> int:
    """0: an adaptive max-pool only compares, like a fixed one."""
    return 0


def flops_adaptive_maxpoolnd(module, inputs, out) -> int:
    """``W − Ny``: each output compares its window's elements pairwise, one fewer than the window."""
    windows, n_out, _ = _adaptive_totals(module, input_tensor(inputs, module), output_tensor(out, module))
    return windows - n_out


def macs_adaptive_avgpoolnd(module, x, y, *, inputs=None) -> int:
    """``W − Ny + nd·Ny`` (``Ny·(prod(Ka) − 1 + nd)`` for equal windows)."""
    windows, n_out, nd = _adaptive_totals(module, x, y)
    return windows - n_out + nd * n_out


def flops_adaptive_avgpoolnd(module, inputs, out) -> int:
    """``W − Ny + nd·Ny``."""
    return macs_adaptive_avgpoolnd(module, input_tensor(inputs, module), output_tensor(out, module))


def dmas_adaptive_poolnd(module, x, y, *, inputs=None) -> int:
    """``W + Ny``."""
    windows, n_out, _ = _adaptive_totals(module, x, y)
    return windows + n_out


def rf_adaptive_poolnd(module, x, y) -> tuple[int, int | float, int]:
    """``(largest window, i/o, 0)`` along the first spatial axis."""
    nd = _spatial_dims(module)
    i, o = shape(x)[-nd], shape(y)[-nd]
    windows = adaptive_windows(i, o)
    stride = i // o if i % o == 0 else i / o
    return max(windows), stride, 0


def rf_aggregnd(module: nn.Module, x=None, y=None) -> tuple:
    """Reference name: the RF of a convolution or a fixed-kernel pool."""
    if isinstance(module, nn.modules.conv._ConvTransposeNd):
        return rf_convtransposend(module, x, y)
    if isinstance(module, nn.modules.conv._ConvNd):
        return rf_convnd(module, x, y)
    return rf_poolnd(module, x, y)


# reference helper names (torchscan.modules)
flops_maxpool, macs_maxpool = flops_maxpoolnd, macs_maxpoolnd
flops_avgpool, macs_avgpool = flops_avgpoolnd, macs_avgpoolnd
flops_adaptive_maxpool, macs_adaptive_maxpool = flops_adaptive_maxpoolnd, macs_adaptive_maxpoolnd
flops_adaptive_avgpool, macs_adaptive_avgpool = flops_adaptive_avgpoolnd, macs_adaptive_avgpoolnd

FAMILIES = [
    Family("max_pool", (nn.modules.pooling._MaxPoolNd,), flops_maxpoolnd, macs_maxpoolnd, dmas_poolnd, rf_poolnd),
    Family("avg_pool", (nn.modules.pooling._AvgPoolNd,), flops_avgpoolnd, macs_avgpoolnd, dmas_poolnd, rf_poolnd),
    Family(
        "adaptive_max_pool",
        (nn.modules.pooling._AdaptiveMaxPoolNd,),
        flops_adaptive_maxpoolnd,
        macs_adaptive_maxpoolnd,
        dmas_adaptive_poolnd,
        rf_adaptive_poolnd,
    ),
    Family(
        "adaptive_avg_pool",
        (nn.modules.pooling._AdaptiveAvgPoolNd,),
        flops_adaptive_avgpoolnd,
        macs_adaptive_avgpoolnd,
        dmas_adaptive_poolnd,
        rf_adaptive_poolnd,
    ),
]

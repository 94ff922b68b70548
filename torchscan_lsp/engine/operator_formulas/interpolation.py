"""Interpolation (upsampling/resampling) and grid sampling.

Each output element is a weighted sum of ``taps`` input elements: ``taps`` multiplications and
``taps - 1`` additions = 2 * taps - 1 FLOPs. Linear interpolation uses 2 taps per dimension, cubic 4,
so: linear1d 3, bilinear2d 7, trilinear3d 15, bicubic2d 31 FLOPs per output element. The weights
and source indices depend only on the output coordinate along one dimension; computing them is
O(output size per dimension) and not counted. Nearest-neighbour modes copy one input element: 0 FLOPs.
"""

from __future__ import annotations

import math
from typing import Any

from ._base import first_shape, is_shape, out_numel, register


def weighted_sum_flops(outputs: int, taps: int) -> int:
    """2 * taps - 1 FLOPs per output element (taps multiplies, taps - 1 adds)."""
    return outputs * (2 * taps - 1) if taps > 0 else 0


@register("upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "_upsample_nearest_exact1d",
          "_upsample_nearest_exact2d", "_upsample_nearest_exact3d", family="interpolation")
def upsample_nearest_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """0 FLOPs: nearest-neighbour resampling copies the nearest input element (data movement).

    Source: ``torch.nn.Upsample(mode='nearest')`` documentation.
    """
    return 0


def _linear(taps: int, name: str, definition: str):
    def formula(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        return weighted_sum_flops(out_numel(out_shape), taps)

    formula.__doc__ = (
        f"{2 * taps - 1} FLOPs per output element: {definition}, a weighted sum of {taps} input "
        f"elements ({taps} multiplies, {taps - 1} adds). Source: ``torch.nn.Upsample`` modes."
    )
    formula.__name__ = f"{name}_flop"
    formula.__qualname__ = formula.__name__
    return formula


register("upsample_linear1d", family="interpolation")(_linear(2, "upsample_linear1d", "linear interpolation between 2 neighbours"))
register("upsample_bilinear2d", family="interpolation")(_linear(4, "upsample_bilinear2d", "bilinear interpolation of 2x2 neighbours"))
register("upsample_trilinear3d", family="interpolation")(_linear(8, "upsample_trilinear3d", "trilinear interpolation of 2x2x2 neighbours"))
register("upsample_bicubic2d", family="interpolation")(_linear(16, "upsample_bicubic2d", "bicubic interpolation of 4x4 neighbours"))


def _aa_taps(in_size: int, out_size: int, interp_size: int) -> int:
    """Window length of PyTorch's anti-aliased kernels: 2 * ceil(support) + 1, where support =
    interp_size / 2 * scale when downsampling (scale = in / out >= 1), else interp_size / 2."""
    scale = in_size / out_size if out_size else 1.0
    support = interp_size / 2 * scale if scale >= 1.0 else interp_size / 2
    return int(math.ceil(support)) * 2 + 1


def _aa(interp_size: int, name: str):
    def formula(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        x = args[0] if args else None
        out = first_shape(out_shape)
        if not is_shape(x) or out is None or len(x) < 2:
            return 0
        lead = math.prod(x[:-2])
        h_in, w_in = int(x[-2]), int(x[-1])
        h_out, w_out = int(out[-2]), int(out[-1])
        flops = 0
        if w_in != w_out:  # horizontal pass: (lead, H_in, W_out)
            flops += weighted_sum_flops(lead * h_in * w_out, _aa_taps(w_in, w_out, interp_size))
        if h_in != h_out:  # vertical pass: (lead, H_out, W_out)
            flops += weighted_sum_flops(lead * h_out * w_out, _aa_taps(h_in, h_out, interp_size))
        return flops

    formula.__doc__ = (
        "Anti-aliased resampling, computed separably as PyTorch does: a horizontal pass producing "
        "(..., H_in, W_out) and a vertical pass producing (..., H_out, W_out), each output a weighted "
        "sum of 2*ceil(support)+1 taps (2*taps - 1 FLOPs), support = "
        f"{interp_size // 2} x scale when downsampling. A pass whose size does not change is skipped. "
        "Source: PyTorch's UpSampleKernel anti-alias implementation (Pillow's resampling)."
    )
    formula.__name__ = f"{name}_flop"
    formula.__qualname__ = formula.__name__
    return formula


register("_upsample_bilinear2d_aa", family="interpolation")(_aa(2, "upsample_bilinear2d_aa"))
register("_upsample_bicubic2d_aa", family="interpolation")(_aa(4, "upsample_bicubic2d_aa"))


@register("grid_sampler_2d", "cudnn_grid_sampler", "_grid_sampler_2d_cpu_fallback", family="interpolation")
def grid_sampler_2d_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """2-D grid sampling: per output element a weighted sum (bilinear 7, bicubic 31, nearest 0),
    plus per grid point 2 FLOPs per coordinate to un-normalise it (multiply, add).

    Source: ``torch.nn.functional.grid_sample`` documentation.
    """
    mode = args[2] if len(args) > 2 else kwargs.get("interpolation_mode", 0)
    taps = {0: 4, 1: 0, 2: 16}.get(mode, 4)
    grid = args[1] if len(args) > 1 else None
    points = math.prod(grid[:-1]) if is_shape(grid) else 0
    return weighted_sum_flops(out_numel(out_shape), taps) + 2 * 2 * points


@register("grid_sampler_3d", family="interpolation")
def grid_sampler_3d_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """3-D grid sampling: trilinear 15 FLOPs per output element (nearest 0), plus 2 FLOPs per
    coordinate per grid point. Source: ``torch.nn.functional.grid_sample`` documentation."""
    mode = args[2] if len(args) > 2 else kwargs.get("interpolation_mode", 0)
    taps = {0: 8, 1: 0}.get(mode, 8)
    grid = args[1] if len(args) > 1 else None
    points = math.prod(grid[:-1]) if is_shape(grid) else 0
    return weighted_sum_flops(out_numel(out_shape), taps) + 2 * 3 * points

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

from ._base import arg, first_shape, is_shape, out_numel, register


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


def _aa_scale(in_size: int, out_size: int, align_corners: bool, scale: Any) -> float:
    """Input elements per output element, as ATen's ``area_pixel_compute_scale``: ``(in − 1) /
    (out − 1)`` with ``align_corners``, else ``1 / scale_factor`` when one is given, else ``in / out``."""
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    if isinstance(scale, (int, float)) and not isinstance(scale, bool) and scale > 0:
        return 1.0 / scale
    return in_size / out_size if out_size else 1.0


def aa_window_flops(in_size: int, out_size: int, interp_size: int, align_corners: bool = False,
                    scale: Any = None) -> int:
    """FLOPs of one anti-aliased pass along a dimension, per line: ``2·taps − 1`` for each output,
    ``taps`` the window PyTorch's kernel computes, clipped at the borders.

    As ``HelperInterpBase::_compute_indices_min_size_weights_aa`` (ATen's ``UpSampleKernel.cpp``):
    ``support = interp_size / 2 · scale`` when downsampling (``scale ≥ 1``), else ``interp_size / 2``;
    output ``i`` reads inputs ``[xmin, xmin + taps)`` with ``center = scale·(i + 0.5)``,
    ``xmin = max(trunc(center − support + 0.5), 0)`` and ``taps = min(trunc(center + support + 0.5),
    in_size) − xmin``. So (…, 8) → (…, 4) bilinear reads 3, 4, 4 and 3 inputs: 5 + 7 + 7 + 5 = 24.
    """
    ratio = _aa_scale(in_size, out_size, align_corners, scale)
    support = interp_size / 2 * ratio if ratio >= 1.0 else interp_size / 2
    flops = 0
    for i in range(out_size):
        center = ratio * (i + 0.5)
        xmin = max(int(center - support + 0.5), 0)
        taps = min(int(center + support + 0.5), in_size) - xmin
        flops += weighted_sum_flops(1, taps)
    return flops


def _aa(interp_size: int, name: str):
    def formula(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        x = args[0] if args else None
        out = first_shape(out_shape)
        if not is_shape(x) or out is None or len(x) < 2:
            return 0
        lead = math.prod(x[:-2])
        h_in, w_in = int(x[-2]), int(x[-1])
        h_out, w_out = int(out[-2]), int(out[-1])
        align_corners = bool(arg(args, kwargs, 2, "align_corners", False))
        flops = 0
        if w_in != w_out:  # horizontal pass: (lead, H_in, W_out)
            flops += lead * h_in * aa_window_flops(w_in, w_out, interp_size, align_corners,
                                                   arg(args, kwargs, 4, "scales_w"))
        if h_in != h_out:  # vertical pass: (lead, H_out, W_out)
            flops += lead * w_out * aa_window_flops(h_in, h_out, interp_size, align_corners,
                                                    arg(args, kwargs, 3, "scales_h"))
        return flops

    formula.__doc__ = (
        "Anti-aliased resampling, computed separably as PyTorch does: a horizontal pass producing "
        "(..., H_in, W_out) and a vertical pass producing (..., H_out, W_out), each output a weighted "
        "sum of the taps its window holds, clipped at the borders (2*taps - 1 FLOPs; "
        f"support {interp_size // 2} x scale when downsampling; :func:`aa_window_flops`). A pass whose "
        "size does not change is skipped. Source: ATen's UpSampleKernel.cpp anti-alias kernels "
        "(Pillow's resampling)."
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

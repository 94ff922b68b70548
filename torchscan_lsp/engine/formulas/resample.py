"""Resampling: ``Upsample`` (and ``UpsamplingNearest2d``/``UpsamplingBilinear2d``), ``PixelShuffle``,
``PixelUnshuffle``.

``Upsample``: each output element is a weighted sum of ``taps`` input elements, with ``taps`` per
spatial axis 1 (``nearest``, ``nearest-exact``), 2 (``linear``, ``bilinear``, ``trilinear``) or
4 (``bicubic``), so ``taps = per_axis ** nd`` (``nd`` spatial dimensions).

* FLOPs: nearest modes 0 (an index copy); interpolating modes ``Ny·(2·taps − 1)`` (``taps``
  multiplies and ``taps − 1`` adds per output element). The source coordinates and the
  interpolation weights depend only on the output position and are shared by every batch element and
  channel; like PyTorch's kernels we treat them as precomputed and do not count them.
* MACs: nearest 0; interpolating modes ``Ny·taps`` (the weighted sum is a multiply-accumulate).
* DMAs ``taps·Ny + Ny``: each output reads its taps (as a pooling window is read) and is written.
* ``area`` mode is adaptive average pooling and uses that family's formulas.
* Receptive field, first spatial axis, in input elements, with PyTorch's source-coordinate scale
  ``s`` (``1/scale_factor`` when a scale factor is given and not recomputed, else ``in/out``; with
  ``align_corners=True`` ``(in − 1)/(out − 1)``): ``rf`` = taps per axis (an int), stride ``s`` (a
  float, below 1 when enlarging), padding = where output 0's taps start, negated: nearest ``0.0``;
  nearest-exact and linear modes ``0.5 − 0.5·s`` (half-pixel centres); bicubic ``1.5 − 0.5·s``;
  with ``align_corners=True`` ``0.0`` (linear) and ``1.0`` (bicubic). Border clamping is ignored.

``PixelShuffle(r)`` / ``PixelUnshuffle(r)`` move elements between channels and space: 0 FLOPs,
0 MACs, DMAs ``Nx + Ny``. Receptive field: PixelShuffle ``(1, 1/r, 0.0)`` (each output position comes
from one input position, ``r`` outputs per input); PixelUnshuffle ``(r, r, 0)`` (each output position
gathers an ``r × r`` block).
"""

from __future__ import annotations

from torch import nn

from ._common import input_tensor, numel, output_tensor, shape
from ._registry import Family
from .pooling import adaptive_window_total, adaptive_windows

__all__ = [
    "dmas_pixelshuffle",
    "dmas_upsample",
    "flops_pixelshuffle",
    "flops_upsample",
    "interpolation_taps",
    "macs_pixelshuffle",
    "macs_upsample",
    "rf_pixelshuffle",
    "rf_upsample",
]

_TAPS_PER_AXIS = {"nearest": 1, "nearest-exact": 1, "linear": 2, "bilinear": 2, "trilinear": 2, "bicubic": 4}


def interpolation_taps(mode: str, nd: int) -> int:
    """Input elements combined into one output element by ``mode`` over ``nd`` spatial axes."""
    try:
        return _TAPS_PER_AXIS[mode] ** nd
    except KeyError:
        raise NotImplementedError(f"Upsample formulas do not support mode={mode!r}.") from None


def _area_windows(x, y) -> tuple[int, int, int]:
    nd = len(shape(x)) - 2
    return adaptive_window_total(x, y, nd), numel(y), nd


def macs_upsample(module: nn.Upsample, x, y, *, inputs=None) -> int:
    """Nearest 0; interpolating ``Ny·taps``; area ``W − Ny + nd·Ny`` (adaptive average pooling)."""
    if module.mode == "area":
        windows, n_out, nd = _area_windows(x, y)
        return windows - n_out + nd * n_out
    taps = interpolation_taps(module.mode, len(shape(x)) - 2)
    return 0 if taps == 1 else numel(y) * taps


def flops_upsample(module: nn.Upsample, inputs, out) -> int:
    """Nearest 0; interpolating ``Ny·(2·taps − 1)``; area as adaptive average pooling."""
    x, y = input_tensor(inputs, module), output_tensor(out, module)
    if module.mode == "area":
        return macs_upsample(module, x, y)
    taps = interpolation_taps(module.mode, len(shape(x)) - 2)
    return 0 if taps == 1 else numel(y) * (2 * taps - 1)


def dmas_upsample(module: nn.Upsample, x, y, *, inputs=None) -> int:
    """``taps·Ny + Ny`` (area: ``W + Ny``)."""
    if module.mode == "area":
        windows, n_out, _ = _area_windows(x, y)
        return windows + n_out
    return (interpolation_taps(module.mode, len(shape(x)) - 2) + 1) * numel(y)


def _source_scale(module: nn.Upsample, in_size: int, out_size: int) -> float:
    if module.align_corners and module.mode not in ("nearest", "nearest-exact"):
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    factor = module.scale_factor
    if factor is not None and not module.recompute_scale_factor:
        first = factor[0] if isinstance(factor, (tuple, list)) else factor
        return 1.0 / float(first)
    return in_size / out_size


def rf_upsample(module: nn.Upsample, x, y) -> tuple:
    """``(taps per axis, s, padding)`` along the first spatial axis (see the module docstring)."""
    i, o = shape(x)[2], shape(y)[2]
    if module.mode == "area":
        stride = i // o if i % o == 0 else i / o
        return max(adaptive_windows(i, o)), stride, 0
    taps = interpolation_taps(module.mode, 1)
    s = _source_scale(module, i, o)
    if module.mode == "nearest":
        return taps, s, 0.0
    if module.align_corners and module.mode != "nearest-exact":
        return taps, s, (1.0 if taps == 4 else 0.0)
    # half-pixel centres: output 0 samples input (0.5·s − 0.5); its taps reach taps/2 − 1 before
    centre = 0.5 * s - 0.5
    before = taps // 2 - 1 if taps > 1 else 0
    return taps, s, before - centre


def flops_pixelshuffle(module: nn.Module, inputs=None, out=None) -> int:
    """0."""
    return 0


def macs_pixelshuffle(module: nn.Module, x=None, y=None, *, inputs=None) -> int:
    """0."""
    return 0


def dmas_pixelshuffle(module: nn.Module, x, y, *, inputs=None) -> int:
    """``Nx + Ny``."""
    return numel(x) + numel(y)


def rf_pixelshuffle(module: nn.Module, x=None, y=None) -> tuple:
    """PixelShuffle ``(1, 1/r, 0.0)``; PixelUnshuffle ``(r, r, 0)``."""
    if isinstance(module, nn.PixelUnshuffle):
        r = module.downscale_factor
        return r, r, 0
    return 1, 1.0 / module.upscale_factor, 0.0


FAMILIES = [
    Family("upsample", (nn.Upsample,), flops_upsample, macs_upsample, dmas_upsample, rf_upsample),
    Family(
        "pixel_shuffle",
        (nn.PixelShuffle, nn.PixelUnshuffle),
        flops_pixelshuffle,
        macs_pixelshuffle,
        dmas_pixelshuffle,
        rf_pixelshuffle,
    ),
]

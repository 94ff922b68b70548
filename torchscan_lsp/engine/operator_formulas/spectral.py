"""Fast Fourier transforms (``torch.fft``), e.g. FNet token mixing and audio front ends.

Convention: the classic radix-2 count, 5 n log2 n real FLOPs for a complex FFT of length n
(Cooley-Tukey: n/2 log2 n butterflies of one complex multiply, 6 FLOPs, and two complex adds, 4),
and half of it, 2.5 n log2 n, for a real-input or real-output FFT of n real values. A transform over
several dimensions of total length n = prod(n_d) costs the same formula with that n. A non-trivial
``normalization`` multiplies each output by a real factor: 2 FLOPs per complex output (one per
component, the convention of ``complex.py``), 1 per real output.
"""

from __future__ import annotations

import math
from typing import Any

from ._base import arg, is_shape, numel, out_numel, register


def fft_flops(elements: int, length: int, real: bool) -> int:
    """(elements / length) transforms of ``length`` points: 5 n log2 n each (complex), 2.5 n log2 n (real)."""
    if length <= 1 or elements <= 0:
        return 0
    per = 2.5 if real else 5.0
    return int(round(per * elements * math.log2(length)))


def _length(shape: Any, dims: Any) -> int:
    if not is_shape(shape) or len(shape) == 0:
        return 1
    if dims is None:
        dims = range(len(shape))
    elif isinstance(dims, int):
        dims = [dims]
    return math.prod(shape[int(d) % len(shape)] for d in dims)


@register("_fft_c2c", family="spectral")
def fft_c2c_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """Complex-to-complex FFT over ``dim`` (total length n): 5 N log2 n for N input elements, plus 2N
    when normalised (a real factor times each complex output). Source: Cooley-Tukey radix-2
    operation count."""
    x = args[0] if args else None
    n = _length(x, arg(args, kwargs, 1, "dim"))
    norm = arg(args, kwargs, 2, "normalization", 0)
    return fft_flops(numel(x), n, real=False) + (2 * out_numel(out_shape) if norm else 0)


@register("_fft_r2c", family="spectral")
def fft_r2c_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """Real-to-complex FFT over ``dim`` (length n): 2.5 N log2 n for N real inputs, plus two
    multiplies per (complex) output when normalised. Source: a real FFT costs half a complex one."""
    x = args[0] if args else None
    n = _length(x, arg(args, kwargs, 1, "dim"))
    norm = arg(args, kwargs, 2, "normalization", 0)
    return fft_flops(numel(x), n, real=True) + (2 * out_numel(out_shape) if norm else 0)


@register("_fft_c2r", family="spectral")
def fft_c2r_flop(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """Complex-to-real inverse FFT over ``dim``: 2.5 N log2 n for N real outputs (length n along
    the transformed dims of the output), plus N when normalised."""
    out = out_shape if is_shape(out_shape) else None
    n = _length(out, arg(args, kwargs, 1, "dim"))
    norm = arg(args, kwargs, 2, "normalization", 0)
    outputs = out_numel(out_shape)
    return fft_flops(outputs, n, real=True) + (outputs if norm else 0)

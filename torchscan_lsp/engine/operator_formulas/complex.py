"""Operators on complex tensors, counted in real arithmetic (docs/operator-formulas.md, "Complex tensors").

One convention everywhere, the FFT formulas' (:mod:`.spectral`): a complex number is two reals, so

* a complex addition is 2 real FLOPs (one per component); adding a real to a complex number, 1;
* a complex multiplication is 6 real FLOPs (``(a + bi)(c + di) = (ac − bd) + (ad + bc)i``: 4
  multiplies, 2 additions); multiplying by a real number, 2;
* a complex multiply-accumulate is 4 real MACs, 8 real FLOPs: a complex matrix product costs what
  ``FlopCounterMode`` counts for the four real products of its decomposition, so every formula of a
  matrix, convolution or attention product scales its FLOPs and its MACs by 4;
* a complex division is 11 real FLOPs (``((ac + bd) + (bc − ad)i) / (c² + d²)``: 6 multiplies,
  3 additions, 2 divisions), 2 by a real divisor; ``abs`` is 4 (two squares, an add, a square
  root); a reduction's additions and a comparison's are 2 per complex element; a selection
  (``where``, ``masked_fill``), ``angle`` (one ``atan2``) and ``conj_physical`` (one negation) cost what
  they cost on reals.

The FFTs already count real arithmetic. Any other operator with a complex operand (``exp``,
``sqrt``, a norm) has no such formula: :func:`complex_counts` raises :class:`ComplexOperands`, and
the call is uncounted with that reason, never a real count passed off as complete. PyTorch runs a
complex convolution as three real ones (Gauss's trick, ``complex_convolution`` in ATen's
``Convolution.cpp``), so the counter sees, and counts, real convolutions and real additions there.
"""

from __future__ import annotations

from typing import Any

import torch

from ._base import out_numel

__all__ = ["ComplexOperands", "INPUTS_DECIDE", "complex_counts", "has_complex"]


class ComplexOperands(ValueError):
    """An operator on complex tensors that no formula counts in real arithmetic."""


def _inplace(*names: str) -> frozenset[str]:
    return frozenset(f"aten.{name}{suffix}" for name in names for suffix in ("", "_"))


_SPECTRAL = frozenset(("aten._fft_c2c", "aten._fft_r2c", "aten._fft_c2r"))
_ADDITIONS = _inplace("add", "sub", "subtract", "rsub")
_PER_COMPONENT = _inplace("neg", "negative") | frozenset(
    ("aten.sum", "aten.mean", "aten.cumsum", "aten.eq", "aten.ne", "aten.not_equal"))
_AS_REAL = _inplace("where", "masked_fill", "conj_physical") | frozenset(("aten.angle",))
_MULTIPLICATIONS = _inplace("mul", "multiply")
_DIVISIONS = _inplace("div", "divide", "true_divide")
_ABS = _inplace("abs", "absolute")

#: Operators whose output is real (or boolean) while an operand is complex: for these the counter
#: looks at the operands, not only at the output.
INPUTS_DECIDE = frozenset(("aten.abs", "aten.absolute", "aten.angle", "aten.eq", "aten.ne", "aten.not_equal"))


def _is_complex(value: Any) -> bool:
    return value.is_complex() if isinstance(value, torch.Tensor) else isinstance(value, complex)


def has_complex(args: tuple, out: Any) -> bool:
    """Whether the output or an operand of a call is complex (a tensor, or a Python ``complex``)."""
    if isinstance(out, torch.Tensor) and out.is_complex():
        return True
    return any(_is_complex(value) for value in args)


def _both_complex(args: tuple) -> bool:
    return len(args) > 1 and _is_complex(args[0]) and _is_complex(args[1])


def complex_counts(name: str, products: bool, flops: int, args: tuple, out: Any) -> tuple[int, int]:
    """The real-arithmetic FLOPs of a call of operator ``name`` (``"aten.mm"``) with a complex
    operand or output, and the factor of its MACs; ``flops`` is what its formula counted for real
    operands of the same shapes, ``products`` whether it is a matrix, convolution or attention
    product (it has a MAC formula).

    Raises:
        ComplexOperands: no formula counts this operator in real arithmetic.
    """
    if flops == 0:  # no arithmetic on real operands (a lookup, a copy) is none on complex ones
        return 0, 1
    if products:
        return 4 * flops, 4
    if name in _SPECTRAL or name in _AS_REAL:
        return flops, 1
    if name in _PER_COMPONENT:
        return 2 * flops, 1
    if name in _ADDITIONS:
        return (2 if _both_complex(args) else 1) * flops, 1
    if name in _MULTIPLICATIONS:
        return (6 if _both_complex(args) else 2) * flops, 1
    if name in _DIVISIONS and len(args) > 1:
        return (11 if _is_complex(args[1]) else 2) * out_numel(getattr(out, "shape", None)), 1
    if name in _ABS:
        return 4 * flops, 1
    raise ComplexOperands(f"complex operands: no formula counts {name} in real arithmetic")

"""Module formulas of a call on complex tensors, in real arithmetic (docs/formulas.md, "Complex tensors").

The operator formulas' convention (``operator_formulas/complex.py``): a complex addition is 2 real
FLOPs, a complex multiplication 6, a complex multiply-accumulate 4 real MACs.

* ``nn.Linear`` (and GPT-2's ``Conv1D``, the same ``addmm``): each of its ``MACs`` products is a
  complex multiplication and each of its other FLOPs a complex addition, so the call costs
  ``6·MACs + 2·(FLOPs − MACs) = 4·MACs + 2·FLOPs`` real FLOPs and ``4·MACs`` real MACs, with FLOPs
  and MACs the real formula's. ``Linear(4, 3, bias=False)`` on (2, 4): 24 MACs and 42 FLOPs for real
  operands, so 96 real MACs and 4·24 + 2·42 = 180 real FLOPs (each of the 6 outputs: 4 complex
  multiplies and 3 complex additions, 4·6 + 3·2 = 30).
* Convolutions, direct and transposed, as PyTorch runs them (``complex_convolution`` in ATen's
  ``Convolution.cpp``, Gauss's trick): ``a = conv(xr, Wr, br)``, ``b = conv(xi, Wi)``,
  ``c = conv(xr + xi, Wr + Wi, br + bi)``, ``y = a − b + i·(c − a − b)``. So three real
  convolutions (two with the bias; FLOPs and ``3·MACs`` MACs of the real formula), the sums
  ``xr + xi``, ``Wr + Wi`` and ``br + bi`` (``Nx + numel(W) + [bias]·Cout`` additions) and per output
  element three subtractions, ``i·(...)`` (2 multiplies) and one addition to the real part: ``6·Ny``.
* Any other module with a complex operand and a non-zero count: the real formula's number, which
  every complex operation costs at least, as a lower bound, with a warning saying so.

DMAs count elements whatever their dtype, a complex element being one.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import nn

from ._common import as_inputs, first_tensor, numel

__all__ = ["complex_call", "complex_flops", "complex_macs"]

_PRODUCTS = frozenset(("linear", "gpt2_conv1d"))
_CONVOLUTIONS = frozenset(("conv", "conv_transpose"))


def _complex(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_complex()


def complex_call(module: nn.Module, inputs: Any, out: Any) -> bool:
    """Whether a call of ``module`` computes on complex numbers: its first input or output tensor,
    or one of its own parameters, is complex."""
    if _complex(first_tensor(as_inputs(inputs))) or _complex(first_tensor(out)):
        return True
    # its own parameters, read from their table: ``parameters(recurse=False)`` walks a generator
    # chain that costs more than the formulas themselves on a small layer
    return any(parameter is not None and parameter.is_complex() for parameter in module._parameters.values())


def _lower_bound(module: nn.Module, count: int) -> int:
    if count:
        warnings.warn(f"Complex tensors: no formula counts {type(module).__name__} in real arithmetic; the count is "
                      "that of real operands, a lower bound.", stacklevel=3)
    return count


def complex_flops(family: str, module: nn.Module, flops: int, macs: int, x: Any, y: Any) -> int:
    """The real-arithmetic FLOPs of a complex call of ``module`` (formula family ``family``), from
    its real formula's ``flops`` and ``macs`` and its first input ``x`` and output ``y``."""
    if family in _PRODUCTS:
        return 4 * macs + 2 * flops
    if family in _CONVOLUTIONS:
        bias = module.bias is not None
        # the real formula counts the bias of one convolution: b = conv(xi, Wi) has none
        three = 3 * flops - (numel(y) if bias else 0)
        sums = numel(x) + module.weight.numel() + (module.bias.numel() if bias else 0)
        return three + sums + 6 * numel(y)
    return _lower_bound(module, flops)


def complex_macs(family: str, module: nn.Module, macs: int) -> int:
    """The real MACs of a complex call: 4 per complex product (``nn.Linear``), 3 per product of a
    convolution (the three real convolutions PyTorch runs)."""
    if family in _PRODUCTS:
        return 4 * macs
    if family in _CONVOLUTIONS:
        return 3 * macs
    return _lower_bound(module, macs)

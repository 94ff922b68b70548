"""``nn.Linear`` (and subclasses such as ``LazyLinear`` and MultiheadAttention's ``out_proj``).

Conventions (the reference contract's; docs/formulas.md):

* FLOPs: each of the ``T = prod(x.shape[:-1])`` tokens computes ``out_features`` dot products of
  length ``in_features``: ``in_features`` multiplies and ``in_features - 1`` adds, plus one add per
  output element for the bias: ``out·T·(2·in − 1) + [bias]·out·T``.
* MACs: ``in_features`` multiply-accumulates per output element (the bias is folded into the
  accumulator): ``in·Ny``. PyTorch's ``FlopCounterMode`` counts ``2·MACs`` for the same ``addmm``.
* DMAs: read the input, read every parameter once, write the output: ``Nx + P + Ny``.
* Receptive field: the reference treats Linear as position-wise: ``(1.0, 1.0, 0.0)``.

``nn.Bilinear`` (``y_k = x1ᵀ W_k x2 + b_k``, ``x1 (..., a)``, ``x2 (..., b)``, ``o`` outputs, ``T``
tokens), in the order PyTorch's ``_trilinear`` kernel computes it: ``x1ᵀ W_k`` (``b`` dot products
of length ``a``), then its dot product with ``x2`` (length ``b``):

* FLOPs: ``o·T·(b·(2a − 1) + 2b − 1) + [bias]·o·T``.
* MACs: ``o·T·(a·b + b)``.
* DMAs: ``Nx1 + Nx2 + P + Ny``; receptive field position-wise.
"""

from __future__ import annotations

import math

from torch import nn

from ._common import as_inputs, input_tensor, num_params, numel, rf_pointwise, shape
from ._registry import Family

__all__ = ["dmas_bilinear", "dmas_linear", "flops_bilinear", "flops_linear", "macs_bilinear", "macs_linear",
           "rf_linear"]


def _tokens(x) -> int:
    return math.prod(shape(x)[:-1])


def flops_linear(module: nn.Linear, inputs, out=None) -> int:
    """``out·T·(2·in − 1) + [bias]·out·T`` with ``T = prod(x.shape[:-1])``."""
    tokens = _tokens(input_tensor(inputs, module))
    flops = module.out_features * tokens * (2 * module.in_features - 1)
    if module.bias is not None:
        flops += module.out_features * tokens
    return flops


def macs_linear(module: nn.Linear, x, y, *, inputs=None) -> int:
    """``in_features · T · out_features`` (``= in·Ny``)."""
    return module.in_features * _tokens(x) * module.out_features


def dmas_linear(module: nn.Linear, x, y, *, inputs=None) -> int:
    """``Nx + P + Ny``."""
    return numel(x) + num_params(module) + numel(y)


rf_linear = rf_pointwise


def _bilinear_sizes(module: nn.Bilinear, x) -> tuple[int, int, int, int]:
    """``(a, b, o, T)`` of a Bilinear call whose first input is ``x``."""
    return module.in1_features, module.in2_features, module.out_features, _tokens(x)


def flops_bilinear(module: nn.Bilinear, inputs, out=None) -> int:
    """``o·T·(b·(2a − 1) + 2b − 1) + [bias]·o·T``."""
    a, b, o, tokens = _bilinear_sizes(module, input_tensor(inputs, module))
    return o * tokens * (b * (2 * a - 1) + 2 * b - 1 + (module.bias is not None))


def macs_bilinear(module: nn.Bilinear, x, y, *, inputs=None) -> int:
    """``o·T·(a·b + b)``."""
    a, b, o, tokens = _bilinear_sizes(module, x)
    return o * tokens * (a * b + b)


def dmas_bilinear(module: nn.Bilinear, x, y, *, inputs=None) -> int:
    """``Nx1 + Nx2 + P + Ny`` (``x2`` from ``inputs``; without it, ``x2`` is taken as ``x``'s
    tokens times ``in2_features``)."""
    ordered = as_inputs(inputs) if inputs is not None else ()
    second = ordered[1] if len(ordered) > 1 else None
    x2 = numel(second) if second is not None else _tokens(x) * module.in2_features
    return numel(x) + x2 + num_params(module) + numel(y)


FAMILIES = [Family("linear", (nn.Linear,), flops_linear, macs_linear, dmas_linear, rf_linear),
            Family("bilinear", (nn.Bilinear,), flops_bilinear, macs_bilinear, dmas_bilinear, rf_linear)]

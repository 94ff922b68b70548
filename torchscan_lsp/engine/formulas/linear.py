"""``nn.Linear`` (and subclasses such as ``LazyLinear`` and MultiheadAttention's ``out_proj``).

Conventions (the reference contract's; docs/formulas.md):

* FLOPs: each of the ``T = prod(x.shape[:-1])`` tokens computes ``out_features`` dot products of
  length ``in_features``: ``in_features`` multiplies and ``in_features - 1`` adds, plus one add per
  output element for the bias: ``out·T·(2·in − 1) + [bias]·out·T``.
* MACs: ``in_features`` multiply-accumulates per output element (the bias is folded into the
  accumulator): ``in·Ny``. PyTorch's ``FlopCounterMode`` counts ``2·MACs`` for the same ``addmm``.
* DMAs: read the input, read every parameter once, write the output: ``Nx + P + Ny``.
* Receptive field: the reference treats Linear as position-wise: ``(1.0, 1.0, 0.0)``.
"""

from __future__ import annotations

import math

from torch import nn

from ._common import input_tensor, num_params, numel, rf_pointwise, shape
from ._registry import Family

__all__ = ["dmas_linear", "flops_linear", "macs_linear", "rf_linear"]


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

FAMILIES = [Family("linear", (nn.Linear,), flops_linear, macs_linear, dmas_linear, rf_linear)]

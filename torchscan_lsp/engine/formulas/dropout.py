"""Dropout: ``Dropout``, ``Dropout1d/2d/3d``, ``AlphaDropout``, ``FeatureAlphaDropout``
(every subclass of ``_DropoutNd``).

As docs/formulas.md says: in evaluation (and with ``p = 0``) dropout is the identity. PyTorch then returns the very
input tensor object (``F.dropout(x, p, training=False) is x``): nothing is read, computed or written.
We count that as an **elided** identity: 0 FLOPs, 0 MACs and **0 DMAs**. The crawler always runs
in evaluation, so these are the values it reports.

In training with ``p > 0`` (when the formulas are used outside the crawler), the reference
contract's values apply: FLOPs ``Nx`` (the mask multiply; the channel-wise variants
multiply every element too), MACs 0, DMAs ``Nx + 1 + (0 if inplace else Ny)`` (input, ``p``,
output). ``AlphaDropout``/``FeatureAlphaDropout`` multiply and then add the affine correction:
``2·Nx`` FLOPs.

Receptive field ``(1.0, 1.0, 0.0)``.
"""

from __future__ import annotations

from torch import nn

from ._common import input_tensor, numel, rf_pointwise
from ._registry import Family

__all__ = ["dmas_dropout", "dropout_active", "flops_dropout", "macs_dropout", "rf_dropout"]

_ALPHA = (nn.AlphaDropout, nn.FeatureAlphaDropout)


def dropout_active(module: nn.Module) -> bool:
    """True when the module actually drops elements (training with ``p > 0``)."""
    return bool(module.training and module.p > 0)


def flops_dropout(module: nn.modules.dropout._DropoutNd, inputs, out=None) -> int:
    """0 when inactive; ``Nx`` in training (``2·Nx`` for the alpha variants)."""
    if not dropout_active(module):
        return 0
    n = numel(input_tensor(inputs, module))
    return 2 * n if isinstance(module, _ALPHA) else n


def macs_dropout(module: nn.Module, x=None, y=None, *, inputs=None) -> int:
    """0."""
    return 0


def dmas_dropout(module: nn.modules.dropout._DropoutNd, x, y, *, inputs=None) -> int:
    """0 when inactive (elided identity); ``Nx + 1 + (0 if inplace else Ny)`` in training."""
    if not dropout_active(module):
        return 0
    return numel(x) + 1 + (0 if module.inplace else numel(y))


rf_dropout = rf_pointwise

FAMILIES = [Family("dropout", (nn.modules.dropout._DropoutNd,), flops_dropout, macs_dropout, dmas_dropout, rf_dropout)]

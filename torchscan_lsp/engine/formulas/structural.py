"""Modules that only move or relabel data: ``Identity``, an empty ``nn.Sequential`` (the usual
identity shortcut of a residual block, which returns its input as ``Identity`` does), ``Flatten``,
``Unflatten`` and the padding modules (``ConstantPad*``/``ZeroPad*``, ``ReflectionPad*``,
``ReplicationPad*``, ``CircularPad*``).

* FLOPs and MACs: 0.
* DMAs: ``Identity`` (and the empty ``Sequential``) ``Nx`` and ``Flatten`` ``2·Nx`` (the reference contract's, kept); ``Unflatten``
  as ``Flatten``. Constant padding reads the input and writes the output, ``Nx + Ny``; reflection,
  replication and circular padding fill every output element from an input element, ``2·Ny``.
* Receptive field: ``(1.0, 1.0, 0.0)`` for Identity/Flatten/Unflatten (reference); a padding module
  is a 1-wide window with stride 1 and the padding it adds *before* the first spatial axis
  (``padding[2·(nd − 1)]`` in PyTorch's last-axis-first padding tuple), e.g. ``ZeroPad2d((1, 1, 2,
  2))`` → ``(1, 1, 2)``. Negative padding (cropping) stays negative.
"""

from __future__ import annotations

from torch import nn

from ._common import numel, rf_pointwise
from ._registry import Family

__all__ = [
    "dmas_flatten",
    "dmas_identity",
    "dmas_padding",
    "flops_zero",
    "macs_zero",
    "match_empty_sequential",
    "rf_identity",
    "rf_padding",
]

_padding = nn.modules.padding
_PAD_TYPES = tuple(
    cls
    for cls in (
        getattr(_padding, "_ConstantPadNd", None),
        getattr(_padding, "_ReflectionPadNd", None),
        getattr(_padding, "_ReplicationPadNd", None),
        getattr(_padding, "_CircularPadNd", None),
    )
    if cls is not None
)
_CONSTANT_PAD = getattr(_padding, "_ConstantPadNd", ())


def flops_zero(module: nn.Module, inputs=None, out=None) -> int:
    """0."""
    return 0


def macs_zero(module: nn.Module, x=None, y=None, *, inputs=None) -> int:
    """0."""
    return 0


def dmas_identity(module: nn.Module, x, y, *, inputs=None) -> int:
    """``Nx`` (reference)."""
    return numel(x)


def dmas_flatten(module: nn.Module, x, y, *, inputs=None) -> int:
    """``2·Nx`` (reference)."""
    return 2 * numel(x)


def dmas_padding(module: nn.Module, x, y, *, inputs=None) -> int:
    """Constant padding ``Nx + Ny``; reflection/replication/circular ``2·Ny``."""
    if isinstance(module, _CONSTANT_PAD):
        return numel(x) + numel(y)
    return 2 * numel(y)


rf_identity = rf_pointwise


def match_empty_sequential(module: nn.Module) -> bool:
    """An ``nn.Sequential`` (or a subclass that keeps its ``forward``) without modules: its forward
    returns its input unchanged. A non-empty one is a container, never measured by a formula."""
    return (isinstance(module, nn.Sequential) and not module._modules
            and type(module).forward is nn.Sequential.forward)


def rf_padding(module: nn.Module, x=None, y=None) -> tuple[int, int, int]:
    """``(1, 1, padding before the first spatial axis)``."""
    padding = tuple(module.padding)
    spatial = len(padding) // 2
    return 1, 1, padding[2 * (spatial - 1)]


FAMILIES = [
    Family("identity", (nn.Identity,), flops_zero, macs_zero, dmas_identity, rf_identity),
    Family("flatten", (nn.Flatten, nn.Unflatten), flops_zero, macs_zero, dmas_flatten, rf_identity),
    Family("padding", _PAD_TYPES, flops_zero, macs_zero, dmas_padding, rf_padding),
    # by its instance (an empty one), so after every family matched by type alone
    Family("empty_sequential", (), flops_zero, macs_zero, dmas_identity, rf_identity, match=match_empty_sequential),
]

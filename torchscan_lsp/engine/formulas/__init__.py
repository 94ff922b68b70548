"""Module formulas: FLOPs, MACs, DMAs and module-local receptive field of one module call.

Public dispatchers (the contract of ``torchscan.modules``; docs/formulas.md):

``module_flops(module, inputs, out) -> int``
    ``inputs`` is the call's ordered inputs (bound to ``forward``'s signature); ``out`` is the whole
    output for ``nn.MultiheadAttention`` and recurrent modules and the first output tensor
    otherwise. Either form is accepted for every module: a lone tensor for ``inputs``, a tuple for
    ``out``.
``module_macs(module, x, y, *, inputs=None) -> int`` and ``module_dmas(module, x, y, *, inputs=None) -> int``
    ``x`` the first input tensor, ``y`` the first output tensor. ``inputs=`` (optional, the ordered
    inputs) lets a formula see more than ``x``: MultiheadAttention's key, value, masks and
    ``need_weights``; the decoder layer's and decoder stack's memory (required there); an
    EmbeddingBag's offsets and per-sample weights; a recurrent layer's ``PackedSequence``. Each
    family's docstring says what it assumes without it.
``module_rf(module, x, y) -> (rf, stride, padding)``
    The module-local kernel extent (dilation included), stride and padding along the first spatial
    axis, in input elements. Transposed convolutions give a fractional stride ``1/s`` and
    ``padding="same"`` its numeric padding; the field is never negative and never a string (see
    ``conv.rf_convtransposend``). Point-wise modules give ``(1.0, 1.0, 0.0)``.

Unsupported module: ``UserWarning("Module type not supported: <ClassName>")`` and 0 (RF:
``(1.0, 1.0, 0.0)``). A formula that cannot compute raises (``NotImplementedError`` or
``ValueError`` with the reason); a count that is only a lower bound warns with its own text; a module
without a spatial receptive field (attention, Transformer, recurrent sequence layers, EmbeddingBag)
warns ``Receptive field is not defined for <ClassName>: ...``.

Formulas read shapes and attributes only and compute with Python ints, so the operator counter that
observes the same forward pass sees none of their work. A call on complex tensors is counted in real
arithmetic (``complex_calls``): a complex multiplication 6 FLOPs, a complex addition 2.

Dispatch is a small ordered registry (``REGISTRY``): the first family whose classes the module is an
instance of wins; classes of model libraries, which the engine does not import, are matched last, by
structure (``library``). ``docs/formulas.md`` tabulates every family's formulas and their sources.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence

from . import activation, attention, conv, dropout, embedding, library, linear, norm, pooling, recurrent, resample
from . import structural, transformer
from ._common import POINTWISE_RF, ShapeOnly, as_inputs, first_tensor, num_params, unsupported
from .complex_calls import complex_call, complex_flops, complex_macs
from ._registry import Family, Registry

#: The family modules, once, in dispatch order: within ``conv`` the transposed family precedes the
#: direct one; the third-party families (``library``, matched by structure) come last, so that a
#: subclass of a torch module keeps its torch formula.
FAMILY_MODULES = (transformer, attention, recurrent, conv, linear, norm, pooling, activation, dropout, embedding,
                  resample, structural, library)

#: The families in dispatch order.
REGISTRY = Registry(family for module in FAMILY_MODULES for family in module.FAMILIES)

# Every family module's public formulas are this package's too (``formulas.flops_linear``).
globals().update({name: getattr(module, name) for module in FAMILY_MODULES for name in module.__all__})

__all__ = [
    "FAMILY_MODULES",
    "Family",
    "POINTWISE_RF",
    "REGISTRY",
    "Registry",
    "ShapeOnly",
    "family_of",
    "first_tensor",
    "module_dmas",
    "module_flops",
    "module_macs",
    "module_rf",
    "num_params",
    *(name for module in FAMILY_MODULES for name in module.__all__),
]


def family_of(module: nn.Module) -> Family | None:
    """The formula family that covers ``module`` (None when unsupported)."""
    return REGISTRY.lookup(module)


def _tensor_args(x: Any, y: Any, inputs: Any) -> tuple[Any, Any, tuple | None]:
    """Accept a tensor, a container of tensors or a PackedSequence for ``x``/``y``."""
    if inputs is None and not isinstance(x, (torch.Tensor, ShapeOnly)):
        inputs = (x,) if isinstance(x, PackedSequence) else as_inputs(x)
    elif inputs is not None:
        inputs = as_inputs(inputs)
    return first_tensor(x), first_tensor(y), inputs


def module_flops(module: nn.Module, inputs: Any, out: Any) -> int:
    """FLOPs of one call of ``module`` (0 with a warning when unsupported)."""
    family = REGISTRY.lookup(module)
    if family is None:
        return unsupported(module)
    flops = int(family.flops(module, as_inputs(inputs), out))
    if not complex_call(module, inputs, out):
        return flops
    x, y, _ = _tensor_args(inputs, out, inputs)
    return complex_flops(family.name, module, flops, int(family.macs(module, x, y, inputs=as_inputs(inputs))), x, y)


def module_macs(module: nn.Module, x: Any, y: Any, *, inputs: Any = None) -> int:
    """Multiply-accumulates of one call of ``module`` (0 with a warning when unsupported)."""
    family = REGISTRY.lookup(module)
    if family is None:
        return unsupported(module)
    x, y, inputs = _tensor_args(x, y, inputs)
    macs = int(family.macs(module, x, y, inputs=inputs))
    return complex_macs(family.name, module, macs) if complex_call(module, x, y) else macs


def module_dmas(module: nn.Module, x: Any, y: Any, *, inputs: Any = None) -> int:
    """Logical element reads and writes of one call of ``module`` (0 with a warning when unsupported)."""
    family = REGISTRY.lookup(module)
    if family is None:
        return unsupported(module)
    x, y, inputs = _tensor_args(x, y, inputs)
    return int(family.dmas(module, x, y, inputs=inputs))


def module_rf(module: nn.Module, x: Any, y: Any) -> tuple:
    """Module-local ``(receptive field, stride, padding)`` (``(1.0, 1.0, 0.0)`` with a warning when
    unsupported)."""
    family = REGISTRY.lookup(module)
    if family is None:
        unsupported(module)
        return POINTWISE_RF
    return family.rf(module, first_tensor(x), first_tensor(y))

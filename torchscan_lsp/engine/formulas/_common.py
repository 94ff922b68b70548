"""Helpers shared by the formula families.

Every formula works on *shapes* and module attributes with Python ints. Nothing here calls a tensor
operation: ``t.shape`` is metadata, so the operator counter that runs around the same forward pass
never sees formula work (docs/formulas.md, "Conventions"). A formula may also be handed a :class:`ShapeOnly`
stand-in (the Transformer formulas compose the attention, linear and norm formulas that way).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from torchscan_lsp.engine.type_names import type_name

__all__ = [
    "POINTWISE_RF",
    "ShapeOnly",
    "arg",
    "as_inputs",
    "first_tensor",
    "input_tensor",
    "lower_bound",
    "num_params",
    "numel",
    "output_tensor",
    "rf_pointwise",
    "rf_undefined",
    "NotApplicableWarning",
    "shape",
    "unsupported",
]

#: Receptive field of a module that maps each position to the same position: (rf, stride, padding).
POINTWISE_RF: tuple[float, float, float] = (1.0, 1.0, 0.0)


class ShapeOnly:
    """A stand-in that carries only a shape (for composing sub-formulas without tensors)."""

    __slots__ = ("shape",)

    def __init__(self, dims) -> None:
        self.shape = tuple(int(d) for d in dims)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"ShapeOnly({self.shape})"


def shape(t) -> tuple[int, ...]:
    """The shape of a tensor (or :class:`ShapeOnly`) as a tuple of Python ints."""
    size = t.shape
    return tuple(size) if type(size) is torch.Size else tuple(int(d) for d in size)


def numel(t) -> int:
    """Number of elements, from the shape (no tensor call)."""
    size = t.shape
    return math.prod(size) if type(size) is torch.Size else math.prod(int(d) for d in size)


def first_tensor(value: Any):
    """Depth-first first tensor in ``value`` (tuples, lists, named tuples, mapping values), or None.

    A ``PackedSequence`` is a named tuple, so its ``data`` tensor is found first.
    """
    if isinstance(value, (torch.Tensor, ShapeOnly)):
        return value
    if isinstance(value, Mapping):
        value = value.values()
    elif not isinstance(value, (tuple, list)):
        return None
    for item in value:
        found = first_tensor(item)
        if found is not None:
            return found
    return None


def as_inputs(inputs: Any) -> tuple:
    """The ordered inputs as a tuple; a lone tensor becomes a 1-tuple (robustness)."""
    if inputs is None:
        return ()
    if isinstance(inputs, tuple) and not hasattr(inputs, "_fields"):
        return inputs
    if isinstance(inputs, list):
        return tuple(inputs)
    if isinstance(inputs, Mapping):
        return tuple(inputs.values())
    return (inputs,)


def arg(inputs: tuple, index: int, default: Any = None) -> Any:
    """``inputs[index]`` when the call provided it, else ``default``."""
    return inputs[index] if len(inputs) > index else default


def input_tensor(inputs: Any, module: nn.Module | None = None):
    """First input tensor of a call; raises a clear error when there is none."""
    x = first_tensor(as_inputs(inputs))
    if x is None:
        name = type(module).__name__ if module is not None else "module"
        raise ValueError(f"{name} formula needs an input tensor, got none.")
    return x


def output_tensor(out: Any, module: nn.Module | None = None):
    """First output tensor (``out`` may be the whole output or already its first tensor)."""
    y = first_tensor(out)
    if y is None:
        name = type(module).__name__ if module is not None else "module"
        raise ValueError(f"{name} formula needs an output tensor, got none.")
    return y


def num_params(module: nn.Module) -> int:
    """Total parameter elements of ``module``, recursively, each tensor once (``P`` in
    docs/formulas.md): what ``sum(p.numel() for p in module.parameters())`` gives."""
    if module._modules:
        return sum(numel(p) for p in module.parameters())
    # A leaf (the formulas' usual case, once per call): its own table, without the generator chain
    # and the memo set of ``parameters()``; a tensor registered under two names counts once.
    own = [p for p in module._parameters.values() if p is not None]
    if len(own) > 1 and len({id(p) for p in own}) < len(own):
        own = list({id(p): p for p in own}.values())
    return sum(numel(p) for p in own)


def unsupported(module: nn.Module) -> int:
    """Warn with the contract's text and return 0.

    The class is named so that it never reads like a ``torch.nn`` namesake: a class outside torch by
    its module-qualified name (``examples.gpt.LayerNorm``, a model's own norm), a class of PyTorch's
    quantization namespaces in full, any other torch class by its name. A subclass of a torch layer
    that replaces its ``forward`` says so: the layer's formula would count what it no longer runs.
    """
    cls = type(module)
    where = getattr(cls, "__module__", "") or ""
    if _in_torch(cls):
        name = type_name(cls)
    else:
        name = f"{where}.{cls.__qualname__.rpartition('<locals>.')[2]}" if where else cls.__qualname__
    replaced = next((k for k in cls.__mro__[1:] if k is not nn.Module and _in_torch(k) and "forward" in vars(k)), None)
    if replaced is not None and not _in_torch(cls):
        name += (f" (its forward replaces {type_name(replaced)}'s, so the {type_name(replaced)} formula does "
                 "not describe what it computes)")
    warnings.warn(f"Module type not supported: {name}", UserWarning, stacklevel=3)
    return 0


def _in_torch(cls: type) -> bool:
    where = getattr(cls, "__module__", "") or ""
    return where == "torch" or where.startswith("torch.")


def lower_bound(message: str) -> None:
    """Warn that a returned count is only a lower bound (the crawler then reports it ``partial``)."""
    warnings.warn(message, UserWarning, stacklevel=3)


def rf_pointwise(module: nn.Module, x=None, y=None) -> tuple[float, float, float]:
    """Receptive field of a module whose output position depends on the same input position only."""
    return POINTWISE_RF


class NotApplicableWarning(UserWarning):
    """A metric does not apply to a module (a spatial receptive field for attention): the crawler
    reports it unavailable with a ``metric_not_applicable`` diagnostic, which strict mode accepts."""


def rf_undefined(module: nn.Module, reason: str) -> tuple[float, float, float]:
    """Warn that a spatial receptive field does not describe ``module`` (the crawler reports it
    unavailable, as not applicable) and return the neutral triple."""
    warnings.warn(
        f"Receptive field is not defined for {type(module).__name__}: {reason}",
        NotApplicableWarning,
        stacklevel=4,
    )
    return POINTWISE_RF

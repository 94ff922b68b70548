"""Registry and shape helpers shared by the operator formula families.

A formula follows ``torch.utils.flop_counter.FlopCounterMode``'s contract: it is called as
``formula(*args, out_shape=..., **kwargs)`` with every tensor in ``args``/``kwargs`` replaced by its
``torch.Size`` (PyTorch's ``shape_wrapper`` does this), and returns a number of FLOPs. A formula whose
``_get_raw`` attribute is true receives the real arguments and ``out_val=`` instead (used for the
fused Transformer kernels, whose inputs may be nested tensors without a regular shape).

Formulas never run tensor code and never raise on an argument layout they do not know: a missing
optional argument takes its schema default.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

aten = torch.ops.aten

#: packet -> formula, filled by the family modules at import time.
REGISTRY: dict[Any, Callable[..., int]] = {}
#: packet name ("aten.relu") -> family module name, for the documentation and the tests.
FAMILY: dict[str, str] = {}
#: packets whose PyTorch formula is wrong and which this project's formula replaces.
CORRECTIONS: set[Any] = set()

Shape = torch.Size


def packets(names: Sequence[str]) -> list[Any]:
    """Operator packets for ``names`` that exist in the installed torch (others are skipped)."""
    found = []
    for name in names:
        packet = getattr(aten, name, None)
        if packet is not None:
            found.append(packet)
    return found


def register(
    *names: str, family: str | None = None, corrects_pytorch: bool = False
) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """Register a formula for the packets ``aten.<name>`` (names absent from this torch are skipped).

    ``corrects_pytorch``: PyTorch has a formula for these packets, and it is wrong; ours replaces it
    (its docstring must say what PyTorch gets wrong).
    """

    def deco(fn: Callable[..., int]) -> Callable[..., int]:
        fam = family or fn.__module__.rsplit(".", 1)[-1]
        for packet in packets(names):
            if packet in REGISTRY:
                raise RuntimeError(f"duplicate operator formula for {packet}")
            REGISTRY[packet] = fn
            FAMILY[str(packet)] = fam
            if corrects_pytorch:
                CORRECTIONS.add(packet)
        return fn

    return deco


def describe(formula: Callable[..., int], name: str, doc: str) -> Callable[..., int]:
    """Give a formula made by a factory its name (``max_pool2d_flop``) and its docstring (the
    formula and its source: the contract tests read every registered formula's docstring)."""
    formula.__doc__ = doc
    formula.__name__ = formula.__qualname__ = name
    return formula


def per_element(count: int, names: tuple[str, ...], definition: str, *, family: str, source: str) -> None:
    """Register, for the operators ``names``, the formula ``count`` FLOPs per output element
    (``definition`` says which operations; ``source`` where the definition comes from)."""

    def formula(*args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        return count * out_numel(out_shape)

    doc = f"{count} FLOP(s) per output element: {definition}. Source: {source}."
    register(*names, family=family)(describe(formula, f"{names[0]}_flop", doc))


def numel(shape: Any) -> int:
    """Number of elements of a ``torch.Size`` (or of the first shape in a tuple of outputs)."""
    if isinstance(shape, torch.Size):
        return math.prod(shape)
    if isinstance(shape, (tuple, list)) and shape:
        return numel(shape[0])
    return 0


def is_shape(x: Any) -> bool:
    return isinstance(x, torch.Size)


def arg(args: Sequence[Any], kwargs: dict[str, Any], index: int, name: str, default: Any = None) -> Any:
    """Argument ``name`` of an aten call, passed positionally at ``index`` or by keyword."""
    if index < len(args):
        return args[index]
    return kwargs.get(name, default)


def first_shape(out_shape: Any) -> torch.Size | None:
    """The shape of the (first) output."""
    if isinstance(out_shape, torch.Size):
        return out_shape
    if isinstance(out_shape, (tuple, list)):
        for item in out_shape:
            found = first_shape(item)
            if found is not None:
                return found
    return None


def out_numel(out_shape: Any) -> int:
    shape = first_shape(out_shape)
    return math.prod(shape) if shape is not None else 0


def expand_ints(value: Any, ndim: int, default: int | None = None) -> list[int]:
    """An ``int[n]`` schema argument (an int, or a list of 1 or ``ndim`` ints) as ``ndim`` ints."""
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
        if default is None:
            return []
        return [default] * ndim
    if isinstance(value, int):
        return [value] * ndim
    values = [int(v) for v in value]
    if len(values) == 1:
        return values * ndim
    return values

"""The ordered registry that maps a module to its formula family.

Dispatch is by ``isinstance`` in registration order, and the first match wins, so a subclass must
be registered before its base (``_ConvTransposeNd`` before ``_ConvNd``; ``ReLU6`` before ``Hardtanh``
inside the activation table). ``tests/engine/formulas/test_formulas_dispatch.py`` checks that no
entry is shadowed by an earlier one. Look-ups are cached per class, so the per-call cost is one
dictionary access.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from torch import nn

FlopsFn = Callable[[nn.Module, tuple, Any], int]
#: ``fn(module, x, y, *, inputs=None)``
TensorFn = Callable[..., int]
RfFn = Callable[[nn.Module, Any, Any], tuple]


@dataclass(frozen=True)
class Family:
    """One formula family: the classes it covers and its four formulas."""

    name: str
    types: tuple[type, ...]
    flops: FlopsFn
    macs: TensorFn
    dmas: TensorFn
    rf: RfFn


class Registry:
    """An ordered list of families with a per-class look-up cache."""

    def __init__(self, families: Iterable[Family]) -> None:
        self.families: tuple[Family, ...] = tuple(families)
        self._cache: dict[type, Family | None] = {}

    def lookup(self, module: nn.Module) -> Family | None:
        cls = type(module)
        try:
            return self._cache[cls]
        except KeyError:
            pass
        family = next((f for f in self.families if issubclass(cls, f.types)), None)
        self._cache[cls] = family
        return family

    def __iter__(self):
        return iter(self.families)

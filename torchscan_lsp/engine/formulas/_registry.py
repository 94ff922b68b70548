"""The ordered registry that maps a module to its formula family.

Dispatch is by ``isinstance`` in registration order, and the first match wins, so a subclass must
be registered before its base (``_ConvTransposeNd`` before ``_ConvNd``; ``ReLU6`` before ``Hardtanh``
inside the activation table). ``tests/engine/formulas/test_formulas_dispatch.py`` checks that no
entry is shadowed by an earlier one. Look-ups are cached per class, so the per-call cost is one
dictionary access.

A family for classes the engine cannot import (third-party modules, ``formulas/library.py``) has no
``types`` and a ``match(module)`` predicate instead: structural duck typing on the instance. Such
families come after every type-based one, so a subclass of a torch module keeps its torch formula,
unless it computes otherwise: a subclass whose ``forward`` is written outside torch (loralib's
``Linear`` adding its low-rank product, a ``Conv2d`` that pads first) is covered by no type-based
family (:func:`overridden_forward`), since what its formula counts is not what it runs. The class cache then holds the ordered structural candidates, and only those predicates run per call
(the instance decides: two instances of one class may differ, e.g. with and without a weight).
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
    """One formula family: the classes it covers (or a structural ``match``) and its four formulas."""

    name: str
    types: tuple[type, ...]
    flops: FlopsFn
    macs: TensorFn
    dmas: TensorFn
    rf: RfFn
    #: for classes the engine does not import: True when this family covers the module (a module
    #: that is an instance of ``types`` is covered whatever ``match`` says)
    match: Callable[[nn.Module], bool] | None = None
    #: for a subclass of ``types`` whose ``forward`` is written outside torch: True when these
    #: formulas describe that ``forward`` too (transformers' scaled embeddings); without it no such
    #: subclass is covered (:func:`overridden_forward`)
    covers_forward: Callable[[type], bool] | None = None


def _torch_class(cls: type) -> bool:
    where = getattr(cls, "__module__", "") or ""
    return where == "torch" or where.startswith("torch.")


def overridden_forward(cls: type, types: tuple[type, ...]) -> type | None:
    """The class outside torch that defines the ``forward`` a subclass ``cls`` of ``types`` runs, in
    place of the torch class's own; ``None`` when ``cls`` runs a torch class's ``forward`` (its own,
    inherited or through ``parametrize``'s generated subclass, which defines none)."""
    if not issubclass(cls, types):
        return None
    owner = next((k for k in cls.__mro__ if "forward" in vars(k)), None)
    return None if owner is None or _torch_class(owner) else owner


class Registry:
    """An ordered list of families with a per-class look-up cache."""

    def __init__(self, families: Iterable[Family]) -> None:
        self.families: tuple[Family, ...] = tuple(families)
        self._cache: dict[type, Family | tuple[Family, ...] | None] = {}

    def _candidates(self, cls: type) -> Family | tuple[Family, ...] | None:
        """The family ``cls`` resolves to by type, or the structural families to ask, in order."""
        structural: list[Family] = []
        for family in self.families:
            if issubclass(cls, family.types):
                if overridden_forward(cls, family.types) is not None and not (
                        family.covers_forward is not None and family.covers_forward(cls)):
                    continue
                if not structural:
                    return family
                structural.append(family)
                break
            if family.match is not None:
                structural.append(family)
        return tuple(structural) or None

    def lookup(self, module: nn.Module) -> Family | None:
        cls = type(module)
        try:
            entry = self._cache[cls]
        except KeyError:
            entry = self._cache[cls] = self._candidates(cls)
        if entry is None or isinstance(entry, Family):
            return entry
        # a family in the candidates either matched by type (always last) or has a predicate
        return next((f for f in entry if issubclass(cls, f.types) or f.match(module)), None)

    def __iter__(self):
        return iter(self.families)

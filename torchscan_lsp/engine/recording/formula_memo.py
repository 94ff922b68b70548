"""Module-formula results shared by calls that the formulas cannot tell apart.

A model repeats its layers: 40 identical residual blocks, 12 transformer layers, the same
``Conv2d``/``BatchNorm2d`` pair at every stage. The module formulas (:mod:`..formulas`) read a
module's type, its own attributes (hyperparameters, the shapes and dtypes of its parameters and
buffers, ``training``) and the shapes and dtypes of the call's inputs and output, never a tensor's
values. Two calls equal in all of these get the same FLOPs, MACs, DMAs and module-local receptive
field, so one evaluation serves both; on a model of many small modules the formulas are otherwise a
third of what the analysis costs (``benchmarks/engine_overhead.py --models blocks``).

The key is built only from things known to be safe to compare: numbers, strings, dtypes, devices,
functions and classes (by identity), tensors (by type, shape, dtype and layout) and tuples, lists
and mappings of these. A call with anything else in its module's attributes or its values (a
configuration object, a cache), or a module with children (whose formula may read them), gets no
key and is evaluated as before. Only results that were complete and quiet (no warning, no
diagnostic) are kept, so a diagnostic always names the call that raised it.
"""

from __future__ import annotations

import enum
import types
from collections import OrderedDict
from typing import Any, Hashable

import torch
from torch import nn

__all__ = ["FormulaMemo"]

#: ``nn.Module``'s own bookkeeping attributes (hooks, registries, flags): not hyperparameters.
#: ``training`` is one the formulas read (dropout, batch norm), so it stays in the key.
_MODULE_STATE = frozenset(nn.Module().__dict__) - {"training", "_parameters", "_buffers"}
#: The values most attributes hold, taken as they are without a call.
_PLAIN = frozenset({int, float, bool, str, type(None)})
_SEQUENCES = frozenset({tuple, list, torch.Size})
_MAPPINGS = frozenset({dict, OrderedDict})
_ATOMS = (int, float, bool, str, bytes, type(None), complex, torch.dtype, torch.device, torch.layout,
          torch.memory_format, enum.Enum, type, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


class _NoKey(Exception):
    """A value the key cannot safely stand for."""


def _key(value: Any) -> Hashable:
    """A hashable stand-in equal for two values the formulas cannot tell apart.

    Raises:
        _NoKey: for a value of any other kind (its formula result is not shared).
    """
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind in _SEQUENCES:
        return (kind, *[item if type(item) in _PLAIN else _key(item) for item in value])
    if kind in _MAPPINGS:  # a module's parameters and buffers among them
        return (kind, *[(name, _key(item)) for name, item in value.items()])
    if isinstance(value, torch.Tensor):
        return (kind, value.shape, value.dtype, value.layout)
    if isinstance(value, _ATOMS):
        return value
    if isinstance(value, (tuple, list)):  # a named tuple (a PackedSequence among them)
        return (kind, *map(_key, value))
    if isinstance(value, dict):
        return (kind, *((name, _key(item)) for name, item in value.items()))
    raise _NoKey


class FormulaMemo:
    """Module-formula metrics of the calls seen so far in one pass, by what the formulas read.

    ``key`` gives a call's key (None when it has none); ``get`` the metrics stored under it (fresh
    copies, the record's own) or None; ``put`` stores a call's quiet, complete metrics.
    """

    def __init__(self) -> None:
        self._results: dict[Hashable, tuple[tuple[str, dict[str, Any]], ...]] = {}

    @staticmethod
    def key(module: nn.Module, inputs: tuple, output: Any) -> Hashable | None:
        """The key of a call of ``module`` on ``inputs`` (forward order) returning ``output``."""
        state = module.__dict__
        if state["_modules"]:
            return None
        parts: list[Hashable] = [type(module)]
        append, plain, skip = parts.append, _PLAIN, _MODULE_STATE
        try:
            for name, item in state.items():
                if name not in skip:
                    append(name)
                    append(item if type(item) in plain else _key(item))
            append(_key(inputs))
            append(_key(output))
        except _NoKey:
            return None
        return tuple(parts)

    def get(self, key: Hashable) -> dict[str, dict[str, Any]] | None:
        """Copies of the metrics stored under ``key``, or None."""
        try:
            stored = self._results.get(key)
        except TypeError:  # a bound method of an unhashable object among the attributes
            return None
        if stored is None:
            return None
        return {name: dict(metric) for name, metric in stored}

    def put(self, key: Hashable, metrics: dict[str, dict[str, Any]], names: tuple[str, ...]) -> None:
        """Keep ``metrics[name]`` for each of ``names`` when every one is complete."""
        if all(metrics[name]["status"] == "complete" for name in names):
            try:
                self._results[key] = tuple((name, dict(metrics[name])) for name in names)
            except TypeError:  # unhashable after all (see ``get``): this call is not shared
                pass

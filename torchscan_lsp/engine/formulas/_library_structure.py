"""Matching modules of libraries the engine does not import, by structure: the names a class's
``forward`` refers to, its own parameters, whether it has children, and its module path
(``formulas/library.py`` explains why this is enough)."""

from __future__ import annotations

import inspect
import numbers
from functools import lru_cache

from torch import nn

from ._common import shape

__all__ = ["forward_facts", "is_leaf", "own_parameters", "module_path", "from_package", "parameterless_leaf",
           "is_real"]


@lru_cache(maxsize=None)
def forward_facts(cls: type) -> tuple[frozenset[str], tuple[str, ...]]:
    """(names ``forward`` refers to, its positional parameter names), decorators unwrapped."""
    forward = inspect.unwrap(cls.forward)
    code = getattr(forward, "__code__", None)
    if code is None:
        return frozenset(), ()
    try:
        params = inspect.signature(forward).parameters.values()
    except (TypeError, ValueError):
        return frozenset(code.co_names), ()
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return frozenset(code.co_names), tuple(p.name for p in params if p.kind in positional)


def is_leaf(module: nn.Module) -> bool:
    """Whether ``module`` has no children."""
    return next(module.children(), None) is None


def own_parameters(module: nn.Module) -> dict[str, tuple[int, ...]]:
    """The shapes of ``module``'s own parameters (not its children's), by name."""
    return {name: shape(p) for name, p in module.named_parameters(recurse=False)}


def module_path(module: nn.Module) -> str:
    """The module path of ``module``'s class (``timm.layers.drop``)."""
    return getattr(type(module), "__module__", "") or ""


def from_package(module: nn.Module, package: str) -> bool:
    """Whether ``module``'s class is defined in ``package`` or below it."""
    path = module_path(module)
    return path == package or path.startswith(package + ".")


def parameterless_leaf(module: nn.Module) -> bool:
    """Whether ``module`` has neither children nor parameters of its own."""
    return is_leaf(module) and next(module.parameters(recurse=False), None) is None


def is_real(value) -> bool:
    """Whether ``value`` is a real number (a bool is not)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)

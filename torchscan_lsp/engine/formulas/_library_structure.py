"""Matching modules of libraries the engine does not import, by structure: the names a class's
``forward`` refers to, its own parameters, whether it has children, and its module path
(``formulas/library.py`` explains why this is enough)."""

from __future__ import annotations

import dis
import inspect
import numbers
from functools import lru_cache

from torch import nn

from ._common import shape

__all__ = ["forward_facts", "forward_names", "adds_constant_to", "binary_operators", "uses_matmul", "is_leaf",
           "own_parameters", "module_path", "from_package", "parameterless_leaf", "is_real"]


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


def _own_method(cls: type, name: str):
    """``cls.name`` when it is a plain function of the model's class (``self._norm``), not one that
    ``nn.Module`` defines, else None."""
    if hasattr(nn.Module, name):
        return None
    function = inspect.getattr_static(cls, name, None)
    return inspect.unwrap(function) if inspect.isfunction(function) else None


@lru_cache(maxsize=None)
def _codes(cls: type) -> tuple:
    """The code of ``forward`` and of every method of ``cls`` it calls on ``self``, transitively
    (``GemmaRMSNorm.forward`` calls ``self._norm``): what the call runs, as far as names tell."""
    forward = inspect.unwrap(cls.forward)
    first = getattr(forward, "__code__", None)
    codes, pending, seen = [], [first] if first is not None else [], set()
    while pending:
        code = pending.pop()
        codes.append(code)
        for name in code.co_names:
            method = _own_method(cls, name)
            if method is not None and name not in seen and hasattr(method, "__code__"):
                seen.add(name)
                pending.append(method.__code__)
    return tuple(codes)


@lru_cache(maxsize=None)
def forward_names(cls: type) -> frozenset[str]:
    """The names ``forward`` and the class's own methods it calls refer to, those methods' names
    left out (they are resolved into what they refer to)."""
    names = set().union(*(code.co_names for code in _codes(cls))) if _codes(cls) else set()
    return frozenset(name for name in names if _own_method(cls, name) is None)


@lru_cache(maxsize=None)
def adds_constant_to(cls: type, attribute: str, constant: float = 1.0) -> bool:
    """Whether ``forward`` (or a method it calls) adds ``constant`` to ``self.<attribute>``: an
    addition whose operands, within the few instructions before it, are that constant and that
    attribute (``1.0 + self.weight.float()``, Gemma's offset weight)."""
    for code in _codes(cls):
        window: list[dis.Instruction] = []
        for instruction in dis.get_instructions(code):
            if instruction.opname == "BINARY_OP" and instruction.argrepr in ("+", "+="):
                constant_seen = any(i.opname == "LOAD_CONST" and isinstance(i.argval, (int, float))
                                    and not isinstance(i.argval, bool) and i.argval == constant for i in window)
                attribute_seen = any(i.opname in ("LOAD_ATTR", "LOAD_METHOD") and i.argval == attribute for i in window)
                if constant_seen and attribute_seen:
                    return True
            window = [*window[-7:], instruction]
    return False


@lru_cache(maxsize=None)
def binary_operators(cls: type) -> tuple[str, ...]:
    """The binary operators (``+``, ``*``, ``-``, ``@``, ...) ``forward`` and the methods it calls
    apply, in bytecode order: what names cannot tell (a mean subtraction, an added constant)."""
    return tuple(i.argrepr for code in _codes(cls) for i in dis.get_instructions(code) if i.opname == "BINARY_OP")


@lru_cache(maxsize=None)
def uses_matmul(cls: type) -> bool:
    """Whether ``forward`` (or a method it calls) multiplies matrices: the ``@`` operator, or
    ``matmul``/``bmm``/``mm`` by name."""
    for code in _codes(cls):
        if {"matmul", "bmm", "mm", "einsum"} & set(code.co_names):
            return True
        if any(i.opname == "BINARY_OP" and i.argrepr in ("@", "@=") for i in dis.get_instructions(code)):
            return True
    return False


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

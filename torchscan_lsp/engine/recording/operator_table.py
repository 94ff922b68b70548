"""The engine's one operator formula table: FLOPs and MACs per dispatched operator.

FLOPs: PyTorch's ``torch.utils.flop_counter`` registry, under this project's
``operator_formulas.DEFAULT_FORMULAS`` and ``DECOMPOSITION_GUARDS`` (operators PyTorch leaves
uncounted), under the caller's ``custom_mapping``. MACs: ``operator_formulas.MAC_FORMULAS`` (the
matrix, convolution, attention and recurrent products; every other counted operator has 0).

Formulas follow ``FlopCounterMode``'s contract and are compiled once into ``call(args, kwargs, out)``
functions that read shapes without pytree traversals. Operators without a formula that do no
arithmetic by definition (views, copies, allocation) are on the ignore list, with their reasons.
Everything that counts operators — the crawl's
counter, ``measure_flops``, and through them the pass's observers — reads this table.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.utils import flop_counter as _fc
from torch.utils._pytree import tree_map

__all__ = [
    "Formula", "IGNORED_OPERATORS", "REFERENCE_IGNORED", "compile_formula", "default_mapping", "flop_table",
    "mac_table", "validate_mapping",
]  # fmt: skip

_VIEW = "Metadata-only tensor view."
_MOVE = "Data movement is excluded from FLOPs."
_ALLOC = "Tensor allocation is excluded from FLOPs."
_CREATE = "Tensor creation is excluded from FLOPs."

#: The reference's ignore list: operators that do no arithmetic, with the reason they are excluded.
REFERENCE_IGNORED: dict[str, str] = {
    **dict.fromkeys(
        (
            "aten._unsafe_view", "aten.alias", "aten.as_strided", "aten.detach", "aten.expand",
            "aten.narrow", "aten.permute", "aten.select", "aten.slice", "aten.squeeze", "aten.t",
            "aten.transpose", "aten.unbind", "aten.unsqueeze", "aten.view",
        ),
        _VIEW,
    ),
    **dict.fromkeys(
        ("aten._to_copy", "aten.cat", "aten.clone", "aten.contiguous", "aten.copy_", "aten.split", "aten.to"),
        _MOVE,
    ),
    **dict.fromkeys(("aten.empty", "aten.empty_strided"), _ALLOC),
    **dict.fromkeys(
        ("aten.full", "aten.lift_fresh", "aten.lift_fresh_copy", "aten.ones", "aten.scalar_tensor", "aten.zeros"),
        _CREATE,
    ),
}


def _extra_ignored() -> dict[str, str]:
    from torchscan_lsp.engine import operator_formulas

    return dict(getattr(operator_formulas, "EXTRA_IGNORED", {}))


#: Every operator excluded from FLOPs with its reason: the reference list, then further views,
#: copies, allocations, creations, random generation and runtime queries
#: (``operator_formulas.EXTRA_IGNORED``), so that strict mode does not fail on work that has no
#: FLOPs by definition. An operator that has a formula is counted whatever this list says.
IGNORED_OPERATORS: dict[str, str] = {**_extra_ignored(), **REFERENCE_IGNORED}

#: A compiled formula: ``call(args, kwargs, out) -> count``.
Formula = Callable[[tuple, dict, Any], Any]


def validate_mapping(custom_mapping: Mapping[Any, Any] | None) -> dict[Any, Any]:
    """Copy ``custom_mapping`` (never mutating it) and reject overload keys."""
    if custom_mapping is None:
        return {}
    if not isinstance(custom_mapping, Mapping):
        raise TypeError(
            f"custom_mapping must be a mapping from operator packets to formulas, got "
            f"{type(custom_mapping).__name__}."
        )
    mapping = dict(custom_mapping)
    for key in mapping:
        packet = getattr(key, "_overloadpacket", None)
        if packet is not None and packet is not key:
            raise TypeError(
                "custom_mapping keys must be operator packets such as torch.ops.aten.sin, not "
                f"overloads such as torch.ops.aten.sin.default (got {key}; use {packet})."
            )
    return mapping


def _get_shape(value: Any) -> Any:
    return value.shape if isinstance(value, torch.Tensor) else value


_LEAF_TYPES = frozenset(
    (int, float, bool, complex, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)
)


def _shapes(value: Any) -> Any:
    """``tree_map(get_shape, value)`` with fast paths for tensors, tuples, lists and scalars."""
    kind = type(value)
    if kind in _LEAF_TYPES:
        return value
    if isinstance(value, torch.Tensor):
        return value.shape
    if kind is tuple:
        return tuple([_shape_item(item) for item in value])
    if kind is list:
        return [_shape_item(item) for item in value]
    return tree_map(_get_shape, value)


_TENSOR_TYPES = frozenset((torch.Tensor, torch.nn.Parameter))


def _shape_item(item: Any) -> Any:
    kind = type(item)
    if kind in _TENSOR_TYPES:
        return item.shape
    if kind in _LEAF_TYPES:
        return item
    if isinstance(item, torch.Tensor):
        return item.shape
    return _shapes(item)


try:
    _SHAPE_WRAPPER_CODE = _fc.shape_wrapper(lambda: None).__code__
except AttributeError:  # pragma: no cover - old torch
    _SHAPE_WRAPPER_CODE = None


def _is_shape_wrapped(value: Any) -> bool:
    return _SHAPE_WRAPPER_CODE is not None and getattr(value, "__code__", None) is _SHAPE_WRAPPER_CODE


def _unwrap(formula: Callable[..., Any]) -> Callable[..., Any]:
    """``formula`` without ``shape_wrapper``, and, when it calls other registered formulas by their
    global names (PyTorch's ``addmm_flop`` calls ``mm_flop``, ``baddbmm_flop`` calls
    ``bmm_flop``), a copy of it that calls them unwrapped too: it passes them shapes already, so
    the wrapper's pytree traversal (ten times the arithmetic, once per matrix product) changes no
    count. PyTorch's own functions are left as they are."""
    if _is_shape_wrapped(formula):
        formula = formula.__wrapped__  # type: ignore[attr-defined]
    code = getattr(formula, "__code__", None)
    names = getattr(formula, "__globals__", {})
    wrapped = {name: names[name].__wrapped__ for name in getattr(code, "co_names", ())
               if _is_shape_wrapped(names.get(name))}
    if not wrapped or not isinstance(formula, types.FunctionType) or formula.__closure__:
        return formula
    rebound = types.FunctionType(code, {**names, **wrapped}, formula.__name__, formula.__defaults__)
    rebound.__kwdefaults__ = formula.__kwdefaults__
    return rebound


def compile_formula(formula: Callable[..., Any]) -> Formula:
    """Turn a ``FlopCounterMode`` formula into ``call(args, kwargs, out) -> count``.

    Raw formulas (``_get_raw``) get the values; the others get shapes, as ``shape_wrapper`` would
    give them. PyTorch's registered formulas are already wrapped by ``shape_wrapper``; they are
    unwrapped (:func:`_unwrap`) so that shapes are computed once, without pytree overhead.
    """
    if getattr(formula, "_get_raw", False):
        return lambda args, kwargs, out: formula(*args, **kwargs, out_val=out)
    formula = _unwrap(formula)

    def call(args: tuple, kwargs: dict, out: Any) -> Any:
        out_shape = out.shape if isinstance(out, torch.Tensor) else _shapes(out)
        if kwargs:
            return formula(*[_shape_item(a) for a in args], out_shape=out_shape, **{k: _shape_item(v) for k, v in kwargs.items()})
        return formula(*[_shape_item(a) for a in args], out_shape=out_shape)

    return call


#: Compiled built-in and default formulas, by ``id`` (the formula is kept to check identity).
_COMPILED: dict[int, tuple[Any, Formula]] = {}


def _compiled(formula: Callable[..., Any]) -> Formula:
    entry = _COMPILED.get(id(formula))
    if entry is not None and entry[0] is formula:
        return entry[1]
    compiled = compile_formula(formula)
    _COMPILED[id(formula)] = (formula, compiled)
    return compiled


def default_mapping() -> dict[Any, Any]:
    """This project's FLOP formulas: ``DEFAULT_FORMULAS`` by packet, then ``DECOMPOSITION_GUARDS`` by
    overload (overloads that would otherwise be decomposed before their formula could count them)."""
    from torchscan_lsp.engine import operator_formulas

    return {**operator_formulas.DEFAULT_FORMULAS, **getattr(operator_formulas, "DECOMPOSITION_GUARDS", {})}


#: PyTorch's formulas under this project's defaults, compiled: ``(sources, table)``, where
#: ``sources`` is a snapshot of the two mappings it was built from. Merging ~700 formulas costs about
#: as much as counting a tiny model, so it is done once per process and redone only when a source
#: changed (a formula registered later with ``register_flop_formula``, a default added at run time).
_BASE: tuple[tuple[dict, dict], dict] | None = None


def _base_table() -> dict[Any, Formula]:
    """The cached built-in and default FLOP table (rebuilt when a source mapping changed)."""
    global _BASE
    torch_formulas, defaults = _fc.flop_registry, default_mapping()
    cached = _BASE
    # dict equality compares the formulas by identity, in C: far cheaper than a rebuild
    if cached is not None and cached[0][0] == torch_formulas and cached[0][1] == defaults:
        return cached[1]
    table = {packet: _compiled(formula) for packet, formula in torch_formulas.items()}
    table.update((key, _compiled(formula)) for key, formula in defaults.items())
    _BASE = ((dict(torch_formulas), defaults), table)
    return table


def flop_table(custom_mapping: Mapping[Any, Any] | None = None) -> dict[Any, Formula]:
    """Key (packet, or overload for a decomposition guard) -> compiled FLOP formula: PyTorch's,
    under this project's defaults, under the caller's.

    A fresh copy of the cached base (so no counter can change what the next one gets); the caller's
    formulas are layered on top for this table only, and compiled afresh: caching them could keep
    closures alive forever.
    """
    table = dict(_base_table())
    table.update((packet, compile_formula(formula)) for packet, formula in (custom_mapping or {}).items())
    return table


_MACS: dict[Any, Formula] | None = None


def mac_table() -> dict[Any, Formula]:
    """Packet -> compiled MAC formula (``operator_formulas.MAC_FORMULAS``), built once."""
    global _MACS
    if _MACS is None:
        from torchscan_lsp.engine.operator_formulas import MAC_FORMULAS

        _MACS = {packet: compile_formula(formula) for packet, formula in MAC_FORMULAS.items()}
    return _MACS

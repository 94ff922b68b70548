"""What the engine knows about each module of a model before its forward runs, and the one leaf rule.

:func:`module_infos` describes every module of a model once (shared modules under their first
name) as a :class:`ModuleInfo`. Everything that records module calls — the crawl's
:class:`~torchscan_lsp.engine.recorder.CallRecorder`, per-layer latency, the worker's source
attribution — reads the same facts from it, above all :attr:`ModuleInfo.leaf`, decided by
:func:`is_metric_leaf` (the one leaf rule):

* a module without children is a metric leaf: module formulas are evaluated for its calls;
* so is a module measured as one unit although it has children: ``nn.MultiheadAttention`` (its
  ``out_proj`` is used functionally), a stock Transformer module (``nn.TransformerEncoderLayer``,
  ``...DecoderLayer``, the two stacks and ``nn.Transformer``, whose residual additions and
  activation run in their own ``forward``; their whole-module formulas count every path, fused or
  not), and a module whose only children are the holders of its parametrizations
  (``torch.nn.utils.parametrize``) or of its packed quantized weights;
* the descendants of a metric leaf are not *recorded* (their calls open no layer record: the leaf's
  formula already counts their work), but they keep their label for operator attribution;
* a ``ScriptModule`` is opaque (``script``): global hooks do not enter it.

Type names are the class names, except for classes of PyTorch's quantization namespaces, which are
named in full (``torch.ao.nn.quantized.dynamic.Linear``), so that they never read like ``torch.nn``.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch
from torch import nn

__all__ = ["ModuleInfo", "is_metric_leaf", "module_infos", "packed_holders", "type_name"]

#: Stock Transformer modules measured as one unit when their ``forward`` is the stock one.
_TRANSFORMERS = (
    nn.TransformerEncoderLayer, nn.TransformerDecoderLayer, nn.TransformerEncoder, nn.TransformerDecoder,
    nn.Transformer,
)  # fmt: skip
_QUANTIZED_PREFIXES = ("torch.ao.nn.", "torch.nn.quantized", "torch.nn.intrinsic", "torch.nn.qat")


class ModuleInfo:
    """The engine's facts about one module of the analysed model (see the module docstring).

    Attributes:
        path: the dotted path from the root (``""`` for the root), the module's first name.
        name: the last component of the path (the root: its class name in lower case).
        depth: the number of components of ``path`` (the root: 0).
        type: the class name (:func:`type_name`).
        leaf: a metric leaf (:func:`is_metric_leaf`): module formulas are evaluated for its calls.
        recorded: its calls open layer records (False below a metric leaf).
        script: a ``ScriptModule``, opaque to hooks and formulas.
        recurse: parameter statistics of its calls include its descendants' tensors.
        tensors: it may own parameters or buffers (False: its statistics are zero).
        packed: the modules whose packed quantized weights its statistics count (empty for most).
        label: the ``FlopCounterMode``-style label (``"Net.layer1.0"``) of ``by_module``.
    """

    __slots__ = ("path", "name", "depth", "type", "leaf", "recorded", "script", "recurse", "tensors", "packed", "label")

    def __init__(
        self, path: str, name: str, depth: int, type: str, *, leaf: bool, recorded: bool, script: bool,
        recurse: bool, tensors: bool, packed: tuple[nn.Module, ...], label: str,
    ) -> None:  # fmt: skip
        self.path = path
        self.name = name
        self.depth = depth
        self.type = type
        self.leaf = leaf
        self.recorded = recorded
        self.script = script
        self.recurse = recurse
        self.tensors = tensors
        self.packed = packed
        self.label = label

    def __repr__(self) -> str:
        return f"ModuleInfo(path={self.path!r}, type={self.type!r}, leaf={self.leaf}, recorded={self.recorded})"


_TYPE_NAMES: dict[type, str] = {}


def type_name(cls: type) -> str:
    """The name reports give ``cls``: its ``__name__``, or for a class of a quantization namespace
    the public dotted name (``torch.ao.nn.quantized.dynamic.Linear``, else its defining module's)."""
    name = _TYPE_NAMES.get(cls)
    if name is not None:
        return name
    name = cls.__name__
    module = getattr(cls, "__module__", "") or ""
    if module.startswith(_QUANTIZED_PREFIXES):
        public = module.split(".modules.", 1)[0] if ".modules." in module else module
        try:
            found = getattr(importlib.import_module(public), cls.__name__, None) is cls
        except ImportError:  # pragma: no cover - a namespace that cannot be imported alone
            found = False
        name = f"{public if found else module}.{cls.__qualname__}"
    _TYPE_NAMES[cls] = name
    return name


_PACKED_CLASSES: dict[type, bool] = {}


def _holds_packed(module: nn.Module) -> bool:
    """Whether ``module`` keeps weights as packed ``ScriptObject``s (quantized kernels' format)."""
    cls = type(module)
    known = _PACKED_CLASSES.get(cls)
    if known is None:
        known = (cls.__module__ or "").startswith(_QUANTIZED_PREFIXES) and any(
            isinstance(value, torch.ScriptObject) for value in vars(module).values()
        )
        _PACKED_CLASSES[cls] = known
    return known


def _is_parametrized(module: nn.Module) -> bool:
    return "parametrizations" in module._modules and torch.nn.utils.parametrize.is_parametrized(module)


def _computing_children(module: nn.Module) -> list[nn.Module]:
    """The children that compute: without the parametrization holder and packed-weight holders."""
    children = module._modules
    if not children:
        return []
    found = []
    for name, child in children.items():
        if child is None:
            continue
        if name == "parametrizations" and _is_parametrized(module):
            continue
        if not child._modules and _holds_packed(child):
            continue
        found.append(child)
    return found


def _stock_transformer(module: nn.Module) -> bool:
    cls = type(module)
    for stock in _TRANSFORMERS:
        if isinstance(module, stock):
            return cls.forward is stock.forward
    return False


def is_metric_leaf(module: nn.Module) -> bool:
    """The one leaf rule: whether module formulas measure ``module``'s calls (module docstring)."""
    if isinstance(module, torch.jit.ScriptModule):
        return False
    if not module._modules:
        return True
    return isinstance(module, nn.MultiheadAttention) or _stock_transformer(module) or not _computing_children(module)


def packed_holders(module: nn.Module) -> tuple[nn.Module, ...]:
    """``module`` and its children that hold packed quantized weights, for its statistics."""
    found = [module] if _holds_packed(module) else []
    for child in module._modules.values():
        if child is not None and not child._modules and _holds_packed(child):
            found.append(child)
    return tuple(found)


def module_infos(root: nn.Module, named: list[tuple[str, nn.Module]] | None = None) -> dict[int, ModuleInfo]:
    """Every module of ``root``, keyed by ``id``, in ``named_modules()`` order (module docstring).

    ``named``: ``list(root.named_modules())`` when the caller has it already.
    """
    base = type(root).__name__
    infos: dict[int, ModuleInfo] = {}
    script_type = torch.jit.ScriptModule
    # paths of the metric leaves met so far, as prefixes: their descendants are not recorded
    covered: list[str] = []
    for path, module in root.named_modules() if named is None else named:
        children = module._modules
        script = isinstance(module, script_type)
        leaf = not script and (not children or is_metric_leaf(module))
        while covered and not path.startswith(covered[-1]):
            covered.pop()
        recorded = not covered
        if children and leaf:
            covered.append(f"{path}." if path else "")
        packed = packed_holders(module) if children or _holds_packed(module) else ()
        if path:
            name, depth, label = path.rpartition(".")[2], path.count(".") + 1, f"{base}.{path}"
        else:
            name, depth, label = base.lower(), 0, base
        recurse = script or (leaf and bool(children))
        infos[id(module)] = ModuleInfo(
            path, name, depth, type_name(type(module)),
            leaf=leaf, recorded=recorded, script=script, recurse=recurse,
            tensors=bool(recurse or module._parameters or module._buffers or packed),
            packed=packed, label=label,
        )  # fmt: skip
    return infos

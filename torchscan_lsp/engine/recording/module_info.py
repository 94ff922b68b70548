"""What the engine knows about each module of a model before its forward runs, and the one leaf rule.

:func:`module_infos` describes every module of a model once (shared modules under their first
name) as a :class:`ModuleInfo`. Everything that records module calls — the crawl's
:class:`~torchscan_lsp.engine.recording.recorder.CallRecorder`, per-layer latency, the worker's source
attribution — reads the same facts from it, above all :attr:`ModuleInfo.leaf`, decided by
:func:`is_metric_leaf` (the one leaf rule):

* a module without children is a metric leaf: module formulas are evaluated for its calls;
* so is a module measured as one unit although it has children: ``nn.MultiheadAttention`` (its
  ``out_proj`` is used functionally), a stock Transformer layer (``nn.TransformerEncoderLayer``,
  ``nn.TransformerDecoderLayer``, whose residual additions and activation run in their own
  ``forward``; their whole-layer formulas count every path, fused or not), an ``nn.Transformer``
  that is the analysed model itself (the reference contract's one record), and a module whose only
  children are the holders of its parametrizations (``torch.nn.utils.parametrize``) or of its
  packed quantized weights;
* the descendants of a metric leaf are not *recorded* (their calls open no layer record: the leaf's
  formula already counts their work), but they keep their label for operator attribution;
* a ``ScriptModule`` is opaque (``script``): global hooks do not enter it.

Type names are the class names, except for classes of PyTorch's quantization namespaces, which are
named in full (``torch.ao.nn.quantized.dynamic.Linear``), so that they never read like ``torch.nn``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from torchscan_lsp.engine.type_names import QUANTIZED_PREFIXES, type_name

__all__ = ["ModelScan", "ModuleInfo", "is_metric_leaf", "module_infos", "named_modules", "packed_holders"]

#: Stock Transformer layers measured as one unit when their ``forward`` is the stock one (the stacks
#: that hold them are containers: their own ``forward`` only calls the layers and the final norm).
_TRANSFORMERS = (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)


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
        self, path: str, name: str, depth: int, type: str, leaf: bool, recorded: bool, script: bool,
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


_PACKED_CLASSES: dict[type, bool] = {}


def _holds_packed(module: nn.Module) -> bool:
    """Whether ``module`` keeps weights as packed ``ScriptObject``s (quantized kernels' format)."""
    cls = type(module)
    known = _PACKED_CLASSES.get(cls)
    if known is None:
        known = (cls.__module__ or "").startswith(QUANTIZED_PREFIXES) and any(
            isinstance(value, torch.ScriptObject) for value in vars(module).values()
        )
        _PACKED_CLASSES[cls] = known
    return known


def _is_parametrized(module: nn.Module) -> bool:
    return "parametrizations" in module._modules and torch.nn.utils.parametrize.is_parametrized(module)


def _computes(name: str, child: nn.Module | None, parent: nn.Module) -> bool:
    """Whether ``child`` (registered as ``name``) computes, unlike the holders of ``parent``'s
    parametrizations and of packed quantized weights."""
    if child is None:
        return False
    if name == "parametrizations" and _is_parametrized(parent):
        return False
    return bool(child._modules) or not _holds_packed(child)


def _stock_transformer(cls: type) -> bool:
    for stock in _TRANSFORMERS:
        if issubclass(cls, stock):
            return cls.forward is stock.forward
    return False


#: class -> (type name, ScriptModule, measured as one unit, of a quantization namespace)
_CLASS_FACTS: dict[type, tuple[str, bool, bool, bool]] = {}


def _class_facts(cls: type) -> tuple[str, bool, bool, bool]:
    facts = _CLASS_FACTS.get(cls)
    if facts is None:
        unit = issubclass(cls, nn.MultiheadAttention) or _stock_transformer(cls)
        quantized = (cls.__module__ or "").startswith(QUANTIZED_PREFIXES)
        facts = _CLASS_FACTS[cls] = (type_name(cls), issubclass(cls, torch.jit.ScriptModule), unit, quantized)
    return facts


def _is_leaf(module: nn.Module, children: Any, script: bool, unit: bool) -> bool:
    if script:
        return False
    if not children or unit:
        return True
    return not any(_computes(name, child, module) for name, child in children.items())


def _root_unit(module: nn.Module) -> bool:
    return isinstance(module, nn.Transformer) and type(module).forward is nn.Transformer.forward


def is_metric_leaf(module: nn.Module, *, root: bool = False) -> bool:
    """The one leaf rule: whether module formulas measure ``module``'s calls (module docstring);
    ``root``: ``module`` is the analysed model itself."""
    _, script, unit, _ = _class_facts(type(module))
    return _is_leaf(module, module._modules, script, unit or (root and _root_unit(module)))


def packed_holders(module: nn.Module) -> tuple[nn.Module, ...]:
    """``module`` and its children that hold packed quantized weights, for its statistics."""
    found = [module] if _holds_packed(module) else []
    for child in module._modules.values():
        if child is not None and not child._modules and _holds_packed(child):
            found.append(child)
    return tuple(found)


def named_modules(root: nn.Module) -> list[tuple[str, nn.Module]]:
    """``list(root.named_modules())``, computed without PyTorch's nested generators (one frame per
    level per module): the same pre-order, the same first names of shared modules."""
    if type(root).named_modules is not nn.Module.named_modules:
        return list(root.named_modules())
    found: list[tuple[str, nn.Module]] = []
    memo: set[int] = set()
    stack: list[tuple[str, nn.Module]] = [("", root)]
    while stack:
        path, module = stack.pop()
        if id(module) in memo:
            continue
        memo.add(id(module))
        found.append((path, module))
        children = module._modules
        if children:
            prefix = f"{path}." if path else ""
            stack.extend([(prefix + name, child) for name, child in reversed(children.items()) if child is not None])
    return found


class ModelScan:
    """One pass over a model: its modules in ``named_modules()`` order, their :class:`ModuleInfo`
    by ``id``, and its parameters and buffers as ``parameters()``/``buffers()`` give them (each
    tensor once, in the same order)."""

    __slots__ = ("named", "infos", "parameters", "buffers")

    def __init__(self, root: nn.Module) -> None:
        self.named = named_modules(root)
        self.infos: dict[int, ModuleInfo] = {}
        self.parameters: list[torch.Tensor] = []
        self.buffers: list[torch.Tensor] = []
        base = type(root).__name__
        infos, parameters, buffers, seen = self.infos, self.parameters, self.buffers, set()
        class_facts = _CLASS_FACTS.get
        # paths of the metric leaves met so far, as prefixes: their descendants are not recorded
        covered: list[str] = []
        for path, module in self.named:
            children, own_parameters, own_buffers = module._modules, module._parameters, module._buffers
            cls = type(module)
            type_label, script, unit, quantized = class_facts(cls) or _class_facts(cls)
            if not path and _root_unit(module):
                unit = True
            leaf = (not children or unit or _is_leaf(module, children, script, unit)) and not script
            while covered and not path.startswith(covered[-1]):
                covered.pop()
            recorded = not covered
            if children and leaf:
                covered.append(f"{path}." if path else "")
            packed = packed_holders(module) if quantized else ()
            if path:
                name, depth, label = path.rpartition(".")[2], path.count(".") + 1, f"{base}.{path}"
            else:
                name, depth, label = base.lower(), 0, base
            recurse = script or (leaf and bool(children))
            tensors = bool(recurse or own_parameters or own_buffers or packed)
            infos[id(module)] = ModuleInfo(
                path, name, depth, type_label, leaf, recorded, script, recurse, tensors, packed, label
            )
            for table, found in ((own_parameters, parameters), (own_buffers, buffers)):
                if table:
                    for tensor in table.values():
                        if tensor is not None and id(tensor) not in seen:
                            seen.add(id(tensor))
                            found.append(tensor)


def module_infos(root: nn.Module) -> dict[int, ModuleInfo]:
    """Every module of ``root``, keyed by ``id``, in ``named_modules()`` order (module docstring)."""
    return ModelScan(root).infos

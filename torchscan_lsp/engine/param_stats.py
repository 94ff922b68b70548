"""Parameter and buffer statistics of module calls: each tensor counted once, sharing said.

A crawl counts a tensor in the record of the first module call that owns it (pre-order: a parent's
own tensors before its children's). A later call whose module owns an already counted tensor (a
module called twice, a head tied to an embedding) counts it as *shared*: its record says how many
elements and with whom (the path whose record counted them), never a silent 0.

Packed quantized weights (``torch.ao.nn.quantized`` modules keep them as ``ScriptObject``s, not
parameters) are unpacked with the module's ``_weight_bias()`` and counted as frozen parameters;
a holder without that method cannot be counted and is reported by :attr:`ParameterStats.unpacked`.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from torchscan_lsp.engine.module_info import ModuleInfo
from torchscan_lsp.engine.report import make_diagnostic, metric_result

__all__ = ["ParameterStats", "add_packed_totals", "packed_weights"]


def packed_weights(holder: nn.Module) -> list[Any] | None:
    """The weight and bias tensors packed in ``holder`` (None when they cannot be unpacked)."""
    unpack = getattr(holder, "_weight_bias", None)
    if not callable(unpack):
        return None
    try:
        found = unpack()
    except Exception:  # noqa: BLE001 - a holder that cannot unpack is reported, not fatal
        return None
    found = found if isinstance(found, (tuple, list)) else (found,)
    return [tensor for tensor in found if tensor is not None]


def _zero_parameters() -> dict[str, Any]:
    return {"trainable": 0, "frozen": 0, "bytes": 0, "shared": False, "shared_elements": 0, "shared_with": []}


def _zero_buffers() -> dict[str, Any]:
    return {"elements": 0, "bytes": 0, "shared": False, "shared_elements": 0, "shared_with": []}


class ParameterStats:
    """The statistics of one crawl: which tensors were counted, and by which module path."""

    __slots__ = ("_seen", "unpacked")

    def __init__(self) -> None:
        self._seen: dict[int, str] = {}  # id(tensor or packed holder) -> path of the record that counted it
        #: full class names of modules whose packed weights could not be unpacked (not counted)
        self.unpacked: dict[str, str] = {}

    def _count(self, tensors: Any, path: str, stats: dict[str, Any], kind: str) -> None:
        seen = self._seen
        for tensor in tensors:
            if tensor is None:
                continue
            key = id(tensor)
            owner = seen.get(key)
            if owner is not None:
                stats["shared"] = True
                stats["shared_elements"] += tensor.numel()
                if owner not in stats["shared_with"]:
                    stats["shared_with"].append(owner)
                continue
            seen[key] = path
            numel = tensor.numel()
            stats["bytes"] += numel * tensor.element_size()
            if kind == "buffers":
                stats["elements"] += numel
            elif tensor.requires_grad:
                stats["trainable"] += numel
            else:
                stats["frozen"] += numel

    def _count_packed(self, info: ModuleInfo, stats: dict[str, Any]) -> None:
        seen = self._seen
        for holder in info.packed:
            key = id(holder)
            owner = seen.get(key)
            tensors = packed_weights(holder)
            if tensors is None:
                cls = type(holder)
                self.unpacked.setdefault(info.path, f"{cls.__module__}.{cls.__qualname__}")
                continue
            elements = sum(t.numel() for t in tensors)
            if owner is not None:
                stats["shared"] = True
                stats["shared_elements"] += elements
                if owner not in stats["shared_with"]:
                    stats["shared_with"].append(owner)
                continue
            seen[key] = info.path
            stats["frozen"] += elements
            stats["bytes"] += sum(t.numel() * t.element_size() for t in tensors)

    def of_call(self, module: nn.Module, info: ModuleInfo) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(parameters, buffers)`` of one call of ``module``: its own tensors (with its
        descendants' when ``info.recurse``), each counted once per crawl."""
        parameters, buffers = _zero_parameters(), _zero_buffers()
        if info.recurse:
            own_params: Any = module.parameters()
            own_buffers: Any = module.buffers()
        else:
            own_params = module._parameters.values() if module._parameters else ()
            own_buffers = module._buffers.values() if module._buffers else ()
        if own_params:
            self._count(own_params, info.path, parameters, "parameters")
        if own_buffers:
            self._count(own_buffers, info.path, buffers, "buffers")
        if info.packed:
            self._count_packed(info, parameters)
        return parameters, buffers

    def add_descendants(self, module: nn.Module, info: ModuleInfo, record: dict[str, Any]) -> None:
        """Count the tensors below a container measured as one unit (its own were counted already)."""
        own = {id(t) for t in (*module._parameters.values(), *module._buffers.values())}
        below = [t for t in module.parameters() if id(t) not in own]
        self._count(below, info.path, record["parameters"], "parameters")
        below = [t for t in module.buffers() if id(t) not in own]
        self._count(below, info.path, record["buffers"], "buffers")


def add_packed_totals(report: dict[str, Any], infos: dict[int, ModuleInfo], root: nn.Module) -> None:
    """Add the model's packed quantized weights to ``parameters``, ``frozen_parameters`` and
    ``parameter_bytes``; a holder that cannot be unpacked makes them partial, with one
    ``packed_parameters`` diagnostic naming the modules by their full class names."""
    holders: dict[int, tuple[str, nn.Module]] = {}
    for info in infos.values():
        for holder in info.packed:
            holders.setdefault(id(holder), (info.path, holder))
    if not holders:
        return
    elements = nbytes = 0
    unknown: list[str] = []
    for path, holder in holders.values():
        tensors = packed_weights(holder)
        if tensors is None:
            cls = type(holder)
            unknown.append(f"'{path}' ({cls.__module__}.{cls.__qualname__})")
            continue
        elements += sum(t.numel() for t in tensors)
        nbytes += sum(t.numel() * t.element_size() for t in tensors)
    totals = report["totals"]
    for name, extra in (("parameters", elements), ("frozen_parameters", elements), ("parameter_bytes", nbytes)):
        total = totals[name]
        value = total["known_value"] + extra
        common = {"unit": total["unit"], "scope": total["scope"], "method": total["method"]}
        if unknown:
            totals[name] = metric_result(status="partial", known_value=value, **common)
        else:
            totals[name] = metric_result(status="complete", value=value, **common)
    if unknown:
        report["diagnostics"].insert(
            0,
            make_diagnostic(
                "packed_parameters",
                "parameters",
                f"Packed quantized weights could not be unpacked and are not counted: {', '.join(unknown)}.",
            ),
        )

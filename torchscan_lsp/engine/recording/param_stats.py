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
from torch.nn.parameter import UninitializedTensorMixin

from torchscan_lsp.contract.format import layer_name
from torchscan_lsp.engine.recording.module_info import ModuleInfo
from torchscan_lsp.engine.report import make_diagnostic, metric_result

__all__ = ["ParameterStats", "add_packed_totals", "initialized", "mark_uninitialized", "packed_weights"]


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


_NONE: tuple[int, int, int, int, None] = (0, 0, 0, 0, None)


def _joined(first: list[str] | None, second: list[str] | None) -> list[str] | None:
    """Two lists of owner paths (or None) as one, in first-seen order."""
    if not second:
        return first
    if not first:
        return second
    return first + [owner for owner in second if owner not in first]


def _parameters(trainable: int, frozen: int, nbytes: int, shared: int, owners: list[str] | None) -> dict[str, Any]:
    return {
        "trainable": trainable, "frozen": frozen, "bytes": nbytes, "shared": owners is not None,
        "shared_elements": shared, "shared_with": owners or [],
    }  # fmt: skip


def _buffers(trainable: int, frozen: int, nbytes: int, shared: int, owners: list[str] | None) -> dict[str, Any]:
    return {
        "elements": trainable + frozen, "bytes": nbytes, "shared": owners is not None, "shared_elements": shared,
        "shared_with": owners or [],
    }  # fmt: skip


class ParameterStats:
    """The statistics of one crawl: which tensors were counted, and by which module path."""

    __slots__ = ("_seen", "unpacked")

    def __init__(self) -> None:
        self._seen: dict[int, str] = {}  # id(tensor or packed holder) -> path of the record that counted it
        #: full class names of modules whose packed weights could not be unpacked (not counted)
        self.unpacked: dict[str, str] = {}

    def _count(self, tensors: Any, path: str) -> tuple[int, int, int, int, list[str] | None]:
        """``(trainable, frozen, bytes, shared elements, shared with)`` of ``tensors``, counting each
        tensor not seen before for ``path``."""
        seen = self._seen
        trainable = frozen = nbytes = shared = 0
        owners: list[str] | None = None
        for tensor in tensors:
            if tensor is None:
                continue
            key = id(tensor)
            owner = seen.get(key)
            numel = tensor.numel()
            if owner is not None:
                shared += numel
                if owners is None:
                    owners = [owner]
                elif owner not in owners:
                    owners.append(owner)
                continue
            seen[key] = path
            nbytes += numel * tensor.element_size()
            if tensor.requires_grad:
                trainable += numel
            else:
                frozen += numel
        return trainable, frozen, nbytes, shared, owners

    def _count_packed(self, info: ModuleInfo) -> tuple[int, int, int, int, list[str] | None]:
        """The same for the packed quantized weights of ``info.packed`` (frozen: no gradients)."""
        seen = self._seen
        frozen = nbytes = shared = 0
        owners: list[str] | None = None
        for holder in info.packed:
            tensors = packed_weights(holder)
            if tensors is None:
                cls = type(holder)
                self.unpacked.setdefault(info.path, f"{cls.__module__}.{cls.__qualname__}")
                continue
            elements = sum(t.numel() for t in tensors)
            owner = seen.get(id(holder))
            if owner is not None:
                shared += elements
                owners = _joined(owners, [owner])
                continue
            seen[id(holder)] = info.path
            frozen += elements
            nbytes += sum(t.numel() * t.element_size() for t in tensors)
        return 0, frozen, nbytes, shared, owners

    def of_call(self, module: nn.Module, info: ModuleInfo) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(parameters, buffers)`` of one call of ``module``: its own tensors (with its
        descendants' when ``info.recurse``), each counted once per crawl."""
        path = info.path
        if info.recurse:
            params = self._count(module.parameters(), path)
            buffers = self._count(module.buffers(), path)
        else:
            params = self._count(module._parameters.values(), path) if module._parameters else _NONE
            buffers = self._count(module._buffers.values(), path) if module._buffers else _NONE
        if info.packed:
            packed = self._count_packed(info)
            params = (*(a + b for a, b in zip(params[:4], packed[:4])), _joined(params[4], packed[4]))  # type: ignore[assignment]
        return _parameters(*params), _buffers(*buffers)

    def add_descendants(self, module: nn.Module, info: ModuleInfo, record: dict[str, Any]) -> None:
        """Count the tensors below a container measured as one unit (its own were counted already)."""
        own = {id(t) for t in (*module._parameters.values(), *module._buffers.values())}
        for key, tensors in (("parameters", module.parameters()), ("buffers", module.buffers())):
            added = self._count([t for t in tensors if id(t) not in own], info.path)
            stats = record[key]
            if key == "parameters":
                stats["trainable"] += added[0]
                stats["frozen"] += added[1]
            else:
                stats["elements"] += added[0] + added[1]
            stats["bytes"] += added[2]
            if added[4] is not None:
                stats["shared"] = True
                stats["shared_elements"] += added[3]
                stats["shared_with"].extend(owner for owner in added[4] if owner not in stats["shared_with"])


def add_packed_totals(report: dict[str, Any], infos: dict[int, ModuleInfo]) -> None:
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
            unknown.append(f"{layer_name(path)} ({cls.__module__}.{cls.__qualname__})")
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


def initialized(tensors: list[Any]) -> list[Any]:
    """``tensors`` without the uninitialised parameters and buffers of lazy modules that never ran."""
    if not any(isinstance(tensor, UninitializedTensorMixin) for tensor in tensors):
        return tensors
    return [tensor for tensor in tensors if not isinstance(tensor, UninitializedTensorMixin)]


def mark_uninitialized(report: dict[str, Any], named: list[tuple[str, nn.Module]]) -> None:
    """Make the parameter and buffer totals partial, with one ``uninitialized_parameters`` diagnostic,
    when a lazy module never ran (its tensors have no size yet); nothing otherwise."""
    paths = [
        layer_name(path)
        for path, module in named
        if any(isinstance(t, UninitializedTensorMixin) for t in (*module._parameters.values(), *module._buffers.values()))
    ]
    if not paths:
        return
    totals = report["totals"]
    for name in ("parameters", "trainable_parameters", "frozen_parameters", "parameter_bytes", "buffer_elements", "buffer_bytes"):
        total = totals[name]
        totals[name] = metric_result(
            status="partial", known_value=total["known_value"], unit=total["unit"], scope=total["scope"], method=total["method"]
        )
    report["diagnostics"].insert(
        0,
        make_diagnostic(
            "uninitialized_parameters",
            "parameters",
            f"Lazy modules that never ran have no parameter sizes yet and are not counted: {', '.join(paths)}.",
        ),
    )

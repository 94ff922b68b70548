"""The modules of a model that the forward pass never called, for the source map's ``uncalled``.

A module with no call of its own is one of two kinds. A container whose children were called (a
``ModuleList``, a ``ModuleDict``): its line built them too. Or a module that never ran at all (a
head the forward skips, DINO's ``norm`` and ``head`` when only the attention is asked for, the
frozen original of a peft ``modules_to_save`` copy): its parameters are the model's all the same
(the report's total counts them), but no layer record holds them. Each entry carries the tensors
only it holds, so that a line that built it, its class's line and the factory's line can count
them, each tensor once.

A module below a call that ran as one whole (a leaf such as ``nn.MultiheadAttention``, whose
``out_proj`` its functional forward reads without calling it, or a container whose own forward
did the work) is not listed: that call's record counted every tensor under it.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import torch

from torchscan_lsp.contract.report import ancestors
from torchscan_lsp.contract.source_map import UncalledSite

__all__ = ["uncalled_modules"]


def uncalled_modules(root: torch.nn.Module, called: Iterable[str], sites: Callable[[str], dict[str, Any]]
                     ) -> list[UncalledSite]:
    """The ``uncalled`` entries of ``root``'s source map, by path: every module (by its first name)
    that has no call among ``called`` (the paths of the calls that have records) and lies below no
    call that ran as one whole. ``sites(path)`` gives an entry's ``defined_at`` and
    ``library_defined_at``. ``ran`` says whether a module below it was called; ``parameters``
    (``trainable``, ``frozen`` elements, ``bytes``) and ``buffers`` (``elements``, ``bytes``) are
    its own tensors that no call's record and no earlier entry counted; ``parameters`` also give
    the elements of its own parameters that one did count (``shared_elements``: an embedding tied
    to the head that ran) and their paths (``shared_with``)."""
    called = set(called)
    above_called = {above for path in called for above in ancestors(path)}
    wholes = called - above_called  # calls none of whose descendants was called
    modules = dict(root.named_modules())
    counted: dict[int, str] = {}  # id of a tensor -> the path whose record or entry counted it
    for path in called:
        module = modules.get(path)
        if module is not None:
            tensors = [*module.parameters(), *module.buffers()] if path in wholes else \
                [*module._parameters.values(), *module._buffers.values()]
            counted.update((id(t), path) for t in tensors if t is not None)
    found: list[UncalledSite] = []
    for path, module in modules.items():
        if path in called or any(above in wholes for above in ancestors(path)):
            continue
        own = [t for t in module._parameters.values() if t is not None]
        elsewhere = [(t, counted[id(t)]) for t in own if id(t) in counted]
        params = _new(own, counted, path)
        buffers = _new(module._buffers.values(), counted, path)
        found.append({
            "path": path, "type": type(module).__name__, **sites(path), "ran": path in above_called,  # type: ignore[typeddict-item]
            "parameters": {"trainable": sum(t.numel() for t in params if t.requires_grad),
                           "frozen": sum(t.numel() for t in params if not t.requires_grad), "bytes": _bytes(params),
                           "shared_elements": sum(t.numel() for t, _ in elsewhere),
                           "shared_with": list(dict.fromkeys(owner for _, owner in elsewhere))},
            "buffers": {"elements": sum(t.numel() for t in buffers), "bytes": _bytes(buffers)},
        })
    return found


def _new(tensors: Iterable[torch.Tensor | None], counted: dict[int, str], path: str) -> list[torch.Tensor]:
    """The tensors of ``tensors`` not in ``counted``, each once; they are added to it under ``path``."""
    fresh = []
    for tensor in tensors:
        if tensor is not None and id(tensor) not in counted:
            counted[id(tensor)] = path
            fresh.append(tensor)
    return fresh


def _bytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)

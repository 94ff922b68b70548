"""Modules a model holds in plain Python lists, tuples or dicts, for the source map's ``unregistered``.

``self.layers = [nn.Linear(d, d) for _ in range(n)]`` is a classic PyTorch mistake: only an
``nn.Module`` attribute, ``nn.ModuleList`` or ``nn.ModuleDict`` registers a child, so these
layers are in none of ``parameters()``, ``state_dict()``, ``.to()`` or an optimizer's groups. The
forward still calls them: their operators are counted (the engine sees them as work in the holder's
own ``forward``), their parameters are not, as PyTorch does not count them either. Each entry
says which attribute of which module holds them and where they were built, so that the line gets a
warning instead of silence.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

__all__ = ["unregistered_modules"]

#: ``nn.Module``'s own bookkeeping attributes: registries and hooks, never a user's container.
_MODULE_STATE = frozenset(torch.nn.Module().__dict__)


def unregistered_modules(root: torch.nn.Module, built_at: Callable[[torch.nn.Module], dict[str, Any] | None]
                         ) -> list[dict[str, Any]]:
    """``{"path", "attribute", "container", "modules", "parameters", "defined_at"}`` for each
    attribute of a module of ``root`` (``path``, first names) that holds modules in a plain list,
    tuple or dict (``container``, its type's name):
    how many that the model does not register elsewhere, their parameter elements (each tensor
    once, those the model does not hold) and the line that built the first of them
    (``built_at(module)``, a site or None)."""
    registered = {id(p) for p in root.parameters()}
    named = list(root.named_modules())
    modules = {id(module) for _, module in named}
    found = []
    for path, module in named:
        for name, value in vars(module).items():
            if name in _MODULE_STATE:
                continue
            items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
            # a list of modules the model registers elsewhere too (``self.stages = [self.blocks[0]]``) is an alias
            held = [item for item in items if isinstance(item, torch.nn.Module) and id(item) not in modules]
            if not held:
                continue
            seen: set[int] = set()
            elements = 0
            for item in held:
                for parameter in item.parameters():
                    if id(parameter) not in registered and id(parameter) not in seen:
                        seen.add(id(parameter))
                        elements += parameter.numel()
            found.append({"path": path, "attribute": name, "container": type(value).__name__,
                          "modules": len(held), "parameters": elements,
                          "defined_at": next(filter(None, map(built_at, held)), None)})
    return found

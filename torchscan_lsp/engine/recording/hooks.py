"""Installing and removing the recording pass's module hooks.

PyTorch's *global* forward hooks where they accept keyword arguments (``with_kwargs`` and
``always_call``), so that fused fast paths stay on and ScriptModules are no obstacle; otherwise
per-module hooks on every module except ScriptModules (which refuse them).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as _module_mod

from torchscan_lsp.engine.recording.recorder import CallRecorder

__all__ = ["GLOBAL_HOOKS", "install_hooks", "remove_hooks"]


def _global_hooks_take_kwargs() -> bool:
    try:
        params = inspect.signature(_module_mod.register_module_forward_hook).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return False
    return "with_kwargs" in params and "always_call" in params


#: Whether this PyTorch's global forward hooks accept ``with_kwargs`` and ``always_call``.
GLOBAL_HOOKS = _global_hooks_take_kwargs()


def remove_hooks(handles: list[Any]) -> None:
    """Remove hooks installed by :func:`install_hooks`, leaving PyTorch's hook tables as they were."""
    with_kwargs = getattr(_module_mod, "_global_forward_hooks_with_kwargs", None)
    for handle in handles:
        handle.remove()
        if with_kwargs is not None:
            # RemovableHandle forgets this table (PyTorch 2.x): drop our entry ourselves
            with_kwargs.pop(handle.id, None)


def install_hooks(root: nn.Module, recorder: CallRecorder) -> list[Any]:
    """Install the recorder's hooks and return their handles (give them to :func:`remove_hooks`).

    Global hooks where PyTorch supports them with keyword arguments; otherwise per-module hooks on
    every module except ScriptModules (which refuse them).
    """
    handles: list[Any] = []
    try:
        if GLOBAL_HOOKS:
            handles.append(_module_mod.register_module_forward_pre_hook(recorder.pre_hook))
            handles.append(
                _module_mod.register_module_forward_hook(recorder.post_hook, with_kwargs=True, always_call=True)
            )
            return handles
        for module in root.modules():  # pragma: no cover - PyTorch without kwargs in global hooks
            if isinstance(module, torch.jit.ScriptModule):
                continue
            handles.append(module.register_forward_pre_hook(recorder.pre_hook))
            handles.append(module.register_forward_hook(recorder.post_hook, with_kwargs=True))
    except BaseException:
        remove_hooks(handles)
        raise
    return handles

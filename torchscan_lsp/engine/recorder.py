"""Hook recording: one layer record per module call, from global module hooks.

The crawler installs PyTorch's *global* forward hooks (``register_module_forward_pre_hook`` /
``register_module_forward_hook``) and filters them to the analysed model's own modules. Per-module
hooks would switch fused fast paths off (``nn.TransformerEncoderLayer`` checks its children for
hooks) and are refused by ScriptModules; global hooks change neither.

:class:`CallRecorder` holds everything one crawl records: the layer records, per-module call
counters, the tensors already counted in parameter statistics, the active module labels (used by the
operator counter to attribute FLOPs to modules) and the module diagnostics.
"""

from __future__ import annotations

import inspect
import sys
import threading
from typing import Any, Callable

import torch
from torch import nn
from torch.nn.modules import module as _module_mod

from torchscan_lsp.engine.inputs import call_meta, tensor_meta, value_meta
from torchscan_lsp.engine.report import METHOD_HOOK, Diagnostic, metric_result

__all__ = ["Target", "CallRecorder", "hook_targets", "install_hooks", "remove_hooks"]


class Target:
    """What the crawler knows about one module of the model before the forward runs."""

    __slots__ = ("path", "name", "depth", "type", "recurse", "leaf", "script", "label", "hooked", "tensors")

    def __init__(
        self, path: str, name: str, depth: int, type: str, recurse: bool, leaf: bool, script: bool,
        label: str, hooked: bool, tensors: bool = True,
    ) -> None:
        self.path = path
        self.name = name
        self.depth = depth
        self.type = type
        self.recurse = recurse  # parameter statistics include submodules' tensors
        self.leaf = leaf  # a metric leaf: module formulas are evaluated for its calls
        self.script = script  # a ScriptModule: opaque to hooks and formulas, statistics recursive
        self.label = label  # FlopCounterMode-style label for by_module attribution
        self.hooked = hooked  # its calls become layer records
        self.tensors = tensors  # it may own parameters or buffers (False: statistics are zero)

    def __repr__(self) -> str:
        return f"Target(path={self.path!r}, type={self.type!r}, leaf={self.leaf}, hooked={self.hooked})"


def _is_script(module: nn.Module) -> bool:
    return isinstance(module, torch.jit.ScriptModule)


def hook_targets(root: nn.Module, named: list[tuple[str, nn.Module]] | None = None) -> dict[int, Target]:
    """Every module of ``root`` keyed by ``id``, with its identity, label and role.

    Modules appear once (shared ones under their first name). All are *hooked* (their calls become
    layer records) except the descendants of an ``nn.Transformer`` root, which is measured as one
    unit; they still carry their label for operator attribution.
    """
    transformer_root = isinstance(root, nn.Transformer)
    base = type(root).__name__
    targets: dict[int, Target] = {}
    script_type, attention_type = torch.jit.ScriptModule, nn.MultiheadAttention
    for path, module in root.named_modules() if named is None else named:
        children = module._modules
        has_children = bool(children) and any(child is not None for child in children.values())
        script = isinstance(module, script_type)
        if path:
            recurse = isinstance(module, attention_type)
            name, depth, label, hooked = path.rpartition(".")[2], path.count(".") + 1, f"{base}.{path}", not transformer_root
        else:
            recurse = transformer_root or isinstance(module, attention_type)
            name, depth, label, hooked = base.lower(), 0, base, True
        targets[id(module)] = Target(
            path,
            name,
            depth,
            type(module).__name__,
            recurse or script,
            (recurse or not has_children) and not script,
            script,
            label,
            hooked,
            bool(recurse or script or module._parameters or module._buffers),
        )
    return targets


_CALLS = metric_result(status="complete", value=1, unit="calls", scope="module_call", method=METHOD_HOOK)

#: ``evaluate(module, target, args, kwargs, output, record, diagnostics)``: module metrics of one call.
Evaluator = Callable[[nn.Module, Target, tuple, dict, Any, dict, list], None]
#: ``fail(target, record, exc, diagnostics)``: the call raised before returning.
FailureHandler = Callable[[Target, dict, "BaseException | None", list], None]


class CallRecorder:
    """Records module calls of one crawl; its hooks are installed with :func:`install_hooks`.

    Args:
        root: the analysed model.
        evaluate: called in the forward hook of every metric-leaf call (``None`` in structure mode).
        on_failure: called for a metric-leaf call that raised (an exception caught by a parent).
        counter: the operator counter to pause while ``evaluate`` runs, if any (may be set later).
    """

    def __init__(
        self,
        root: nn.Module,
        *,
        evaluate: Evaluator | None = None,
        on_failure: FailureHandler | None = None,
        counter: Any = None,
        named: list[tuple[str, nn.Module]] | None = None,
    ) -> None:
        self.targets = hook_targets(root, named)
        self.layers: list[dict[str, Any]] = []
        self.diagnostics: list[Diagnostic] = []
        self.parents: set[str] = {"Global"}  # active module labels, read by the operator counter
        self.counter = counter
        #: told of every call entering and leaving (``enter(target, index)``, ``leave(module,
        #: target, args, rest)``), e.g. ``paths.ExecutionPaths``; None for none
        self.observer: Any = None
        self._active: dict[str, int] = {}
        self._calls: dict[int, int] = {}
        self._stacks: dict[int, list[tuple[int, tuple]]] = {}
        self._seen: set[int] = set()
        self._evaluate = evaluate
        self._on_failure = on_failure
        self._thread = threading.get_ident()
        self.pre_hook = self._make_pre_hook()
        self.post_hook = self._make_post_hook()

    # ---------------------------------------------------------------------------------- statistics

    def _tensor_stats(self, tensors: Any) -> tuple[int, int, int, bool]:
        trainable = frozen = nbytes = 0
        shared = False
        seen = self._seen
        for tensor in tensors:
            if tensor is None:
                continue
            key = id(tensor)
            if key in seen:
                shared = True
                continue
            seen.add(key)
            numel = tensor.numel()
            nbytes += numel * tensor.element_size()
            if tensor.requires_grad:
                trainable += numel
            else:
                frozen += numel
        return trainable, frozen, nbytes, shared

    def _stats(self, module: nn.Module, recurse: bool) -> tuple[dict[str, Any], dict[str, Any]]:
        if recurse:
            params: Any = module.parameters()
            buffers: Any = module.buffers()
        else:
            params = module._parameters
            buffers = module._buffers
            params = params.values() if params else ()
            buffers = buffers.values() if buffers else ()
        if params:
            trainable, frozen, pbytes, pshared = self._tensor_stats(params)
        else:
            trainable = frozen = pbytes = 0
            pshared = False
        if buffers:
            b_train, b_frozen, bbytes, bshared = self._tensor_stats(buffers)
            elements = b_train + b_frozen
        else:
            elements = bbytes = 0
            bshared = False
        return (
            {"trainable": trainable, "frozen": frozen, "bytes": pbytes, "shared": pshared},
            {"elements": elements, "bytes": bbytes, "shared": bshared},
        )

    def _add_descendant_stats(self, module: nn.Module, record: dict[str, Any]) -> None:
        """Count the not yet counted tensors of a container measured as one unit in its record."""
        seen = self._seen
        params, buffers = record["parameters"], record["buffers"]
        for tensor in module.parameters():
            if id(tensor) not in seen:
                seen.add(id(tensor))
                numel = tensor.numel()
                params["trainable" if tensor.requires_grad else "frozen"] += numel
                params["bytes"] += numel * tensor.element_size()
        for tensor in module.buffers():
            if id(tensor) not in seen:
                seen.add(id(tensor))
                buffers["elements"] += tensor.numel()
                buffers["bytes"] += tensor.numel() * tensor.element_size()

    # --------------------------------------------------------------------------------------- hooks
    # The hooks run at every module call, so they are closures over local names (cheaper than
    # attribute look-ups on ``self``): per-call overhead is what the analysis costs on models of
    # many small modules.

    def _make_pre_hook(self) -> Callable[[nn.Module, tuple], None]:
        targets, layers, stacks, calls = self.targets, self.layers, self._stacks, self._calls
        active, parents, thread, get_ident = self._active, self.parents, self._thread, threading.get_ident
        stats, tensor_type = self._stats, torch.Tensor

        def pre_hook(module: nn.Module, args: tuple) -> None:
            key = id(module)
            target = targets.get(key)
            if target is None or get_ident() != thread:
                return
            if self.counter is not None:  # operator attribution needs the active module labels
                label = target.label
                depth = active.get(label, 0)
                active[label] = depth + 1
                if not depth:
                    parents.add(label)
            observer = self.observer
            if not target.hooked:
                if observer is not None:
                    observer.enter(target, None)
                return
            call_index = calls.get(key, 0)
            calls[key] = call_index + 1
            if target.tensors:
                parameters, buffers = stats(module, target.recurse)
            else:
                parameters = {"trainable": 0, "frozen": 0, "bytes": 0, "shared": False}
                buffers = {"elements": 0, "bytes": 0, "shared": False}
            stack = stacks.get(key)
            if stack is None:
                stack = stacks[key] = []
            stack.append((len(layers), args))
            if len(args) == 1:  # the common case, without a comprehension's frame
                value = args[0]
                args_meta = [tensor_meta(value) if type(value) is tensor_type else value_meta(value)]
            else:
                args_meta = list(map(value_meta, args))
            layers.append(
                {
                    "path": target.path,
                    "call_index": call_index,
                    "name": target.name,
                    "depth": target.depth,
                    "type": target.type,
                    "input": {"args": args_meta, "kwargs": {}},
                    "output": {"kind": "pending"},
                    "parameters": parameters,
                    "buffers": buffers,
                    "metrics": {"calls": _CALLS.copy()},
                }
            )
            if observer is not None:
                observer.enter(target, len(layers) - 1)

        return pre_hook

    def _make_post_hook(self) -> Callable[..., None]:
        targets, layers, stacks = self.targets, self.layers, self._stacks
        active, parents, thread, get_ident = self._active, self.parents, self._thread, threading.get_ident
        diagnostics, evaluate, on_failure = self.diagnostics, self._evaluate, self._on_failure
        tensor_type = torch.Tensor

        def post_hook(module: nn.Module, args: tuple, *rest: Any) -> None:
            # Called as (module, args, kwargs, output) after a normal return, and as
            # (module, args, result) by PyTorch's always-call path when the forward raised.
            key = id(module)
            target = targets.get(key)
            if target is None or get_ident() != thread:
                return
            counter = self.counter
            if counter is not None:
                label = target.label
                depth = active.get(label, 0) - 1
                if depth > 0:
                    active[label] = depth
                else:
                    active.pop(label, None)
                    parents.discard(label)
            observer = self.observer
            if observer is not None:
                observer.leave(module, target, args, rest)
            stack = stacks.get(key)
            if not stack:
                return
            index, pre_args = stack.pop()
            record = layers[index]
            if len(rest) != 2:  # the call raised (and a parent caught the exception)
                if on_failure is not None and (target.leaf or target.script):
                    on_failure(target, record, sys.exc_info()[1], diagnostics)
                return
            kwargs, output = rest
            if args is not pre_args:
                record["input"] = call_meta(args, kwargs)
            elif kwargs:
                record["input"]["kwargs"] = {name: value_meta(value) for name, value in kwargs.items()}
            record["output"] = tensor_meta(output) if type(output) is tensor_type else value_meta(output)
            if evaluate is None:
                return
            if not (target.leaf or target.script):
                if len(layers) != index + 1:
                    return  # a container whose children ran: they carry the metrics
                # None of its children ran: a fused fast path (TransformerEncoderLayer, ...) or work
                # written in the container's own forward. Measure the call as one unit.
                self._add_descendant_stats(module, record)
            if counter is None:
                evaluate(module, target, args, kwargs, output, record, diagnostics)
                return
            counter.pause()  # formula work is never seen by the operator counter
            try:
                evaluate(module, target, args, kwargs, output, record, diagnostics)
            finally:
                counter.resume()

        return post_hook


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
            if _is_script(module):
                continue
            handles.append(module.register_forward_pre_hook(recorder.pre_hook))
            handles.append(module.register_forward_hook(recorder.post_hook, with_kwargs=True))
    except BaseException:
        remove_hooks(handles)
        raise
    return handles

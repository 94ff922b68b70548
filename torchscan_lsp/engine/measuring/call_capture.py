"""The capture forward of per-layer latency: every module call's inputs, copied, and whether the call
can be replayed faithfully.

:class:`CallCapture` is told of each call starting (``call_started``: copy its positional inputs
and snapshot the module's state and the random generators) and ending (``call_ended``: copy its
keyword inputs, which global pre-hooks do not receive, and see what changed). It is a
:class:`~torchscan_lsp.engine.recording.observers.PassObserver`: :func:`capture_calls` runs the engine's own
recording pass (global module hooks — per-module hooks would change the program, they disable
fused fast paths such as ``TransformerEncoderLayer``'s) with the capture observing it.

A replay unit is a metric-leaf call (the engine's leaf rule: a module without children, a
``MultiheadAttention``, a stock Transformer module, a parametrized module, ...), or a container whose
call ran none of its children (a fused fast path), replayed whole. A call whose
replay would not be faithful keeps a ``reason``: it modified its parameters or buffers, changed its
attributes, or drew random numbers.
"""

from __future__ import annotations

import copy
import enum
from typing import Any

import torch
from torch import nn

from torchscan_lsp.engine.crawler import record_pass
from torchscan_lsp.engine.recording.inputs import value_meta
from torchscan_lsp.engine.recording.module_info import ModuleInfo
from torchscan_lsp.engine.recording.observers import PassObserver

__all__ = [
    "CaptureError", "CapturedCall", "CallCapture", "capture_calls", "copy_tree",
    "stateful_reason",
]

_IMMUTABLE = (
    type(None), bool, int, float, complex, str, bytes, range, slice, type(Ellipsis), enum.Enum,
    torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size,
)  # fmt: skip


class CaptureError(Exception):
    """A value that cannot be copied for a replay (its message names the type)."""


def _copy_leaf(leaf: Any) -> Any:
    if isinstance(leaf, torch.Tensor):
        return leaf.detach().clone()
    if isinstance(leaf, _IMMUTABLE):
        return leaf
    try:
        return copy.deepcopy(leaf)
    except Exception as exc:  # noqa: BLE001 - any failure means the value cannot be captured
        raise CaptureError(f"a {type(leaf).__qualname__} argument could not be copied ({type(exc).__name__})") from exc


def copy_tree(value: Any) -> Any:
    """Private copies of every tensor (and mutable object) in ``value``; containers rebuilt.

    Raises:
        CaptureError: a leaf that cannot be deep-copied.
    """
    from torch.utils import _pytree

    leaves, spec = _pytree.tree_flatten(value)
    return _pytree.tree_unflatten([_copy_leaf(leaf) for leaf in leaves], spec)


_MODULE_INTERNALS = frozenset(nn.Module().__dict__) | {"training"}


def _attribute_snapshot(module: nn.Module) -> dict[str, Any]:
    return {key: value for key, value in vars(module).items() if key not in _MODULE_INTERNALS}


def _changed_attributes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    changed = sorted(set(before) ^ set(after))
    for key in before.keys() & after.keys():
        old, new = before[key], after[key]
        if old is new:
            continue
        try:
            equal = isinstance(old, _IMMUTABLE + (tuple,)) and type(old) is type(new) and bool(old == new)
        except Exception:  # noqa: BLE001
            equal = False
        if not equal:
            changed.append(key)
    return sorted(changed)


def _state_versions(module: nn.Module) -> list[tuple[int, int]]:
    tensors = [*module.parameters(), *module.buffers()]
    return [(id(tensor), tensor._version) for tensor in tensors]


def _rng_states(device_name: str) -> list[torch.Tensor]:
    states = [torch.random.get_rng_state()]
    if device_name.startswith("cuda"):
        states.append(torch.cuda.get_rng_state(int(device_name.split(":", 1)[1])))
    elif device_name == "mps":
        states.append(torch.mps.get_rng_state())
    return states


def stateful_reason(module: nn.Module) -> str | None:
    """Why replaying ``module`` would change the model, judged before anything is replayed
    (BatchNorm in training mode updates its running statistics), or ``None``."""
    from torch.nn.modules.batchnorm import _BatchNorm

    for sub in module.modules():
        if isinstance(sub, _BatchNorm) and sub.training and sub.track_running_stats:
            return (
                f"{type(sub).__name__} in training mode updates its running statistics on every call, "
                "so replaying it would change the model"
            )
    return None


class CapturedCall:
    """One module call of the capture forward: where it is, its copied inputs, and why it cannot be
    replayed (``reason``, ``capture_error``), if so."""

    __slots__ = (
        "seq", "path", "call_index", "module", "type", "leaf", "args", "kwargs", "capture_error",
        "versions", "attributes", "rng", "child_calls", "input_meta", "reason",
    )  # fmt: skip

    def __init__(self, seq: int, info: ModuleInfo, call_index: int, module: nn.Module) -> None:
        self.seq, self.path, self.call_index, self.module = seq, info.path, call_index, module
        self.type = info.type
        self.leaf = info.leaf
        self.args: Any = None
        self.kwargs: Any = None
        self.capture_error: str | None = None
        self.child_calls = 0
        self.input_meta: dict[str, Any] = {"args": [], "kwargs": {}}
        self.reason: str | None = None
        self.versions: Any = None
        self.attributes: Any = None
        self.rng: Any = None


class CallCapture(PassObserver):
    """Copies each call's inputs and checks its side effects; ``units`` are the replay units found,
    in call order (see the module docstring). An observer of the engine's recording pass, so it
    sees the calls the engine records, with the engine's one leaf rule
    (:func:`~torchscan_lsp.engine.recording.module_info.is_metric_leaf`): calls below a metric leaf are part
    of it, never replay units of their own."""

    def __init__(self, device_name: str) -> None:
        self.device_name = device_name
        self.counts: dict[int, int] = {}
        self.stack: list[CapturedCall] = []
        self.units: list[CapturedCall] = []
        self.seq = 0

    def call_started(self, module: nn.Module, info: ModuleInfo, layer: int | None, args: tuple) -> None:
        """A recorded call of ``module`` starts: copy its positional inputs, snapshot its state."""
        if layer is None:
            return
        call_index = self.counts.get(id(module), 0)
        self.counts[id(module)] = call_index + 1
        if self.stack:
            self.stack[-1].child_calls += 1
        call = CapturedCall(self.seq, info, call_index, module)
        self.seq += 1
        try:
            call.args = copy_tree(tuple(args))
        except CaptureError as exc:
            call.capture_error = str(exc)
        call.input_meta["args"] = [value_meta(arg) for arg in args]
        call.versions = _state_versions(module)
        call.attributes = _attribute_snapshot(module)
        call.rng = _rng_states(self.device_name)
        self.stack.append(call)

    def call_ended(self, module: nn.Module, info: ModuleInfo, layer: int | None, args: tuple,
                   kwargs: dict[str, Any], output: Any, error: BaseException | None) -> None:
        """A recorded call of ``module`` returned: copy its keyword inputs, and see what it changed."""
        if layer is None:
            return
        index = next((i for i in range(len(self.stack) - 1, -1, -1) if self.stack[i].module is module), None)
        if index is None:
            return
        call = self.stack.pop(index)
        if error is not None:
            return  # the forward raised: the capture's own call propagates the exception
        call.input_meta["kwargs"] = {key: value_meta(value) for key, value in kwargs.items()}
        if call.capture_error is None:
            try:
                call.kwargs = copy_tree(dict(kwargs))
            except CaptureError as exc:
                call.capture_error = str(exc)
        changed_attributes = _changed_attributes(call.attributes, _attribute_snapshot(module))
        if call.versions != _state_versions(module):
            call.reason = "the call modified its parameters or buffers in place, so replaying it would change the model"
        elif changed_attributes:
            call.reason = (
                f"the call changed the module's attributes ({', '.join(changed_attributes)}), "
                "so it is stateful and replaying it would change the model"
            )
        elif any(not torch.equal(a, b) for a, b in zip(call.rng, _rng_states(self.device_name), strict=True)):
            call.reason = (
                "the call drew random numbers (e.g. dropout in training mode); replaying it would advance "
                "the global random generator"
            )
        call.versions = call.attributes = call.rng = None
        if call.leaf or call.child_calls == 0:
            self.units.append(call)
        else:
            call.args = call.kwargs = None  # a container measured through its children: free the copies


def capture_calls(model: nn.Module, args: tuple, kwargs: dict[str, Any], device_name: str) -> list[CapturedCall]:
    """Run ``model(*args, **kwargs)`` once as the engine's recording pass (structure mode, the
    model's own training flags) observed by a :class:`CallCapture`; return its replay units in call
    order. The engine's hooks are removed whatever happens."""
    capture = CallCapture(device_name)
    record_pass(model, args, kwargs, observers=[capture], eval_mode=False)
    return sorted(capture.units, key=lambda call: call.seq)

"""Where in the workspace each module was built and called, and which lines dispatched which operators.

This module imports torch and knows nothing of the language server. A :class:`SourceRecorder`
watches two phases of one job:

* **building** (:meth:`SourceRecorder.recording_definitions`, around the factory call): a global
  module-registration hook notes, for every module object that gets registered as a child, the
  innermost workspace frame on the stack — the ``self.conv = nn.Conv2d(...)`` line of the parent's
  ``__init__``, or the workspace line that made library code build it. The line the factory
  returned from (read from its finished frame) becomes the root's ``defined_at``.
* **running** (:meth:`SourceRecorder.recording_calls`, around the engine's single forward pass): a
  global forward pre-hook notes each module call's ``called_at`` (the innermost workspace frame:
  the line in the parent's ``forward``), numbered per module object in call order, as the engine
  numbers its layer records; and a ``TorchDispatchMode``, entered outside the engine's own
  operator counter, counts per workspace line the operators that reach it, with their FLOPs from
  PyTorch's formula registry plus :data:`torchscan_lsp.engine.operator_formulas.DEFAULT_FORMULAS`,
  and with the module whose call was innermost when they ran (a global forward hook closes each
  call), so that work in a container's own ``forward`` is found on the lines that did it.

Only global hooks are used: per-module hooks would change how some modules run (Transformer layers
leave their fast path when they carry hooks). Every hook is removed in ``finally``. The model is
never run a second time.

Files are named by workspace-relative path with ``/`` separators. A file is in the workspace when it
lies under the root and outside virtual environments, site-packages, hidden directories and this
project's own package, so that the frames of the engine and of installed libraries are never named.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import types
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_PACKAGE_DIR = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_ENGINE_DIR = os.path.join(_PACKAGE_DIR, "engine") + os.sep
# Engine frames that sit between a model's code and the operators it dispatches; any other engine
# frame on the way means the operator is the engine's own work (a module formula, input generation).
_ENGINE_PASS_THROUGH = {"__torch_dispatch__", "_higher_order"}
_EXCLUDED_PARTS = {"site-packages", "dist-packages", "node_modules", "__pycache__"}

# Metadata queries that some tensor types dispatch to Python; they are not work.
_METADATA_OPS = {
    "aten.sym_is_contiguous", "aten.is_contiguous", "aten.is_strides_like_format",
    "aten.is_non_overlapping_and_dense", "aten.size", "aten.sym_size", "aten.stride",
    "aten.sym_stride", "aten.storage_offset", "aten.sym_storage_offset", "aten.numel",
    "aten.sym_numel", "aten.dim", "prim.layout", "prim.device",
}


@functools.lru_cache(maxsize=65536)
def _realpath(filename: str) -> str:
    return os.path.realpath(filename)


class Workspace:
    """Decides which files belong to the workspace and names them relative to its root."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = os.path.realpath(os.fspath(root))
        self._cache: dict[str, str | None] = {}
        excluded = {_PACKAGE_DIR}
        for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
            real = os.path.realpath(prefix)
            if real != self.root and real.startswith(self.root + os.sep):
                excluded.add(real)
        self._excluded = tuple(excluded)

    def relative(self, filename: str | None) -> str | None:
        """The workspace-relative ``/`` path of ``filename``, or None when it is not a workspace file."""
        if not filename:
            return None
        try:
            return self._cache[filename]
        except KeyError:
            pass
        result = self._relative(filename)
        self._cache[filename] = result
        return result

    def _relative(self, filename: str) -> str | None:
        if filename.startswith("<") or not filename.endswith((".py", ".pyw")):
            return None
        real = _realpath(filename)
        if not real.startswith(self.root + os.sep):
            return None
        for excluded in self._excluded:
            if real == excluded or real.startswith(excluded + os.sep):
                return None
        parts = Path(os.path.relpath(real, self.root)).parts
        for part in parts[:-1]:
            if part.startswith(".") or part in _EXCLUDED_PARTS:
                return None
        return "/".join(parts)


class SourceRecorder:
    """Records module definition sites, module call sites and operator sites for one job.

    Args:
        workspace: the :class:`Workspace` whose files may be named.
        barrier: a frame at which stack walks stop (the runner's own frame), so that whoever called
            the runner is never taken for model code.
    """

    def __init__(self, workspace: Workspace, barrier: types.FrameType | None = None):
        self.workspace = workspace
        self.barrier = barrier
        self._defined: dict[int, tuple[torch.nn.Module, dict[str, Any] | None]] = {}
        self.root_defined_at: dict[str, Any] | None = None
        self.calls: list[dict[str, Any]] = []
        self._operators: dict[tuple[str, int, str, str | None], list[Any]] = {}
        # Paths of the module calls in progress, innermost last.
        self._active: list[str] = []
        self._registry: dict[Any, Callable[..., Any]] | None = None
        self._engine_files: dict[str, bool] = {}

    # -- stack walking -------------------------------------------------------------------------

    def location(self, frame: types.FrameType | None) -> dict[str, Any] | None:
        """``{"file", "line"}`` of the innermost workspace frame from ``frame`` outwards, or None."""
        relative = self.workspace.relative
        barrier = self.barrier
        while frame is not None and frame is not barrier:
            rel = relative(frame.f_code.co_filename)
            if rel is not None:
                return {"file": rel, "line": frame.f_lineno}
            frame = frame.f_back
        return None

    def location_of_traceback(self, tb: types.TracebackType | None) -> dict[str, Any] | None:
        """The innermost traceback entry that lies in the workspace, as ``{"file", "line"}``."""
        found = None
        while tb is not None:
            rel = self.workspace.relative(tb.tb_frame.f_code.co_filename)
            if rel is not None:
                found = {"file": rel, "line": tb.tb_lineno}
            tb = tb.tb_next
        return found

    # -- phase 1: building the model -----------------------------------------------------------

    @contextlib.contextmanager
    def recording_definitions(self, factory: Callable[..., Any] | None = None) -> Iterator[None]:
        """Note where modules are registered while the factory runs, and where it returns from.

        The factory's return line is read from its own frame after it returned (a finished frame
        keeps the line of its last instruction). The frame is found by the first registration hook
        that fires inside the factory; no profiler or tracer is installed.
        """
        code = _code_of(factory)
        factory_frame: list[types.FrameType] = []

        def find_factory_frame(frame: types.FrameType | None) -> None:
            while frame is not None and frame is not self.barrier:
                if frame.f_code is code:
                    factory_frame.append(frame)
                    return
                frame = frame.f_back

        def on_register(parent: torch.nn.Module, name: str, child: Any) -> None:
            frame = sys._getframe(1)
            if isinstance(child, torch.nn.Module) and id(child) not in self._defined:
                self._defined[id(child)] = (child, self.location(frame))
            if code is not None and not factory_frame:
                find_factory_frame(frame)
            return None

        def on_tensor(module: torch.nn.Module, name: str, tensor: Any) -> None:
            if code is not None and not factory_frame:
                find_factory_frame(sys._getframe(1))
            return None

        registration = torch.nn.modules.module
        handles = [registration.register_module_module_registration_hook(on_register)]
        for hook_name in (
            "register_module_parameter_registration_hook",
            "register_module_buffer_registration_hook",
        ):
            register = getattr(registration, hook_name, None)
            if register is not None and code is not None:
                handles.append(register(on_tensor))
        try:
            yield
            if factory_frame:
                frame = factory_frame[0]
                rel = self.workspace.relative(frame.f_code.co_filename)
                if rel is not None:
                    self.root_defined_at = {"file": rel, "line": frame.f_lineno}
        finally:
            factory_frame.clear()
            for handle in handles:
                handle.remove()

    def defined_at(self, module: torch.nn.Module) -> dict[str, Any] | None:
        """Where ``module`` was registered into its parent (None when no workspace frame was seen)."""
        entry = self._defined.get(id(module))
        return entry[1] if entry is not None and entry[0] is module else None

    # -- phase 2: the engine's forward pass ----------------------------------------------------

    @contextlib.contextmanager
    def recording_calls(self, root: torch.nn.Module, operators: bool = True) -> Iterator[None]:
        """Note every module call's call site, and (when ``operators``) every operator's line."""
        paths: dict[int, str] = {}
        defined_by_path: dict[str, dict[str, Any] | None] = {}
        for path, module in root.named_modules():
            if id(module) in paths:
                continue
            paths[id(module)] = path
            if module is root:
                defined_by_path[path] = self.root_defined_at
            else:
                # A module that no hook saw registered (a deep copy, say) was made while its
                # parent was being built: it takes its nearest ancestor's definition line.
                parent = path.rpartition(".")[0]
                own = self.defined_at(module)
                defined_by_path[path] = own if own is not None else defined_by_path.get(parent)
        counts: dict[int, int] = defaultdict(int)
        location = self.location
        active = self._active

        def on_call(module: torch.nn.Module, args: Any) -> None:
            path = paths.get(id(module))
            if path is None:
                return None
            index = counts[id(module)]
            counts[id(module)] = index + 1
            defined = self.root_defined_at if module is root else defined_by_path.get(path)
            self.calls.append(
                {
                    "path": path,
                    "call_index": index,
                    "type": type(module).__name__,
                    "defined_at": defined,
                    "called_at": location(sys._getframe(1)),
                }
            )
            active.append(path)
            return None

        def on_return(module: torch.nn.Module, args: Any, output: Any) -> None:
            if id(module) in paths and active:
                active.pop()
            return None

        hooks = torch.nn.modules.module
        handles = [
            hooks.register_module_forward_pre_hook(on_call),
            # always_call: a forward that raises still ends its call
            hooks.register_module_forward_hook(on_return, always_call=True),
        ]
        mode = _OperatorRecorder(self) if operators else contextlib.nullcontext()
        try:
            with mode:
                yield
        finally:
            active.clear()
            for handle in handles:
                handle.remove()

    def _flop_registry(self) -> dict[Any, Callable[..., Any]]:
        if self._registry is None:
            from torch.utils.flop_counter import flop_registry, shape_wrapper

            try:
                from torchscan_lsp.engine.operator_formulas import DEFAULT_FORMULAS
            except ImportError:  # pragma: no cover - the engine always ships it
                DEFAULT_FORMULAS = {}
            custom = {
                k: v if getattr(v, "_get_raw", False) else shape_wrapper(v)
                for k, v in DEFAULT_FORMULAS.items()
            }
            self._registry = {**flop_registry, **custom}
        return self._registry

    def operator_location(self, frame: types.FrameType | None) -> dict[str, Any] | None:
        """Like :meth:`location`, but None when engine code (not the model) dispatched the operator.

        The engine's operator counter is paused, not removed, while module formulas run, so their
        tensor work still reaches this recorder; it is recognised by the engine frame it comes from.
        """
        relative = self.workspace.relative
        barrier = self.barrier
        engine_files = self._engine_files
        while frame is not None and frame is not barrier:
            code = frame.f_code
            filename = code.co_filename
            is_engine = engine_files.get(filename)
            if is_engine is None:
                is_engine = engine_files[filename] = _realpath(filename).startswith(_ENGINE_DIR)
            if is_engine:
                if code.co_name not in _ENGINE_PASS_THROUGH:
                    return None
            else:
                rel = relative(filename)
                if rel is not None:
                    return {"file": rel, "line": frame.f_lineno}
            frame = frame.f_back
        return None

    def _record_operator(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        packet = getattr(func, "overloadpacket", func)
        name = str(packet)
        if name in _METADATA_OPS:
            return
        where = self.operator_location(sys._getframe(2))
        if where is None:
            return
        formula = self._flop_registry().get(packet)
        flops: int | None = None
        if formula is not None:
            try:
                flops = int(formula(*args, **kwargs, out_val=out))
            except Exception:  # a formula that cannot read these arguments counts as none
                flops = None
        key = (where["file"], where["line"], name, self._active[-1] if self._active else None)
        entry = self._operators.get(key)
        if entry is None:
            self._operators[key] = [1, flops]
        else:
            entry[0] += 1
            entry[1] = None if entry[1] is None or flops is None else entry[1] + flops

    # -- results ---------------------------------------------------------------------------------

    def source_map(self, layers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The job's source map; ``modules`` keeps only calls that match a report layer when given.

        Each ``operators`` entry counts one operator on one line while one module call was the
        innermost in progress: ``module`` is that module's path (``None`` outside every call).
        """
        calls = self.calls
        if layers is not None:
            keys = {(layer.get("path"), layer.get("call_index")) for layer in layers}
            calls = [c for c in calls if (c["path"], c["call_index"]) in keys]
        ignored = _ignored_operators()
        operators = [
            {
                "file": f,
                "line": line,
                "operator": op,
                "calls": calls_,
                "flops": flops,
                "ignored": ignored.get(op) if flops is None else None,
                "module": module,
            }
            for (f, line, op, module), (calls_, flops) in sorted(
                self._operators.items(), key=lambda item: (*item[0][:3], item[0][3] or "")
            )
        ]
        return {"modules": [dict(c) for c in calls], "operators": operators}


class _OperatorRecorder(TorchDispatchMode):
    """Counts the operators that reach it by the innermost workspace line that dispatched them."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:  # no dynamo-disable wrapper: its first call imports dynamo (s)
        return False

    def __init__(self, recorder: SourceRecorder):
        super().__init__()
        self.recorder = recorder

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not isinstance(func, torch._ops.HigherOrderOperator):
            self.recorder._record_operator(func, args, kwargs, out)
        return out


def _ignored_operators() -> dict[str, str]:
    """The engine's operators without FLOPs by definition (views, copies, creation), with reasons."""
    try:
        from torchscan_lsp.engine.operators import IGNORED_OPERATORS
    except ImportError:  # pragma: no cover - the engine always has it
        return {}
    return IGNORED_OPERATORS


def _code_of(factory: Callable[..., Any] | None) -> types.CodeType | None:
    if factory is None or isinstance(factory, type):
        return None
    import inspect

    try:
        unwrapped = inspect.unwrap(factory)
    except ValueError:
        return None
    return getattr(unwrapped, "__code__", None)

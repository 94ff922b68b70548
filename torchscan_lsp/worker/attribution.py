"""Where in the model's code each module was built and called, and which lines dispatched which operators.

This module imports torch and knows nothing of the language server. A :class:`SourceRecorder`
watches two phases of one job:

* **building** (:meth:`SourceRecorder.recording_definitions`, around the factory call): see
  :mod:`torchscan_lsp.worker.definitions`.
* **running** (the engine's one forward pass): :class:`CallSites` observes the module calls and the
  operators of that pass. For each module call it notes the call site (the line in the parent's
  ``forward``); for each operator, the lines that dispatched it, with its FLOPs, by the layer
  record whose call was innermost; for each line, the output of the last operator it dispatched
  in its first execution (its shape, shown on lines that call no module).

Sites are the innermost workspace frame and the innermost frame of each library file inside it
(:mod:`torchscan_lsp.worker.sites`), so that a client that opens the library's modeling file gets
the same per-line hints as workspace files. The source map names every module call and operator by
the engine's layer index (its place in ``report["layers"]``), so the editor's join cannot drift.
The model is never run a second time.
"""

from __future__ import annotations

import contextlib
import sys
import types
from typing import Any, Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torchscan_lsp.engine.inputs import tensor_meta
from torchscan_lsp.worker.definitions import Definition, DefinitionRecorder
from torchscan_lsp.worker.sites import ENGINE_DIR, CodeFiles, Site, Workspace, _realpath, as_json

__all__ = ["SourceRecorder", "CallSites", "Workspace"]

# Engine frames that sit between a model's code and the operators it dispatches; any other engine
# frame on the way means the operator is the engine's own work (a module formula, input generation).
_ENGINE_PASS_THROUGH = {"__torch_dispatch__", "_higher_order"}

# Metadata queries that some tensor types dispatch to Python; they are not work.
_METADATA_OPS = {
    "aten.sym_is_contiguous", "aten.is_contiguous", "aten.is_strides_like_format",
    "aten.is_non_overlapping_and_dense", "aten.size", "aten.sym_size", "aten.stride",
    "aten.sym_stride", "aten.storage_offset", "aten.sym_storage_offset", "aten.numel",
    "aten.sym_numel", "aten.dim", "prim.layout", "prim.device",
}


def line_value(func: Any, out: Any) -> dict[str, Any] | None:
    """Metadata of what an operator's output means to the line that called it, or None.

    A tensor is itself. An operator with several returns (``native_layer_norm``'s output, mean
    and rstd; SDPA's output and log-sum-exp; ``max.dim``'s values and indices) stands for its first
    one: the Python functions over them return it (or, like ``max``, results of its shape). A
    list return (``split``, ``unbind``) is the list. Anything else (a number) says nothing.
    """
    if isinstance(out, torch.Tensor):
        return tensor_meta(out)
    if isinstance(out, list) and out and all(isinstance(item, torch.Tensor) for item in out):
        return {"kind": "list", "items": [tensor_meta(item) for item in out]}
    if isinstance(out, tuple) and out and isinstance(out[0], torch.Tensor):
        return tensor_meta(out[0])
    return None


class CallSites:
    """Observes one recording pass: call sites, operator sites and line outputs by layer index.

    Args:
        files: names model-code files and walks stacks.
        paths: module path by ``id(module)`` of the analysed model (shared modules once).
    """

    def __init__(self, files: CodeFiles, paths: dict[int, str]):
        self.files = files
        self.paths = paths
        #: layer index -> (path, workspace call site, library call sites)
        self.calls: dict[int, tuple[str, Site | None, tuple[Site, ...]]] = {}
        #: (site, operator, innermost layer) -> [calls, FLOPs or None]
        self.operators: dict[tuple[Site, str, int | None], list[Any]] = {}
        #: site -> [owner layer, operator, output metadata] of the line's first execution
        self.outputs: dict[Site, list[Any]] = {}
        # the calls in progress, innermost last: (layer, the sites that made the call)
        self._active: list[tuple[int, tuple[Site, ...]]] = []

    # -- the observer interface ------------------------------------------------------------------

    def call_started(self, module: torch.nn.Module, info: Any, layer: int | None, args: Any) -> None:
        """A module call began; ``layer`` is its record's index in ``report["layers"]``."""
        if layer is None:
            return
        workspace, library = self.files.sites(sys._getframe(1))
        self.calls[layer] = (self.paths.get(id(module), ""), workspace, library)
        self._active.append((layer, library if workspace is None else (workspace, *library)))

    def call_ended(self, module: torch.nn.Module, info: Any, layer: int | None, *rest: Any) -> None:
        """A module call returned or raised."""
        if layer is not None and self._active and self._active[-1][0] == layer:
            self._active.pop()

    def operator_ran(self, func: Any, args: Any, kwargs: Any, out: Any, flops: int | None, macs: Any,
                     layer: int | None, frame: types.FrameType | None = None) -> None:
        """An operator ran while call ``layer`` was the innermost (``None``: outside every call)."""
        workspace, library = self.files.sites(frame if frame is not None else sys._getframe(1))
        if workspace is None and not library:
            return
        name = str(getattr(func, "overloadpacket", func))
        operators, outputs = self.operators, self.outputs
        for site in library if workspace is None else (workspace, *library):
            key = (site, name, layer)
            entry = operators.get(key)
            if entry is None:
                operators[key] = [1, flops]
            else:
                entry[0] += 1
                entry[1] = None if entry[1] is None or flops is None else entry[1] + flops
            first = outputs.get(site)
            if first is None:
                value = line_value(func, out)
                if value is not None:
                    outputs[site] = [self._owner(site), name, value]
            elif first[0] == self._owner(site):  # still the line's first execution
                value = line_value(func, out)
                if value is not None:
                    first[1], first[2] = name, value

    def _owner(self, site: Site) -> int | None:
        """The call whose ``forward`` ran ``site``: the innermost call in progress that ``site``
        did not make itself (``self.fc(x) + x`` runs ``fc``'s operators inside ``fc``'s call, but
        the line belongs to the caller's)."""
        for layer, made_by in reversed(self._active):
            if site not in made_by:
                return layer
        return None

    def renumber(self, index: dict[int, int]) -> None:
        """Give every layer index its new number in ``index``; calls without one are dropped."""
        self.calls = {index[layer]: call for layer, call in self.calls.items() if layer in index}
        operators: dict[tuple[Site, str, int | None], list[Any]] = {}
        for (site, name, layer), (calls, flops) in self.operators.items():
            entry = operators.setdefault((site, name, index.get(layer) if layer is not None else None), [0, 0])
            entry[0] += calls
            entry[1] = None if entry[1] is None or flops is None else entry[1] + flops
        self.operators = operators
        for first in self.outputs.values():
            first[0] = index.get(first[0]) if first[0] is not None else None

    # -- results ---------------------------------------------------------------------------------

    def source_map(self, definitions: dict[str, Definition], layers: list[dict[str, Any]] | None,
                   ignored: dict[str, str], classes: list[dict[str, Any]]) -> dict[str, Any]:
        """The job's source map (see ``docs/architecture.md``).

        Library sites are kept in the files that define a module class of the model (``classes``:
        the modeling file a go-to-definition opens); the decorators, wrappers and back ends that
        every call passes through are left out, so the map grows with the model, not with the stack.
        """
        kept = {entry["file"] for entry in classes}

        def library(sites: tuple[Site, ...]) -> list[dict[str, Any]]:
            return [{"file": file, "line": line} for file, line in sites if file in kept]

        def shown(site: Site) -> bool:
            return site[0] in kept or not site[0].startswith("/")

        modules = []
        for layer, (path, called, called_library) in sorted(self.calls.items()):
            if layers is not None and (layer >= len(layers) or layers[layer].get("path") != path):
                continue
            defined, defined_library = definitions.get(path, (None, ()))
            modules.append({
                "layer": layer,
                "defined_at": as_json(defined),
                "called_at": as_json(called),
                "library_defined_at": library(defined_library),
                "library_called_at": library(called_library),
            })
        operators = [
            {"file": site[0], "line": site[1], "operator": name, "calls": calls, "flops": flops,
             "ignored": ignored.get(name) if flops is None else None, "layer": layer}
            for (site, name, layer), (calls, flops) in sorted(
                self.operators.items(), key=lambda item: (*item[0][0], item[0][1], -1 if item[0][2] is None else item[0][2]))
            if shown(site)
        ]
        outputs = [
            {"file": site[0], "line": site[1], "layer": owner, "operator": name, "output": value}
            for site, (owner, name, value) in sorted(self.outputs.items()) if shown(site)
        ]
        return {"modules": modules, "operators": operators, "outputs": outputs, "classes": classes}


class SourceRecorder:
    """Records module definition sites, module call sites and operator sites for one job.

    Args:
        workspace: the :class:`Workspace` whose files are named relative to its root.
        barrier: a frame at which stack walks stop (the runner's own frame), so that whoever called
            the runner is never taken for model code.
        sources: source texts that differ from the files on disk (an unsaved buffer), by path.
    """

    def __init__(self, workspace: Workspace, barrier: types.FrameType | None = None,
                 sources: dict[str, str] | None = None):
        self.workspace = workspace
        self.files = CodeFiles(workspace, barrier)
        self.definitions = DefinitionRecorder(self.files, sources)
        self.running: CallSites | None = None
        self._root: torch.nn.Module | None = None
        self._own_keys: list[tuple[str, int]] | None = None

    @property
    def barrier(self) -> types.FrameType | None:
        """The frame at which stack walks stop."""
        return self.files.barrier

    @barrier.setter
    def barrier(self, frame: types.FrameType | None) -> None:
        self.files.barrier = frame

    @property
    def root_defined_at(self) -> dict[str, Any] | None:
        """``{"file", "line"}`` of the line that built the root module (the factory's return)."""
        return as_json(self.definitions.root_defined_at)

    @root_defined_at.setter
    def root_defined_at(self, where: dict[str, Any] | None) -> None:
        self.definitions.root_defined_at = None if where is None else (where["file"], int(where["line"]))

    @property
    def calls(self) -> dict[int, Any]:
        """The module calls seen in the running phase, by layer index."""
        return self.running.calls if self.running is not None else {}

    # -- stack walking -------------------------------------------------------------------------

    def location(self, frame: types.FrameType | None) -> dict[str, Any] | None:
        """``{"file", "line"}`` of the innermost workspace frame from ``frame`` outwards, or None."""
        return as_json(self.files.sites(frame)[0])

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

    def recording_definitions(self, factory: Callable[..., Any] | None = None) -> contextlib.AbstractContextManager:
        """Note where modules are registered while the factory runs (see :mod:`.definitions`)."""
        return self.definitions.recording(factory)

    def defined_at(self, module: torch.nn.Module) -> dict[str, Any] | None:
        """Where ``module`` was registered into its parent, innermost workspace site (or None)."""
        found = self.definitions.defined(module)
        return as_json(found[0]) if found is not None else None

    # -- phase 2: the engine's forward pass ----------------------------------------------------

    def observer(self, root: torch.nn.Module) -> CallSites:
        """The observer of the engine's recording pass over ``root``."""
        paths: dict[int, str] = {}
        for path, module in root.named_modules():
            paths.setdefault(id(module), path)
        self._root = root
        self.running = CallSites(self.files, paths)
        return self.running

    @contextlib.contextmanager
    def recording_calls(self, root: torch.nn.Module, operators: bool = True) -> Iterator[None]:
        """Drive :meth:`observer` from global module hooks and a dispatch mode of this recorder's own.

        Used until the engine's recording pass takes observers: layer indexes count the calls in
        the order the engine appends its layer records, and :meth:`source_map` keeps only the calls
        whose index names a record of the same path.
        """
        running = self.observer(root)
        paths = running.paths
        own = self._own_keys = []
        counts: dict[int, int] = {}
        active: list[int] = []

        def on_call(module: torch.nn.Module, args: Any) -> None:
            path = paths.get(id(module))
            if path is None:
                return None
            layer = len(own)
            own.append((path, counts.get(id(module), 0)))
            counts[id(module)] = own[-1][1] + 1
            running.call_started(module, None, layer, args)
            active.append(layer)
            return None

        def on_return(module: torch.nn.Module, args: Any, output: Any) -> None:
            if id(module) in paths and active:
                running.call_ended(module, None, active.pop())
            return None

        hooks = torch.nn.modules.module
        handles = [
            hooks.register_module_forward_pre_hook(on_call),
            # always_call: a forward that raises still ends its call
            hooks.register_module_forward_hook(on_return, always_call=True),
        ]
        mode = _OperatorRecorder(running, active, self.files.barrier) if operators else contextlib.nullcontext()
        try:
            with mode:
                yield
        finally:
            active.clear()
            for handle in handles:
                handle.remove()

    def source_map(self, layers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The job's source map; ``modules`` keeps only calls that match a report layer when given."""
        if self.running is None or self._root is None:
            return {"modules": [], "operators": [], "outputs": [], "classes": []}
        if self._own_keys is not None:  # our own hooks numbered the calls: use the report's numbers
            engine = {(layer.get("path"), layer.get("call_index", 0)): i for i, layer in enumerate(layers or [])}
            self.running.renumber({i: engine[key] for i, key in enumerate(self._own_keys) if key in engine})
            self._own_keys = None
        return self.running.source_map(self.definitions.definitions(self._root), layers, _ignored_operators(),
                                       self.definitions.classes(self._root))


class _OperatorRecorder(TorchDispatchMode):
    """Tells a :class:`CallSites` of the operators that reach it, with FLOPs from the engine's table."""

    def __init__(self, running: CallSites, active: list[int], barrier: types.FrameType | None):
        super().__init__()
        self.running = running
        self.active = active
        self.barrier = barrier
        self._registry: dict[Any, Callable[..., Any]] | None = None
        self._engine_files: dict[str, bool] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not isinstance(func, torch._ops.HigherOrderOperator):
            packet = getattr(func, "overloadpacket", func)
            if str(packet) not in _METADATA_OPS:
                frame = sys._getframe(1)
                if self._model_work(frame):
                    self.running.operator_ran(func, args, kwargs, out, self._flops(packet, args, kwargs, out), None,
                                              self.active[-1] if self.active else None, frame)
        return out

    def _model_work(self, frame: types.FrameType | None) -> bool:
        """False when engine code (not the model) dispatched the operator: the engine's operator
        counter is paused, not removed, while module formulas run, so their tensor work reaches
        this mode too; it is recognised by the engine frame it comes from."""
        engine_files = self._engine_files
        while frame is not None and frame is not self.barrier:
            code = frame.f_code
            is_engine = engine_files.get(code.co_filename)
            if is_engine is None:
                is_engine = engine_files[code.co_filename] = _realpath(code.co_filename).startswith(ENGINE_DIR)
            if is_engine and code.co_name not in _ENGINE_PASS_THROUGH:
                return False
            if not is_engine and self.running.files.kind(code.co_filename)[0]:
                return True
            frame = frame.f_back
        return False

    def _flops(self, packet: Any, args: Any, kwargs: Any, out: Any) -> int | None:
        if self._registry is None:
            from torch.utils.flop_counter import flop_registry, shape_wrapper

            from torchscan_lsp.engine.operator_formulas import DEFAULT_FORMULAS

            custom = {k: v if getattr(v, "_get_raw", False) else shape_wrapper(v) for k, v in DEFAULT_FORMULAS.items()}
            self._registry = {**flop_registry, **custom}
        formula = self._registry.get(packet)
        if formula is None:
            return None
        try:
            return int(formula(*args, **kwargs, out_val=out))
        except Exception:  # a formula that cannot read these arguments counts as none
            return None


def _ignored_operators() -> dict[str, str]:
    """The engine's operators without FLOPs by definition (views, copies, creation), with reasons."""
    from torchscan_lsp.engine.operators import IGNORED_OPERATORS

    return IGNORED_OPERATORS

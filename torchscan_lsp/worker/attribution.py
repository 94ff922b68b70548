"""Where in the model's code each module was built and called, and which lines dispatched which operators.

This module imports torch and knows nothing of the language server. A :class:`SourceRecorder`
watches two phases of one job:

* **building** (:meth:`SourceRecorder.recording_definitions`, around the factory call): see
  :mod:`torchscan_lsp.worker.definitions`.
* **running** (the engine's one forward pass): :class:`CallSites` observes the module calls and the
  operators of that pass. For each module call it notes the call site (the line in the parent's
  ``forward``; for a call made through ``module.forward(...)``, the line that made it); for each
  operator, the lines that dispatched it, with its FLOPs, by the layer record whose call was
  innermost, and the lines that called the plain functions it ran under (``under``); for each
  line, what it computed run by run (:mod:`torchscan_lsp.worker.line_runs`: its first run's
  result, the names it assigned, how its runs' shapes varied).

Sites are the innermost workspace frame and the innermost frame of each library file inside it
(:mod:`torchscan_lsp.worker.sites`), so that a client that opens the library's modeling file gets
the same per-line hints as workspace files. The source map names every module call and operator by
the engine's layer index (its place in ``report["layers"]``), so the editor's join cannot drift.
The model is never run a second time.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import sys
import types
from typing import Any, Callable

import torch

from torchscan_lsp.contract.messages import SourceMap, is_library
from torchscan_lsp.contract.source_map import holds_tensor
from torchscan_lsp.engine.recording.inputs import tensor_meta
from torchscan_lsp.engine.recording.observers import PassObserver
from torchscan_lsp.worker.definitions import Definition, DefinitionRecorder
from torchscan_lsp.worker.line_runs import LineRuns
from torchscan_lsp.worker.line_values import SiteRecord, live_key, shape_key
from torchscan_lsp.worker.sites import WORKSPACE, CodeFiles, Site, Workspace, as_json
from torchscan_lsp.worker.uncalled import uncalled_modules
from torchscan_lsp.worker.unregistered import unregistered_modules

__all__ = ["SourceRecorder", "CallSites", "Workspace"]


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


class CallSites(PassObserver):
    """Observes the engine's recording pass: call sites, operator sites and line outputs by layer index.

    It adds no hook, dispatch mode or FLOP table of its own: the engine tells it of every call and
    (in full mode) every counted operator with its FLOPs, and its layer indexes are the report's.

    Args:
        files: names model-code files and walks stacks.
    """

    def __init__(self, files: CodeFiles):
        self.files = files
        #: layer index -> (path, workspace call site, library call sites)
        self.calls: dict[int, tuple[str, Site | None, tuple[Site, ...]]] = {}
        #: (site, operator, innermost layer) -> [calls, FLOPs or None]
        self.operators: dict[tuple[Site, str, int | None], list[Any]] = {}
        #: the same for the workspace lines outside the innermost one: lines that called a plain
        #: function (``xq, xk = apply_rotary_emb(...)``) under which the operator ran
        self.under: dict[tuple[Site, str, int | None], list[Any]] = {}
        #: every line's runs: what it computed in each (:mod:`.line_runs`; the workspace's loops
        #: get line events)
        self.runs = LineRuns(lambda code: files.kind(code.co_filename)[0] == WORKSPACE)
        # the calls in progress, innermost last: (layer, the call's entry frame, its workspace
        # site, its library sites, the runs of the lines that made it)
        self._active: list[tuple[Any, ...]] = []
        self._names: dict[Any, str] = {}
        #: the innermost module call that raised: (its path, its class name, its tensor arguments'
        #: shapes), or None
        self.failed_call: tuple[str, str, list[tuple[int, ...]]] | None = None

    # -- the observer interface ------------------------------------------------------------------

    def call_started(self, module: torch.nn.Module, info: Any, layer: int | None, args: Any) -> None:
        """A module call began; ``layer`` is its record's index in ``report["layers"]`` (None: a
        call inside a metric leaf, which opens no record)."""
        if layer is not None:
            # PyTorch's frame that runs this call's hooks and forward: it stays on the stack until the
            # call ends, and everything outside it is the caller's, suspended: its sites hold for
            # every operator of the call (operator_ran walks only the frames inside it)
            self._start(info, layer, self.files.outside_package(sys._getframe(1)), True)
        # after the caller's lines were seen at this event: they may have needed line events
        self.runs.call_started()

    def forward_started(self, module: torch.nn.Module, info: Any, layer: int | None, args: Any, frame: Any) -> None:
        """A call made through ``module.forward(...)`` was found running in ``frame``: its caller's
        frame (``frame.f_back``) stands where PyTorch's call frame stands for a hooked call."""
        if layer is not None:
            self._start(info, layer, frame.f_back, False)
        self.runs.call_started()

    def _start(self, info: Any, layer: int, entry: types.FrameType | None, hooked: bool) -> None:
        workspace, library, _ = self.files.sites(entry)
        self.calls[layer] = (info.path, workspace, library)
        parent = self._active[-1] if self._active else None
        items, _ = self.files.chain(entry, parent[1] if parent is not None else None)
        runs = self.runs.visit(parent[0] if parent is not None else None,
                               [((name, frame.f_lineno), frame, callee) for _, name, frame, callee in items], hooked)
        self._active.append((layer, entry, workspace, library, runs))

    def call_ended(self, module: torch.nn.Module, info: Any, layer: int | None, args: Any, kwargs: Any, output: Any,
                   error: BaseException | None) -> None:
        """A module call returned or raised."""
        if error is not None and self.failed_call is None:  # the innermost ends first
            shapes = [tuple(arg.shape) for arg in args if isinstance(arg, torch.Tensor)]
            self.failed_call = (info.path, type(module).__name__, shapes)
        if layer is not None and self._active and self._active[-1][0] == layer:
            runs = self._active.pop()[4]
            if error is None:
                self.runs.call_returned(layer, lambda: _forward_code(module), output)
            self.runs.owner_ended(layer)
            if error is None:  # the call's output is now the latest value of the lines that made it
                self.runs.value(runs, None, layer, live_key(output))
        self.runs.call_ended()
        if not self._active:  # the pass's outermost call: no line of it runs any more
            self.runs.stop_tracing()

    def operator_ran(self, func: Any, args: Any, kwargs: Any, out: Any, flops: int | None, macs: int | None,
                     layer: int | None) -> None:
        """An operator ran while record ``layer`` was the innermost (``None``: outside every record).

        Its sites: the innermost workspace line first (the call's own line when no workspace frame
        is inside the call), then the innermost line of each library file inside it; the workspace
        lines outside the innermost one, up to the call, ran it *under* a function they called."""
        call = self._active[-1] if self._active else None
        items, stopped = self.files.chain(sys._getframe(1), call[1] if call is not None else None)
        workspace: Site | None = None
        library: list[Site] = []
        under: list[Site] = []
        visited = []
        for kind, file, frame, callee in items:
            site = (file, frame.f_lineno)
            visited.append((site, frame, callee))
            if kind == WORKSPACE:
                if workspace is None:
                    workspace = site
                elif site not in under:
                    under.append(site)
            elif workspace is None and all(seen[0] != file for seen in library):
                library.append(site)
        if workspace is None and stopped:  # the rest of the stack is the call's caller: its sites are known
            workspace = call[2]  # type: ignore[index]
            library += [site for site in call[3] if all(seen[0] != site[0] for seen in library)]  # type: ignore[index]
        if workspace is None and not library:
            return
        name = self._names.get(func)
        if name is None:
            name = self._names[func] = str(getattr(func, "overloadpacket", func))
        for found, sites in ((self.operators, library if workspace is None else (workspace, *library)),
                             (self.under, under)):
            for site in sites:
                key = (site, name, layer)
                entry = found.get(key)
                if entry is None:
                    found[key] = [1, flops]
                else:
                    entry[0] += 1
                    entry[1] = None if entry[1] is None or flops is None else entry[1] + flops
        if visited:
            value = line_value(func, out)
            runs = self.runs.visit(call[0] if call is not None else None, visited)
            if value is not None:
                self.runs.value(runs, name, value, shape_key(value))

    # -- results ---------------------------------------------------------------------------------

    def source_map(self, definitions: dict[str, Definition], layers: list[dict[str, Any]] | None,
                   ignored: dict[str, str], classes: list[dict[str, Any]]) -> SourceMap:
        """The job's source map (:class:`~torchscan_lsp.contract.messages.SourceMap`) but for its
        ``uncalled`` and ``parameters``, which need the model (:meth:`SourceRecorder.source_map`).

        Library sites are kept in the files that define a module class of the model (``classes``:
        the modeling file a go-to-definition opens); the decorators, wrappers and back ends that
        every call passes through are left out, so the map grows with the model, not with the stack.
        """
        kept = {entry["file"] for entry in classes}

        def library(sites: tuple[Site, ...]) -> list[dict[str, Any]]:
            return [{"file": file, "line": line} for file, line in sites if file in kept]

        def shown(site: Site) -> bool:
            return site[0] in kept or not is_library(site[0])

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
        def listed(found: dict[tuple[Site, str, int | None], list[Any]]) -> list[dict[str, Any]]:
            return [
                {"file": site[0], "line": site[1], "operator": name, "calls": calls, "flops": flops,
                 "ignored": ignored.get(name) if flops is None else None, "layer": layer}
                for (site, name, layer), (calls, flops) in sorted(
                    found.items(), key=lambda item: (*item[0][0], item[0][1], -1 if item[0][2] is None else item[0][2]))
                if shown(site)
            ]

        operators, under = listed(self.operators), listed(self.under)
        self.runs.finish()
        outputs = []
        for site, record in sorted(self.runs.sites.items()):
            entry = _output_entry(site, record, layers, self.calls) if shown(site) else None
            if entry is not None:
                outputs.append(entry)
        return {"modules": modules, "operators": operators, "under": under, "outputs": outputs,  # type: ignore[typeddict-item]
                "classes": classes}


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

    @property
    def failed_call(self) -> tuple[str, str, list[tuple[int, ...]]] | None:
        """The innermost module call that raised in the running phase (see :class:`CallSites`)."""
        return self.running.failed_call if self.running is not None else None

    # -- stack walking -------------------------------------------------------------------------

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

    # -- phase 2: the engine's forward pass ----------------------------------------------------

    def observer(self, root: torch.nn.Module) -> CallSites:
        """The observer to hand to ``crawl_module(root, ..., observers=[...])``."""
        self._root = root
        self.running = CallSites(self.files)
        return self.running

    def source_map(self, layers: list[dict[str, Any]] | None = None) -> SourceMap:
        """The job's source map; ``modules`` keeps only calls that match a report layer when given.

        Built with Python's cyclic garbage collector paused, as the engine builds its report: the
        map is thousands of small dicts without cycles, and the collections their allocation would
        trigger traverse every object of the process (torch's included).
        """
        if self.running is None or self._root is None:
            return {"modules": [], "operators": [], "under": [], "outputs": [], "classes": [], "uncalled": [],
                    "parameters": [], "unregistered": []}
        collecting = gc.isenabled()
        gc.disable()
        try:
            definitions = self.definitions.definitions(self._root)
            found = self.running.source_map(definitions, layers, _ignored_operators(), self.definitions.classes(self._root))
            kept = {entry["file"] for entry in found["classes"]}

            def sites(path: str) -> dict[str, Any]:
                defined, library = definitions.get(path, (None, ()))
                return {"defined_at": as_json(defined),
                        "library_defined_at": [{"file": f, "line": n} for f, n in library if f in kept]}

            found["uncalled"] = uncalled_modules(self._root, [path for path, _, _ in self.running.calls.values()], sites)
            found["parameters"] = [entry for entry in self.definitions.parameters(self._root)
                                   if entry["file"] in kept or not is_library(entry["file"])]
            found["unregistered"] = unregistered_modules(self._root, lambda m: as_json(self.definitions.built_site(m)))
            return found
        finally:
            if collecting:
                gc.enable()


def _output_entry(site: Site, record: SiteRecord, layers: list[dict[str, Any]] | None,
                  calls: dict[int, tuple[str, Site | None, tuple[Site, ...]]]) -> dict[str, Any] | None:
    """The source map's ``outputs`` entry of a line: its first run's result (the output of the last
    operator it dispatched, or of the module call it made last: that call's record's output; what
    it returned, for a line that returns a display of several values), the names it assigned then, and, when it ran more than once, how many runs and how their shapes
    varied. None for a line that computed nothing the map can show."""
    first = record.first
    if first is None:
        return None
    entry: dict[str, Any] = {"file": site[0], "line": site[1], "layer": first.owner, "operator": first.operator,
                             "call": None, "output": first.value}
    if first.operator is None and first.value is not None:  # a module call's output: its record's
        index = first.value
        report = layers[index] if layers is not None and index < len(layers) else None
        if report is None or calls[index][0] != report.get("path"):
            entry["output"] = None
        else:
            entry["call"], entry["output"] = report.get("path"), report.get("output")
    if record.returns:  # its last operator's output is one item of what it returned, or none of it
        entry["call"] = None
        entry["output"] = first.returned[0] if first.returned is not None else None
        entry["returned"] = first.returned is not None
    if entry["output"] is None and first.targets:  # a line that only assigned (first = outputs[0])
        entry["output"] = next((meta for _, meta, _ in first.targets if holds_tensor(meta)), None)
    if first.targets:
        entry["targets"] = [{"name": name, "output": meta, "range": _range(record.target_shapes.get(name))}
                            for name, meta, _ in first.targets]
    if entry["output"] is None and not first.targets:
        return None
    if record.runs > 1:
        entry["runs"] = record.runs
        entry["range"] = record.shapes.range()
    return entry


def _forward_code(module: torch.nn.Module) -> types.CodeType | None:
    """The code of the function a call of ``module`` runs: its ``forward``, unwrapped."""
    forward = getattr(module, "forward", None)
    return getattr(inspect.unwrap(getattr(forward, "__func__", forward)), "__code__", None)


def _range(stats: Any) -> dict[str, Any] | None:
    return stats.range() if stats is not None else None


def _ignored_operators() -> dict[str, str]:
    """The engine's operators without FLOPs by definition (views, copies, creation), with reasons."""
    from torchscan_lsp.engine.recording.operators import IGNORED_OPERATORS

    return IGNORED_OPERATORS

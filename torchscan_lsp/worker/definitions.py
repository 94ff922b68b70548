"""Where each module of a model was built, noted while the target's factory runs.

A global module-registration hook fires whenever a module is registered as a child. For each such
child, :class:`DefinitionRecorder` notes the innermost frame of each model-code file on the stack
(:meth:`~torchscan_lsp.worker.sites.CodeFiles.frames`): the ``self.conv = nn.Conv2d(...)`` line of
the parent's ``__init__``, the library's own ``self.q_proj = nn.Linear(...)`` line, or the workspace
line that made library code build it. Only registrations are watched: no profiler or tracer runs.

**Children of a multi-line container constructor.** ``nn.Sequential(``, ``nn.ModuleList([``
and ``nn.ModuleDict({`` register all their children while one call runs, so the frame's line is the
call's first line for every child. When the frame is calling the container's own ``__init__``
(checked against the container's class hierarchy, so that a call into some other function is never
mistaken for it), the frame's current instruction gives the span of the call
(``code.co_positions()`` at ``frame.f_lasti``), and :class:`~torchscan_lsp.targets.source_lines.
SourceLines` maps the child's name to the line of the argument or element that built it.

**Modules built before their parent registers them.** ``layers.append(block(...))`` then
``nn.Sequential(*layers)``: the registration runs on the ``Sequential`` line, but the line that
built each block is the ``append`` line. So the first registration into a module while its own
``__init__`` runs (a child or a parameter: the module is being built) notes the line each frame
outside that ``__init__`` was on; when the frame that later registers the module is among them, its
line then is the module's line. A helper that builds the module (``self.conv1 = conv3x3(64, 64)``)
keeps the registering line, which is where the helper was called. Every module is noted so while
its ``__init__`` runs (``nn.Module.__init__`` is wrapped while the factory runs), so a module without
parameters or children (``nn.ReLU()`` after a starred list in a ``Sequential(``, whose arguments
cannot be counted from the source) has its line too. A module handed to another's constructor
(``proj = nn.Linear(d, 8)``, then ``Block(proj)`` registers it with ``self.proj = proj``) belongs
to the line of the first workspace frame outside that constructor that was building it.

**Parameters assigned in model code.** ``self.cls_token = nn.Parameter(torch.zeros(1, 1, d))``:
a parameter registered by a frame of model code itself (not by a torch module's own ``__init__``,
whose parameters belong to its module's line) is noted with that frame's line, unless it was
registered before (``self.head.weight = self.emb.weight`` ties a parameter: it is the embedding's).

**Class lines.** :meth:`DefinitionRecorder.classes` finds, for every module class of the model
defined in model code, its ``class`` line and the paths of its instances.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import inspect
import sys
import types
from typing import Any, Callable, Iterator

import torch

from torchscan_lsp.targets.source_lines import MODULE_DICT, MODULE_LIST, SEQUENTIAL, SourceLines
from torchscan_lsp.worker.copies import CopyTracker
from torchscan_lsp.worker.sites import WORKSPACE, CodeFiles, Site

__all__ = ["DefinitionRecorder", "Definition"]

_MODULE_FILE = torch.nn.modules.module.__file__

_COMPREHENSIONS = frozenset({"<listcomp>", "<genexpr>", "<dictcomp>", "<setcomp>"})

_CONTAINERS = ((torch.nn.Sequential, SEQUENTIAL), (torch.nn.ModuleList, MODULE_LIST), (torch.nn.ModuleDict, MODULE_DICT))

Definition = tuple["Site | None", tuple[Site, ...]]
"""Where a module was built: the innermost workspace site (or None) and the library sites inside it."""


@functools.lru_cache(maxsize=4096)
def _positions(code: types.CodeType) -> tuple[tuple[Any, ...], ...]:
    return tuple(code.co_positions())


@functools.lru_cache(maxsize=256)
def _init_codes(cls: type) -> frozenset[types.CodeType]:
    """The code objects of the ``__init__`` methods of ``cls`` and its bases."""
    codes = set()
    for base in cls.__mro__:
        init = base.__dict__.get("__init__")
        code = getattr(init, "__code__", None)
        if code is not None:
            codes.add(code)
    return frozenset(codes)


def _container_kind(module: torch.nn.Module) -> str | None:
    for cls, kind in _CONTAINERS:
        if isinstance(module, cls):
            return kind
    return None


class DefinitionRecorder:
    """Records where modules are built (phase one of a job's source attribution).

    Args:
        files: names model-code files and walks stacks (with the job's barrier).
        sources: source texts that differ from the files on disk (an unsaved buffer), by the
            absolute path the module was compiled under.
    """

    def __init__(self, files: CodeFiles, sources: dict[str, str] | None = None):
        self.files = files
        self.sources = dict(sources or {})
        self.root_defined_at: Site | None = None
        self._defined: dict[int, tuple[torch.nn.Module, Definition]] = {}
        self._lines: dict[str, SourceLines] = {}
        #: module id -> (module, {frame outside its __init__: its line then}), while the factory runs
        self._built: dict[int, tuple[torch.nn.Module, dict[types.FrameType, int]]] = {}
        #: module id -> (module, the innermost workspace line that was building it), kept after the run
        self._built_sites: dict[int, tuple[torch.nn.Module, Site]] = {}
        #: (module, parameter name, site) of each parameter assigned by model code
        self._parameters: list[tuple[torch.nn.Module, str, Site]] = []
        self._copies = CopyTracker()

    # -- source text -----------------------------------------------------------------------------

    def source_lines(self, filename: str) -> SourceLines:
        """The parsed source of ``filename`` (the job's own text for the target file)."""
        found = self._lines.get(filename)
        if found is None:
            text = self.sources.get(filename)
            if text is None:
                try:
                    with open(filename, "rb") as handle:
                        text = importlib.util.decode_source(handle.read())
                except (OSError, SyntaxError, UnicodeDecodeError):
                    text = ""
            found = self._lines[filename] = SourceLines(text)
        return found

    # -- the factory's run -----------------------------------------------------------------------

    @contextlib.contextmanager
    def recording(self, factory: Callable[..., Any] | None = None) -> Iterator[None]:
        """Note where modules are registered while the factory runs, and where it returns from.

        The factory's return line is read from its own frame after it returned (a finished frame
        keeps the line of its last instruction). The frame is found by the first registration hook
        that fires inside the factory.
        """
        code = _code_of(factory)
        factory_frame: list[types.FrameType] = []
        barrier = self.files.barrier

        def find_factory_frame(frame: types.FrameType | None) -> None:
            while frame is not None and frame is not barrier:
                if frame.f_code is code:
                    factory_frame.append(frame)
                    return
                frame = frame.f_back

        def on_register(parent: torch.nn.Module, name: str, child: Any) -> None:
            frame = sys._getframe(1)
            self._note_built(parent, frame)
            if isinstance(child, torch.nn.Module) and id(child) not in self._defined:
                self._defined[id(child)] = (child, self._definition(frame, parent, name, child))
            if code is not None and not factory_frame:
                find_factory_frame(frame)
            return None

        def on_tensor(module: torch.nn.Module, name: str, tensor: Any) -> None:
            frame = sys._getframe(1)
            self._note_built(module, frame)
            if code is not None and not factory_frame:
                find_factory_frame(frame)
            return None

        registered: set[int] = set()  # every parameter seen so far: a second registration ties it

        def on_parameter(module: torch.nn.Module, name: str, parameter: Any) -> None:
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename == _MODULE_FILE:  # __setattr__, register_parameter
                frame = frame.f_back
            tied = id(parameter) in registered
            registered.add(id(parameter))
            if frame is not None and parameter is not None and not tied:
                site = self.files.name(frame.f_code.co_filename)
                if site is not None:
                    self._parameters.append((module, name, (site, frame.f_lineno)))
            return on_tensor(module, name, parameter)

        registration = torch.nn.modules.module
        handles = [registration.register_module_module_registration_hook(on_register), self._watch_inits()]
        for hook_name, hook in (("register_module_parameter_registration_hook", on_parameter),
                                ("register_module_buffer_registration_hook", on_tensor)):
            register = getattr(registration, hook_name, None)
            if register is not None:
                handles.append(register(hook))
        try:
            with self._copies.tracking():
                yield
            if factory_frame:
                frame = factory_frame[0]
                rel = self.files.workspace.relative(frame.f_code.co_filename)
                if rel is not None:
                    self.root_defined_at = (rel, frame.f_lineno)
        finally:
            factory_frame.clear()
            self._keep_built_sites()
            self._built.clear()  # it holds frames
            for handle in handles:
                handle.remove()

    def _watch_inits(self) -> Any:
        """Note every module while its ``__init__`` runs, as its first registration does (a module
        without parameters or children registers nothing: ``nn.ReLU()`` after a starred list in a
        ``Sequential(`` is known by its line only so); the returned handle's ``remove()`` undoes it."""
        module_class, init = torch.nn.Module, torch.nn.Module.__init__
        note = self._note_built

        @functools.wraps(init)
        def watched_init(module: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
            init(module, *args, **kwargs)
            note(module, sys._getframe(1))

        module_class.__init__ = watched_init  # type: ignore[method-assign]
        return types.SimpleNamespace(remove=lambda: setattr(module_class, "__init__", init))

    def _note_built(self, module: torch.nn.Module, frame: types.FrameType | None) -> None:
        """At the first registration into ``module``: when its own ``__init__`` runs it (it is being
        built), the line of each frame outside the outermost ``__init__`` of its class hierarchy."""
        if id(module) in self._built:
            return
        inits, barrier = _init_codes(type(module)), self.files.barrier
        while frame is not None and frame is not barrier and frame.f_code not in inits:
            frame = frame.f_back
        lines: dict[types.FrameType, int] = {}
        if frame is not None and frame is not barrier:
            while frame.f_back is not None and frame.f_back.f_code in inits:  # super().__init__() chains
                frame = frame.f_back
            callee, frame = frame, frame.f_back
            while frame is not None and frame is not barrier:
                # a module built in a comprehension (``[Block(d) for _ in range(n)]``, its own frame
                # before Python 3.12) was built on its element's line, not on the comprehension's
                inner = lines.get(callee) if callee.f_code.co_name in _COMPREHENSIONS else None
                lines[frame] = inner if inner is not None and callee.f_code.co_filename == frame.f_code.co_filename \
                    else frame.f_lineno
                callee, frame = frame, frame.f_back
        self._built[id(module)] = (module, lines)

    def _keep_built_sites(self) -> None:
        """Keep, for each module built while the factory ran, the innermost workspace line of the
        frames that were building it (``model = Whisper(dims)`` in the factory, for the root)."""
        for key, (module, lines) in self._built.items():
            for frame, line in lines.items():  # innermost first
                found, name = self.files.kind(frame.f_code.co_filename)
                if found == WORKSPACE:
                    self._built_sites[key] = (module, (name, line))  # type: ignore[assignment]
                    break

    def _definition(self, frame: types.FrameType, parent: torch.nn.Module, name: str, child: torch.nn.Module) -> Definition:
        kind = _container_kind(parent)
        built = self._built.get(id(child))
        built_at = built[1] if built is not None and built[0] is child else {}
        workspace: Site | None = None
        library: list[Site] = []
        for found, file, site_frame, callee in self.files.frames(frame):
            line = built_at.get(site_frame) or site_frame.f_lineno
            if site_frame not in built_at and kind is not None and callee is not None \
                    and callee.f_code in _init_codes(type(parent)):
                line = self._child_line(site_frame, kind, name) or line
            if found == WORKSPACE:
                workspace = (file, line) if site_frame in built_at else self._handed_in(site_frame, built_at) or (file, line)
            else:
                library.append((file, line))
        return workspace, tuple(library)

    def _handed_in(self, frame: types.FrameType, built_at: dict[types.FrameType, int]) -> Site | None:
        """The line that built a module handed to the constructor whose ``frame`` registers it
        (``proj = nn.Linear(d, 8)`` then ``Block(proj)``, whose ``__init__`` says ``self.proj =
        proj``): the line then of the first workspace frame out from ``frame`` that was building it."""
        barrier, outer = self.files.barrier, frame.f_back
        while outer is not None and outer is not barrier:
            line = built_at.get(outer)
            if line is not None:
                found, name = self.files.kind(outer.f_code.co_filename)
                if found == WORKSPACE:
                    return (name, line)  # type: ignore[return-value]
            outer = outer.f_back
        return None

    def _child_line(self, frame: types.FrameType, kind: str, name: str) -> int | None:
        code = frame.f_code
        positions = _positions(code)
        index = frame.f_lasti // 2
        if not 0 <= index < len(positions):
            return None
        first, last, column, end_column = positions[index]
        if first is None or last is None or column is None or end_column is None:
            return None
        if first == last:  # a call on one line built every child on it
            return first
        return self.source_lines(code.co_filename).child_line((first, column), (last, end_column), kind, name)

    def built_site(self, module: torch.nn.Module) -> Site | None:
        """The innermost workspace line that was building ``module`` while the factory ran, or None."""
        entry = self._built_sites.get(id(module))
        return entry[1] if entry is not None and entry[0] is module else None

    def defined(self, module: torch.nn.Module) -> Definition | None:
        """Where ``module`` was registered into its parent (None when no hook saw it)."""
        entry = self._defined.get(id(module))
        return entry[1] if entry is not None and entry[0] is module else None

    def definitions(self, root: torch.nn.Module) -> dict[str, Definition]:
        """Where each module of ``root`` was built, by path (shared modules under their first).

        The root's own definition is the workspace line that built it (``model = Whisper(dims)`` in
        the factory), else the factory's return line. A module that no hook saw registered takes
        the definition of the module it was deep-copied from (:mod:`.copies`: the original's
        ``self.lin = nn.Linear(d, d)`` line), else, made while its parent was being built, its
        nearest ancestor's.
        """
        found: dict[str, Definition] = {}
        seen: set[int] = set()
        for path, module in root.named_modules():
            if id(module) in seen:
                continue
            seen.add(id(module))
            if module is root:
                built = self._built_sites.get(id(root))
                found[path] = (built[1] if built is not None and built[0] is root else self.root_defined_at, ())
                continue
            own = self.defined(module)
            if own is None:
                own = next(filter(None, map(self.defined, self._copies.originals(module))), None)
            found[path] = own if own is not None else found.get(path.rpartition(".")[0], (None, ()))
        return found

    def parameters(self, root: torch.nn.Module) -> list[dict[str, Any]]:
        """``{"file", "line", "path", "name", "shape", "numel", "trainable"}`` of each parameter of
        ``root`` that model code assigned itself (``self.cls_token = nn.Parameter(...)``), as it is
        now (a parameter replaced later, or tied to another, is the one the model holds)."""
        paths: dict[int, str] = {}
        for path, module in root.named_modules():
            paths.setdefault(id(module), path)
        found = []
        for module, name, (file, line) in self._parameters:
            path = paths.get(id(module))
            parameter = module._parameters.get(name) if path is not None else None
            if parameter is None:
                continue
            found.append({"file": file, "line": line, "path": path, "name": name, "shape": list(parameter.shape),
                          "numel": parameter.numel(), "trainable": bool(parameter.requires_grad)})
        return found

    # -- class lines -----------------------------------------------------------------------------

    def classes(self, root: torch.nn.Module) -> list[dict[str, Any]]:
        """``{"file", "line", "name", "paths"}`` of each module class of ``root`` defined in model
        code: its ``class`` line and the paths of its instances, in module order."""
        by_class: dict[type, list[str]] = {}
        seen: set[int] = set()
        for path, module in root.named_modules():
            if id(module) not in seen:
                seen.add(id(module))
                by_class.setdefault(type(module), []).append(path)
        found = []
        for cls, paths in by_class.items():
            where = self._class_site(cls)
            if where is not None:
                found.append({"file": where[0], "line": where[1], "name": cls.__qualname__, "paths": paths})
        return found

    def _class_site(self, cls: type) -> Site | None:
        try:
            filename = inspect.getsourcefile(cls) or inspect.getfile(cls)
        except (TypeError, OSError):
            return None
        name = self.files.name(filename)
        if name is None:
            return None
        # a line of the class's own body (its first method): the class line is found above it
        # without parsing the file
        lines = [code.co_firstlineno for value in vars(cls).values()
                 if (code := getattr(getattr(value, "__func__", value), "__code__", None)) is not None
                 and code.co_filename == filename]
        line = self.source_lines(filename).class_line(cls.__qualname__, min(lines) if lines else None)
        return None if line is None else (name, line)


def _code_of(factory: Callable[..., Any] | None) -> types.CodeType | None:
    if factory is None or isinstance(factory, type):
        return None
    try:
        unwrapped = inspect.unwrap(factory)
    except ValueError:
        return None
    return getattr(unwrapped, "__code__", None)

"""Importing the user's file for one job, so that every job sees the workspace as it is now."""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import importlib.util
import linecache
import os
import sys
import types
from pathlib import Path
from typing import Any

from torchscan_lsp.worker.attribution import Workspace

__all__ = ["ImportScope"]

NOTEBOOK = ".ipynb"
"""A Jupyter notebook's suffix: the job's source text holds its code cells, joined."""


def _display(*objects: Any, **options: Any) -> None:
    """IPython's ``display`` for a notebook run outside IPython: each object's ``repr``, printed (a
    job's prints go to its log, never to the protocol)."""
    for shown in objects:
        print(repr(shown))


class ImportScope:
    """Imports workspace files for one job and removes them from ``sys.modules`` afterwards.

    On entry the workspace root goes first on ``sys.path`` and modules already imported from the
    workspace are set aside (a file may have changed since). On exit every module imported from the
    workspace during the job is removed, whatever was set aside or shadowed comes back, and
    ``sys.path`` is restored.
    """

    def __init__(self, workspace: Workspace):
        self.workspace = workspace
        self._saved_modules: dict[str, types.ModuleType] = {}
        self._created: set[str] = set()
        self._added_path = False
        self._appended: list[str] = []

    def __enter__(self) -> ImportScope:
        root = self.workspace.root
        if root not in sys.path:
            sys.path.insert(0, root)
            self._added_path = True
        importlib.invalidate_caches()
        for name, module in list(sys.modules.items()):
            if self._is_workspace_module(module):
                self._saved_modules[name] = module
                del sys.modules[name]
        return self

    def __exit__(self, *exc: Any) -> None:
        for name, module in list(sys.modules.items()):
            if name in self._created or self._is_workspace_module(module):
                del sys.modules[name]
        for name, module in self._saved_modules.items():
            sys.modules[name] = module
        if self._added_path:
            with contextlib.suppress(ValueError):
                sys.path.remove(self.workspace.root)
        for folder in self._appended:
            with contextlib.suppress(ValueError):
                sys.path.remove(folder)

    def _is_workspace_module(self, module: Any) -> bool:
        file = getattr(module, "__file__", None)
        return isinstance(file, str) and self.workspace.relative(file) is not None

    def workspace_files(self) -> list[str]:
        """The workspace files (relative) of every module imported now: the model's own imports."""
        files = set()
        for module in list(sys.modules.values()):
            file = getattr(module, "__file__", None)
            if isinstance(file, str):
                rel = self.workspace.relative(file)
                if rel is not None:
                    files.add(rel)
        return sorted(files)

    def library_stamps(self) -> dict[str, int]:
        """Modification times (``st_mtime_ns``) of the installed files the job has imported, by
        absolute path: every module of this package and the top-level module of each other one
        outside the workspace. A cached result is reused only while they hold (an upgraded
        library, an edited engine)."""
        stamps = {}
        for name, module in list(sys.modules.items()):
            file = getattr(module, "__file__", None)
            if not isinstance(file, str) or self.workspace.relative(file) is not None:
                continue
            if "." in name and not name.startswith("torchscan_lsp."):
                continue
            with contextlib.suppress(OSError):
                stamps[file] = os.stat(file).st_mtime_ns
        return stamps

    def _shadow(self, name: str) -> None:
        existing = sys.modules.get(name)
        if existing is not None and name not in self._saved_modules:
            self._saved_modules[name] = existing
        self._created.add(name)

    def module_name(self, path: Path) -> tuple[str, list[tuple[str, Path]]]:
        """The dotted name of ``path`` and its parent packages ``(name, directory)``."""
        real = Path(os.path.realpath(path))
        try:
            rel = real.relative_to(self.workspace.root)
        except ValueError:
            rel = None
        if rel is not None and real.suffix != NOTEBOOK:  # a notebook is no module of a package
            parts = list(rel.with_suffix("").parts)
            if parts and parts[-1] == "__init__":
                parts = parts[:-1]
            if parts and all(p.isidentifier() for p in parts):
                parents = [
                    (".".join(parts[: i + 1]), Path(self.workspace.root, *parts[: i + 1]))
                    for i in range(len(parts) - 1)
                ]
                return ".".join(parts), parents
        stem = "".join(c if c.isalnum() or c == "_" else "_" for c in real.stem) or "module"
        return f"_torchscan_target_{stem}", []

    def import_file(self, path: Path, source: str) -> types.ModuleType:
        """Run ``source`` as the module of ``path`` (named by its package path under the root, so
        relative imports work) and return it; what it raises propagates."""
        name, parents = self.module_name(path)
        # Script-style sibling imports (``from blocks import Block`` next to ``blocks.py``) work as
        # they do under ``python models/net.py``; the folder goes last so that it shadows nothing.
        folder = os.path.realpath(path.parent)
        if folder != self.workspace.root and folder not in sys.path:
            sys.path.append(folder)
            self._appended.append(folder)
        for package, directory in parents:
            self._import_package(package, directory)
        is_package = path.name == "__init__.py"
        notebook = path.suffix == NOTEBOOK
        spec = importlib.util.spec_from_file_location(
            name, str(path), submodule_search_locations=[str(path.parent)] if is_package else None,
            # no loader is known for a notebook's suffix; the source comes with the job anyway
            loader=importlib.machinery.SourceFileLoader(name, str(path)) if notebook else None,
        )
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        if notebook:
            # tracebacks and inspect.getsource read the program's lines, never the notebook's JSON
            linecache.cache[str(path)] = (len(source), None, source.splitlines(True), str(path))
            # IPython makes display() a builtin; cells call it to show what they built
            module.__dict__["display"] = _display
        self._shadow(name)
        sys.modules[name] = module
        if parents:
            setattr(sys.modules[parents[-1][0]], name.rpartition(".")[2], module)
        code = compile(source, str(path), "exec", dont_inherit=True)
        # Marked as initialising, as the import system does, so that a module importing this one
        # back fails with Python's own "partially initialized module ... circular import" message.
        spec._initializing = True
        try:
            exec(code, module.__dict__)  # noqa: S102 - running the user's module is the job
        finally:
            spec._initializing = False
        return module

    def _import_package(self, name: str, directory: Path) -> None:
        existing = sys.modules.get(name)
        if existing is not None and name in self._created:
            return
        init = directory / "__init__.py"
        self._shadow(name)
        if init.is_file():
            spec = importlib.util.spec_from_file_location(
                name, str(init), submodule_search_locations=[str(directory)]
            )
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            self._link_to_parent(name, module)
            spec.loader.exec_module(module)
        else:
            spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = [str(directory)]
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            self._link_to_parent(name, module)

    @staticmethod
    def _link_to_parent(name: str, module: types.ModuleType) -> None:
        parent, _, child = name.rpartition(".")
        if parent and parent in sys.modules:
            setattr(sys.modules[parent], child, module)

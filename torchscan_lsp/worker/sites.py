"""Which files are model code, how they are named, and where on the stack model code is running.

A *site* is a file name and a 1-based line. Two kinds of file are *model code*:

* **workspace files** (:class:`~torchscan_lsp.worker.workspace.Workspace`): under the workspace
  root, outside virtual environments, ``site-packages``, hidden folders and this project's package;
  named by their workspace-relative path with ``/`` separators, as every path in a result is;
* **library files**: any other Python source file outside PyTorch, this project's package and the
  standard library, such as an installed ``transformers/models/mistral/modeling_mistral.py``; named
  by their absolute real path. Only the paths of installed model code are named this way, never
  data, values or file contents.

:meth:`CodeFiles.sites` walks a stack from its innermost frame outwards and returns the innermost
frame of each model-code file it passes, up to and including the innermost workspace frame (the
frames of whoever called the workspace code are not the model's). The first workspace site is what
the editor shows on workspace lines; library sites let a client that opens the library's file get
hints there too.
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
import types
from pathlib import Path
from typing import Iterable, Iterator

import torch

from torchscan_lsp.worker.workspace import PACKAGE_DIR, Workspace, real_path as _realpath, under as _under

__all__ = ["Workspace", "CodeFiles", "Site", "WORKSPACE", "LIBRARY", "PACKAGE_DIR", "ENGINE_DIR"]

Site = tuple[str, int]
"""A file name (workspace-relative, or absolute for a library file) and a 1-based line."""

WORKSPACE = 1
LIBRARY = 2
"""The kinds of model-code file (:meth:`CodeFiles.kind`); other files are 0."""

ENGINE_DIR = os.path.join(PACKAGE_DIR, "engine") + os.sep
_TORCH_DIR = os.path.realpath(os.path.dirname(torch.__file__))
_INSTALLED_PARTS = {"site-packages", "dist-packages"}
_INLINE = frozenset({"<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>", "<lambda>"})
"""The code objects of an expression that runs in a frame of its own (Python 3.11 compiles every
comprehension so; 3.12 inlines all but generator expressions)."""


def resolve_module_files(names: Iterable[str]) -> None:
    """Resolve the files of the modules ``names`` now (the warm parent, after preloading them), so
    that every child forked later inherits the answers: a job's first look at ``sys.modules``
    otherwise resolves each of the thousands of files a library such as ``transformers`` loaded."""
    for name in names:
        file = getattr(sys.modules.get(name), "__file__", None)
        if isinstance(file, str):
            _realpath(file)


@functools.lru_cache(maxsize=1)
def _standard_library() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple({os.path.realpath(paths[name]) for name in ("stdlib", "platstdlib") if paths.get(name)})


class CodeFiles:
    """Names model-code files (workspace-relative or absolute) and finds model code on a stack.

    Args:
        workspace: the :class:`Workspace` whose files are named relative to its root.
        barrier: a frame at which stack walks stop (the runner's own frame), so that whoever called
            the runner is never taken for model code.
    """

    def __init__(self, workspace: Workspace, barrier: types.FrameType | None = None):
        self.workspace = workspace
        self.barrier = barrier
        self._stdlib = _standard_library()
        self._files: dict[str, tuple[int, str | None]] = {}
        self._ours: dict[str, bool] = {}

    def kind(self, filename: str) -> tuple[int, str | None]:
        """``(WORKSPACE, relative path)``, ``(LIBRARY, absolute path)`` or ``(0, None)``."""
        found = self._files.get(filename)
        if found is None:
            found = self._files[filename] = self._classify(filename)
        return found

    def _classify(self, filename: str) -> tuple[int, str | None]:
        rel = self.workspace.relative(filename)
        if rel is not None:
            return WORKSPACE, rel
        if filename.startswith("<") or not filename.endswith((".py", ".pyw")):
            return 0, None
        real = _realpath(filename)
        if _under(real, _TORCH_DIR) or _under(real, PACKAGE_DIR):
            return 0, None
        installed = any(part in _INSTALLED_PARTS for part in Path(real).parts)
        if not installed and any(_under(real, folder) for folder in self._stdlib):
            return 0, None
        return LIBRARY, Path(real).as_posix()

    def name(self, filename: str) -> str | None:
        """The name of ``filename`` in a result when it is model code, else None."""
        return self.kind(filename)[1]

    def frames(self, frame: types.FrameType | None) -> Iterator[tuple[int, str, types.FrameType, types.FrameType | None]]:
        """``(kind, name, frame, callee)`` of the innermost frame of each model-code file, from
        ``frame`` outwards, ending with the innermost workspace frame; ``callee`` is the frame that
        frame was calling (None for ``frame`` itself)."""
        barrier, kind, seen = self.barrier, self.kind, set()
        callee = None
        while frame is not None and frame is not barrier:
            found, name = kind(frame.f_code.co_filename)
            if found and name not in seen:
                seen.add(name)
                yield found, name, frame, callee  # type: ignore[misc]
                if found == WORKSPACE:
                    return
            callee, frame = frame, frame.f_back

    def sites(self, frame: types.FrameType | None, stop: types.FrameType | None = None
              ) -> tuple[Site | None, tuple[Site, ...], bool]:
        """The innermost workspace site from ``frame`` outwards (or None), the library sites inside
        it, innermost first (see :meth:`frames`), and whether the walk ended at ``stop`` (a frame
        whose own sites the caller knows) before finding a workspace frame."""
        barrier, known, kind = self.barrier, self._files, self.kind
        library: list[Site] = []
        while frame is not None and frame is not barrier:
            if frame is stop:
                return None, tuple(library), True
            filename = frame.f_code.co_filename
            # the hot path of every operator: the known files' look-up without a method call
            found, name = known.get(filename) or kind(filename)
            if found == WORKSPACE:
                return (name, frame.f_lineno), tuple(library), False  # type: ignore[return-value]
            if found and all(site[0] != name for site in library):
                library.append((name, frame.f_lineno))  # type: ignore[arg-type]
            frame = frame.f_back
        return None, tuple(library), False

    def chain(self, frame: types.FrameType | None, stop: types.FrameType | None = None
              ) -> tuple[list[tuple[int, str, types.FrameType, types.FrameType | None]], bool]:
        """Every model-code frame from ``frame`` outwards, up to ``stop`` (the frame of the module
        call in progress, whose caller's frames are not this call's) or the barrier: ``(kind, name,
        frame, callee)`` innermost first, and whether the walk ended at ``stop``. ``callee`` is the
        frame the frame was calling, None when that is this package's (an operator dispatched by
        the line itself, through a function written in C).

        A generator expression, comprehension or lambda called from its own line (``sum(b(x) for
        b in self.branches)``, ``max(..., key=lambda t: t.sum())``), or by a function that line
        called (``residual(lambda t: self.mlp(t), x)``), is part of that line: its frame is left out
        and what it does is the line's, with no callee, so that its iterations are not runs of the
        line and the line's value is what the whole expression made."""
        barrier, known, kind = self.barrier, self._files, self.kind
        found: list[tuple[int, str, types.FrameType, types.FrameType | None]] = []
        callee = None
        while frame is not None and frame is not barrier:
            if frame is stop:
                return found, True
            code = frame.f_code
            filename = code.co_filename
            back = frame.f_back
            if code.co_name in _INLINE and back is not None and _on_its_line(frame, back):
                callee, frame = None, back
                continue
            entry = known.get(filename) or kind(filename)
            if entry[0]:
                found.append((entry[0], entry[1], frame, callee))  # type: ignore[arg-type]
            callee = None if self._package(filename) else frame
            frame = back
        return found, False

    def _package(self, filename: str) -> bool:
        inside = self._ours.get(filename)
        if inside is None:
            inside = self._ours[filename] = _under(_realpath(filename), PACKAGE_DIR)
        return inside

    def outside_package(self, frame: types.FrameType | None) -> types.FrameType | None:
        """The first frame from ``frame`` outwards that is not this project's (the engine's hooks
        and dispatch mode call observers from inside: the frame outside them is PyTorch's)."""
        while frame is not None and self._package(frame.f_code.co_filename):
            frame = frame.f_back
        return frame


_DEFINER_DEPTH = 8
"""How many frames out from a lambda or comprehension the frame that made it is looked for."""


def _on_its_line(frame: types.FrameType, back: types.FrameType) -> bool:
    """Whether ``frame`` (a lambda's, a comprehension's) runs an expression of a line still running:
    its caller's, or that of the frame out from it (at most :data:`_DEFINER_DEPTH`) that made it,
    whose code holds its code among its constants and is on its line."""
    code, line = frame.f_code, frame.f_lineno
    if back.f_code.co_filename == code.co_filename and back.f_lineno == line:
        return True
    outer: types.FrameType | None = back
    for _ in range(_DEFINER_DEPTH):
        if outer is None:
            return False
        if outer.f_code.co_filename == code.co_filename and any(const is code for const in outer.f_code.co_consts):
            return outer.f_lineno == line
        outer = outer.f_back
    return False


def as_json(site: Site | None) -> dict | None:
    """``{"file", "line"}`` of a site, or None."""
    return None if site is None else {"file": site[0], "line": site[1]}

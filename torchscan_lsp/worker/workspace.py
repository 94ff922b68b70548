"""Which files are the workspace's: the one rule for every location a result names (torch-free).

A file is a *workspace file* when it is a Python source file (``.py``, ``.pyw``: never
``<frozen runpy>``, ``<string>`` or another pseudo-file a stack names) under the workspace root,
outside this project's package, an interpreter prefix inside the root (a virtual environment),
hidden folders and ``site-packages``/``dist-packages``/``node_modules``/``__pycache__``. It is named
by its workspace-relative path with ``/`` separators. The worker applies the rule to the frames of
the model's stack and to tracebacks (:mod:`.sites`, :mod:`.errors`), the server side to the stack
dumps and tracebacks a job's output holds (:mod:`.postmortem`).
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

__all__ = ["PACKAGE_DIR", "Workspace", "real_path", "under"]

PACKAGE_DIR = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
"""This project's package folder, whose files are never the workspace's."""

_EXCLUDED_PARTS = {"site-packages", "dist-packages", "node_modules", "__pycache__"}


@functools.lru_cache(maxsize=65536)
def real_path(filename: str) -> str:
    """``os.path.realpath(filename)``, cached (stack walks ask for the same files again and again)."""
    return os.path.realpath(filename)


def under(real: str, folder: str) -> bool:
    """Whether the real path ``real`` is ``folder`` or lies below it."""
    return real == folder or real.startswith(folder + os.sep)


class Workspace:
    """Decides which files belong to the workspace and names them relative to its root."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = os.path.realpath(os.fspath(root))
        self._cache: dict[str, str | None] = {}
        excluded = {PACKAGE_DIR}
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
        real = real_path(filename)
        if not real.startswith(self.root + os.sep):
            return None
        for excluded in self._excluded:
            if under(real, excluded):
                return None
        parts = Path(os.path.relpath(real, self.root)).parts
        for part in parts[:-1]:
            if part.startswith(".") or part in _EXCLUDED_PARTS:
                return None
        return "/".join(parts)

    def shown(self, filename: str) -> str:
        """``filename`` as a traceback frame or a warning names it for a reader: a workspace file by
        its workspace-relative path, an installed file by its path below ``site-packages`` (or
        ``dist-packages``: ``torch/utils/checkpoint.py``, so no environment's folder is named), any
        other file by its own name as given."""
        rel = self.relative(filename)
        if rel is not None:
            return rel
        parts = Path(filename).parts
        for index in range(len(parts) - 2, -1, -1):
            if parts[index] in ("site-packages", "dist-packages"):
                return "/".join(parts[index + 1:])
        return filename

"""Workspaces: their root, the Python files under them, and their ``[tool.torchscan-lsp]`` table.

One set of rules for every front end, so that the editor, ``check`` and ``scan`` cannot disagree
about where a workspace starts, which folders hold no model code, or what ``pyproject.toml`` says:

* the root of a command's paths is the nearest folder above the first one that holds
  ``pyproject.toml`` or ``.git`` (:func:`find_root`); a file outside it is analysed under the root
  its path would have alone (:func:`file_root`); the editor's is its workspace folder
  (:func:`root_for`);
* a folder is searched for ``*.py`` files and Jupyter notebooks (``*.ipynb``), skipping hidden
  folders (``.git``, ``.venv``, ``.ipynb_checkpoints``) and :data:`SKIPPED_DIRS`; a file found that
  way is analysed only when it mentions ``torchscan`` (a file named on the command line always is)
  (:func:`python_files`);
* ``[tool.torchscan-lsp]`` is read once per root (:func:`read_config`): its options, validated as
  pragma options are, become every target's defaults, and its ``device``, ``timeout`` and
  ``compare_with`` the defaults of the ``torchscan.device``, ``torchscan.timeoutSeconds`` and
  ``torchscan.compareWith`` settings.

Nothing here imports torch or pygls.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from torchscan_lsp.session.notebooks import NOTEBOOK_SUFFIX, Program, is_notebook, read_program
from torchscan_lsp.targets import WorkspaceConfigError, load_workspace_defaults

__all__ = [
    "SKIPPED_DIRS",
    "MARKER",
    "SourceFile",
    "WorkspaceConfig",
    "find_root",
    "file_root",
    "root_for",
    "python_files",
    "read_source",
    "read_document",
    "read_config",
]

SKIPPED_DIRS = frozenset({"site-packages", "dist-packages", "node_modules", "__pycache__", "build", "dist", "venv"})
"""Folders never searched for model files, besides every hidden one: installed packages, virtual
environments, build output and caches."""

MARKER = "torchscan"
"""A file found under a folder is analysed only when its text mentions this word (every pragma and
decorator does)."""


@dataclass(frozen=True)
class SourceFile:
    """A file to analyse: its absolute path, whether it was named itself (else found under a
    folder, and analysed only when it mentions :data:`MARKER`), and the command-line path it came
    from (``given``: the file itself, or the folder it was found under; ``None``: ``path``)."""

    path: Path
    explicit: bool
    given: Path | None = None


@dataclass(frozen=True)
class WorkspaceConfig:
    """What a root's ``pyproject.toml`` says.

    Attributes:
        root: the workspace root (absolute).
        defaults: the validated target options of ``[tool.torchscan-lsp]`` (``{}`` without one).
        error: why the table could not be used (``.message``, ``.line``, ``.path``), else ``None``;
            the defaults are then empty.
    """

    root: str
    defaults: dict[str, Any] = field(default_factory=dict)
    error: WorkspaceConfigError | None = None

    @property
    def settings_defaults(self) -> dict[str, Any]:
        """The settings the table sets: its ``device``, its ``timeout`` (as ``timeoutSeconds``) and its
        ``compare_with`` (as ``compareWith``)."""
        found = {"device": self.defaults.get("device"), "timeoutSeconds": self.defaults.get("timeout"),
                 "compareWith": self.defaults.get("compare_with")}
        return {key: value for key, value in found.items() if value is not None}


def find_root(paths: Iterable[Path]) -> Path:
    """The workspace root of command-line ``paths``: the nearest folder at or above the first one
    that holds ``pyproject.toml`` or ``.git``; else the current folder when it contains them all;
    else the first one's folder."""
    paths = list(paths)
    cwd = Path.cwd().resolve()
    first = paths[0].resolve() if paths else cwd
    start = first if first.is_dir() else first.parent
    for folder in (start, *start.parents):
        if (folder / "pyproject.toml").is_file() or (folder / ".git").exists():
            return folder
    if all(p.resolve().is_relative_to(cwd) for p in paths):
        return cwd
    return start


def file_root(source: SourceFile, root: Path) -> Path:
    """The workspace root (absolute) a command analyses ``source`` under, ``root`` being the root
    of its paths (:func:`find_root`, or ``--root``): ``root`` itself when the file lies in it, else
    the root of the path it came from alone, else (a linked file that leads elsewhere) the root of
    the file alone. A file is thus analysed, and its lines named, as when its path is the command's
    only one, and it always lies in its root: its workspace-relative name needs that."""
    path = source.path.resolve()
    if path.is_relative_to(root.resolve()):
        return root
    alone = find_root([source.given or path])
    # a linked file found under a folder may lie outside that folder's root; its own always holds it
    return alone if path.is_relative_to(alone) else find_root([path])


def root_for(path: str, folders: Iterable[str]) -> str:
    """The innermost of the editor's workspace ``folders`` that contains ``path``, else the
    file's own folder."""
    resolved = Path(path).resolve()
    containing = [f for f in folders if f and resolved.is_relative_to(Path(f).resolve())]
    return str(Path(max(containing, key=len)).resolve()) if containing else str(resolved.parent)


def _skipped(name: str) -> bool:
    return name.startswith(".") or name in SKIPPED_DIRS


def python_files(paths: Iterable[Path]) -> list[SourceFile]:
    """The files named in ``paths`` and the ``*.py`` and ``*.ipynb`` files under the folders named
    there, in order (each folder's files sorted), each once, each with the path it came from."""
    found: dict[Path, SourceFile] = {}
    for path in paths:
        if not path.is_dir():
            resolved = path.resolve()
            found[resolved] = SourceFile(resolved, True, path)
            continue
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if not _skipped(d))
            for name in sorted(filenames):
                resolved = Path(dirpath, name).resolve()
                if name.endswith((".py", NOTEBOOK_SUFFIX)) and resolved not in found:
                    found[resolved] = SourceFile(resolved, False, path)
    return list(found.values())


def read_source(path: Path) -> str:
    """The text of a Python file as Python would read it (its coding comment, else UTF-8).

    Raises:
        OSError: the file cannot be read.
        SyntaxError, UnicodeDecodeError: its bytes do not decode.
    """
    return importlib.util.decode_source(path.read_bytes())


def read_document(path: str | Path) -> tuple[str, Program | None]:
    """The text the session analyses of the file at ``path``, and its program when it is a Jupyter
    notebook (the code cells joined: :mod:`.notebooks`), else ``None``.

    Raises:
        OSError: the file cannot be read.
        SyntaxError, UnicodeDecodeError: a Python file's bytes do not decode.
        NotebookError: a notebook is not valid JSON, not nbformat 4, or not Python.
    """
    if is_notebook(path):
        program = read_program(path)
        return program.text, program
    return read_source(Path(path)), None


def read_config(root: str | Path) -> WorkspaceConfig:
    """Read ``root``'s ``[tool.torchscan-lsp]`` table; a broken table is an :attr:`~WorkspaceConfig.error`,
    never an exception (it is reported on every target, which then run without its defaults)."""
    root = str(root)
    try:
        return WorkspaceConfig(root, dict(load_workspace_defaults(root)))
    except WorkspaceConfigError as error:
        return WorkspaceConfig(root, {}, error)

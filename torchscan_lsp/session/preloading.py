"""What the warm worker imports before the first job: what the workspace's annotated files import.

A model built by an installed library (``transformers``, ``timm``) spends seconds importing it in
every job whose warm parent does not hold it yet. So the session tells the warm worker of its
interpreter what the import statements of the annotated files name (preload entries,
:func:`torchscan_lsp.targets.imports.imported_names`), and the warm parent imports them before it
forks its next job (:func:`torchscan_lsp.worker.pool.note_imports`): those of the workspace's files
that mention ``torchscan`` once the workspace may run code (:func:`preload_workspace`, read in a
thread, at most :data:`MAX_FILES` files), and those of each annotated document before its targets
are analysed (:func:`preload_document`). Nothing is imported here: the worker decides, by where
a name resolves, which are libraries (the learner's one rule).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Iterable

from torchscan_lsp.session.state import Document
from torchscan_lsp.session.workspace import MARKER, python_files, read_source
from torchscan_lsp.worker import pool

__all__ = ["MAX_FILES", "annotated_imports", "preload_document", "preload_workspace", "prewarm",
           "start_warm_worker_early"]

log = logging.getLogger(__name__)

MAX_FILES = 2000
"""At most this many Python files of a workspace are read for their imports (a monorepo's first
files are as good a guess as any; the documents analysed add their own)."""


def annotated_imports(root: str, max_files: int = MAX_FILES) -> list[str]:
    """The preload entries of the annotated files under ``root`` (those of its first ``max_files``
    Python files, as :func:`~.workspace.python_files` orders them, that mention ``torchscan`` and
    have targets), each once, in file order. Unreadable files and syntax errors are skipped."""
    from torchscan_lsp.targets import find_targets

    entries: dict[str, None] = {}
    for source in python_files([Path(root)])[:max_files]:
        try:
            text = read_source(source.path)
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        if MARKER in text:
            entries.update(dict.fromkeys(find_targets(text, str(source.path)).imports))
    return list(entries)


async def preload_workspace(python: str, roots: Iterable[str]) -> None:
    """Send ``python``'s warm worker the imports of the annotated files of each of ``roots``."""
    for root in roots:
        try:
            entries = await asyncio.to_thread(annotated_imports, root)
        except Exception:  # a scan that fails costs the head start, never the session
            log.exception("could not read the imports of the workspace %s", root)
            continue
        pool.note_imports(python, entries, root)


def preload_document(python: str, document: Document) -> None:
    """Send ``python``'s warm worker the imports of ``document`` (an annotated file), before its
    targets' jobs."""
    if document.imports:
        pool.note_imports(python, document.imports, document.root)


async def prewarm(python: str, may_execute: bool, roots: Iterable[str] = ()) -> None:
    """Start the warm worker of ``python`` ahead of the first job (only when workspace code may run,
    ``may_execute``: it runs that interpreter), adopting the one started with the server
    (:func:`start_warm_worker_early`) when it is that interpreter's, and have it import what the
    annotated files of the workspace folders ``roots`` import (:func:`preload_workspace`); stop
    the early one otherwise."""
    if may_execute:
        pool.discard_early(keep=python)
        await asyncio.gather(pool.prewarm(python), preload_workspace(python, roots))
    else:  # it ran no workspace code, and will not now
        pool.discard_early()


def start_warm_worker_early() -> None:
    """Start the warm worker of this interpreter now, before the language server imports its own
    libraries, so that torch imports meanwhile. It runs no workspace code; :func:`prewarm`
    adopts it once the workspace is trusted, or stops it."""
    pool.spawn_early()

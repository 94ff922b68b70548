"""Files changed on disk outside the editor (a ``git checkout``, a code generator) re-analyse the
targets that depend on them, while inlay hints and hovers go on being answered at once.

Watched, without recursion (a workspace's virtual environment may hold thousands of folders) and
on one thread however many folders (:mod:`.folder_watch`): the folders of the documents open in
the editor, of every file that the targets they show imported
(:meth:`~torchscan_lsp.session.state.Store.shown_states`), and their workspace roots (for
``pyproject.toml``). The set follows every change of the states and every closed document, so a
folder that no open document needs any more is no longer watched.

The watching thread gathers the changed paths itself and wakes the event loop once per batch; the
batch is handled when no event came for :data:`DEBOUNCE_S` (a checkout writes hundreds of files),
or :data:`MAX_BATCH_S` after its first event. Handling it:

1. off the event loop: the paths are resolved, the workspace roots too, and the open documents
   among the paths are read from disk and hashed;
2. ``pyproject.toml``: the workspace defaults are re-read and everything is re-analysed;
3. an open document whose buffer has no unsaved edits and whose file now holds new text: it is
   re-read, its results are marked stale, and its targets and those whose models import it are
   affected (unsaved edits win:
   such a buffer is left alone, as is a file that was deleted, whose last results stay);
4. any other file: the shown targets whose last result imported it are affected;
5. each affected target is analysed once for the whole batch (its file read from disk, off the
   loop, when no front end has it open). The session looks the result up in the cache in a
   thread (hashing every imported file): a change that changed nothing runs nothing.

A folder deleted, created or moved in a watched folder counts as a change of every file it held
that the open documents depend on; events lost by the kernel, of every such file.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchscan_lsp.server.features import Editor
from torchscan_lsp.server.folder_watch import FolderWatch, folder_watch
from torchscan_lsp.session.state import Document, TargetKey, TargetState, content_hash

log = logging.getLogger(__name__)

DEBOUNCE_S = 0.3
"""Quiet time after the last change before a batch of changed files is handled, seconds."""

MAX_BATCH_S = 2.0
"""A batch is handled at the latest this long after its first change, however busy the disk, seconds."""

PYPROJECT = "pyproject.toml"


@dataclass
class Batch:
    """Paths changed on disk since the last batch.

    Attributes:
        files: changed files (``.py`` and ``pyproject.toml``), as the watch named them.
        folders: folders created, deleted or moved (what they hold is checked).
        lost: the kernel dropped events: every file the open documents depend on is checked.
    """

    files: set[str] = field(default_factory=set)
    folders: set[str] = field(default_factory=set)
    lost: bool = False


class _Pending:
    """The batch being gathered on the watching thread, and when its events came."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batch = Batch()
        self._first = self._last = 0.0
        self._told = False

    def add(self, path: str, is_directory: bool) -> bool:
        """Note one event; returns whether the event loop is to be woken (the batch's first)."""
        name = os.path.basename(path)
        if path and not is_directory and not (name.endswith(".py") or name == PYPROJECT):
            return False
        if is_directory and (name.startswith(".") or name == "__pycache__"):
            return False
        with self._lock:
            now = time.monotonic()
            if not path:
                self._batch.lost = True
            elif is_directory:
                self._batch.folders.add(path)
            else:
                self._batch.files.add(path)
            self._last = now
            if self._told:
                return False
            self._first, self._told = now, True
            return True

    def wait_s(self) -> float:
        """How long to wait before the batch is handled (0: now)."""
        with self._lock:
            now = time.monotonic()
            return max(0.0, min(self._last + DEBOUNCE_S, self._first + MAX_BATCH_S) - now)

    def take(self) -> Batch:
        """The batch gathered so far; a new one starts."""
        with self._lock:
            batch, self._batch, self._told = self._batch, Batch(), False
            return batch


class WorkspaceWatcher:
    """Watches the folders the open documents depend on; re-analyses on changes.

    Args:
        server: the language server (its session and notifications).

    Attributes:
        folders: the folder watch (``None`` before :meth:`start`, or where none could start).
    """

    def __init__(self, server: Editor) -> None:
        self.server = server
        self.folders: FolderWatch | None = None
        self._pending = _Pending()
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._folders_of: dict[TargetKey, tuple[Any, Any, frozenset[str]]] = {}  # by result

    def start(self) -> None:
        """Start watching (call on the event loop); where no watch can start, only log it."""
        if self.folders is not None:
            return
        self._loop = asyncio.get_running_loop()
        try:
            self.folders = folder_watch(self._noted)
        except Exception as error:  # no inotify instance left, say: work without watching
            log.warning("not watching files for changes: %r", error)
            return
        self._task = asyncio.ensure_future(self._run())
        self.refresh()

    def stop(self) -> None:
        """Stop watching."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self.folders is not None:
            self.folders.stop()
            self.folders = None

    # which folders -------------------------------------------------------------------------------

    def wanted_folders(self) -> set[str]:
        """Folders to watch: of the documents open in the editor, their workspace roots, and of the
        files that the targets they show imported (or name lines of)."""
        store = self.server.session.store
        opened = [d for d in store.documents.values() if not d.from_disk]
        folders = {os.path.dirname(d.path) for d in opened} | {d.root for d in opened}
        shown = store.shown_states()
        for state in shown:
            folders |= self._state_folders(state)
        for key in self._folders_of.keys() - {state.key for state in shown}:
            del self._folders_of[key]
        return folders

    def _state_folders(self, state: TargetState) -> frozenset[str]:
        """The folders of the files ``state`` has something to say about, built once per result."""
        known = self._folders_of.get(state.key)
        if known is None or known[0] is not state.view or known[1] is not state.error:
            folders = frozenset(os.path.dirname(os.path.join(state.key.root, rel)) for rel in state.files)
            known = self._folders_of[state.key] = (state.view, state.error, folders)
        return known[2]

    def refresh(self) -> None:
        """Bring the watched folders up to date now (a document opened or closed, a result that
        imported other files)."""
        if self.folders is not None:
            self.folders.watch(self.wanted_folders())

    # events ----------------------------------------------------------------------------------------

    def _noted(self, path: str, is_directory: bool) -> None:
        """One event (on the watching thread): gathered, and the loop woken for a batch's first."""
        if self._pending.add(path, is_directory) and self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed: the server is gone
                self._loop.call_soon_threadsafe(self._wake.set)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            while (wait := self._pending.wait_s()) > 0:
                await asyncio.sleep(wait)
            self._wake.clear()
            batch = self._pending.take()
            try:
                await self.handle(batch)
            except Exception:  # one bad batch must not stop the next ones, nor the server
                log.exception("handling the files changed on disk failed")
            self.refresh()

    async def handle(self, batch: Batch) -> None:
        """Handle one batch of changes (see the module's docstring)."""
        server, session = self.server, self.server.session
        store = session.store
        if any(os.path.basename(path) == PYPROJECT for path in batch.files):
            session.forget_workspace_config()
            server.apply_settings()
            session.reanalyse_all()
            return
        paths = {p for p in batch.files if p.endswith(".py")} | self._held(batch)
        documents = set(store.documents)
        roots = {state.key.root for state in store.targets.values()} | {d.root for d in store.documents.values()}
        disk = await asyncio.to_thread(_read_changes, paths, documents, roots)
        affected: dict[TargetKey, None] = {}
        changed: set[tuple[str, str]] = set()
        for path, (text, digest) in disk.documents.items():
            document = store.documents.get(path)
            if document is None or text is None or digest == document.saved_hash:
                continue
            if content_hash(document.text) != document.saved_hash:  # unsaved edits: the buffer wins
                continue
            states = session.reread(document, text)
            server.states_changed(states, {(document.root, document.rel)})
            affected |= dict.fromkeys(state.key for state in store.states_in(document.root, document.rel))
            changed.add((document.root, document.rel))
        for path in disk.others:
            for root, resolved in disk.roots.items():
                if path.startswith(resolved + os.sep):
                    changed.add((root, Path(os.path.relpath(path, resolved)).as_posix()))
        for state in store.shown_states():
            imported = (state.view.result.get("imported_files") or []) if state.view is not None else []
            if any((state.key.root, rel) in changed for rel in imported):
                affected[state.key] = None
        await self._analyse(list(affected))

    def _held(self, batch: Batch) -> set[str]:
        """The files the open documents depend on that lie in the batch's folders (all of them
        when events were lost)."""
        if not batch.folders and not batch.lost:
            return set()
        store = self.server.session.store
        known = {d.path for d in store.documents.values() if not d.from_disk}
        for state in store.shown_states():
            known |= {os.path.join(state.key.root, rel) for rel in state.files}
        if batch.lost:
            return known
        return {path for path in known if any(path == f or path.startswith(f + os.sep) for f in batch.folders)}

    async def _analyse(self, keys: list[TargetKey]) -> None:
        """Analyse each target of ``keys`` once, reading from disk (off the loop) the target files
        that no front end has open."""
        session = self.server.session
        missing = sorted({str(Path(k.root, k.file)) for k in keys} - session.store.documents.keys())
        texts = await asyncio.to_thread(_read_texts, missing) if missing else {}
        owners: dict[str, tuple[Document, list[str]]] = {}
        for key in keys:
            path = str(Path(key.root, key.file))
            document = session.store.documents.get(path)
            if document is None and texts.get(path) is not None:
                document = session.open(path, key.root, texts[path], from_disk=True)
            if document is not None and key in session.store.targets:
                owners.setdefault(path, (document, []))[1].append(key.name)
        for document, names in owners.values():
            session.analyse(document, names)


@dataclass
class _Changes:
    """What :func:`_read_changes` found on disk."""

    documents: dict[str, tuple[str | None, str | None]]
    """Tracked documents among the changed paths: their text on disk and its hash (``None``:
    unreadable or deleted)."""
    others: set[str]
    """The other changed paths, resolved."""
    roots: dict[str, str]
    """Each workspace root and its resolved path."""


def _read_changes(paths: set[str], documents: set[str], roots: set[str]) -> _Changes:
    """Resolve ``paths`` and ``roots``, and read the ``documents`` (tracked paths) among the paths:
    file-system work, run in a thread."""
    found = _Changes({}, set(), {root: str(Path(root).resolve()) for root in roots})
    for path in paths:
        resolved = str(Path(path).resolve())
        if resolved in documents:
            text = _read_texts([resolved])[resolved]
            found.documents[resolved] = (text, None if text is None else content_hash(text))
        else:
            found.others.add(resolved)
    return found


def _read_texts(paths: list[str]) -> dict[str, str | None]:
    """The text of each file of ``paths`` (``None`` where it cannot be read as UTF-8)."""
    texts: dict[str, str | None] = {}
    for path in paths:
        try:
            texts[path] = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            texts[path] = None
    return texts

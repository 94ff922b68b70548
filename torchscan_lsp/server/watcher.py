"""Files changed on disk outside the editor (a ``git checkout``, a code generator) re-analyse the
targets that depend on them.

Watched, with watchdog and without recursion (a workspace's virtual environment may hold
thousands of folders): the folders of the tracked documents, of every file a target's last result
imported, and the workspace roots (for ``pyproject.toml``). The set is recomputed every
:data:`REFRESH_S` seconds. Events arrive on watchdog's thread and are handed to the event loop,
where they are gathered for :data:`DEBOUNCE_S` seconds (a checkout touches many files at once) and
then handled once per file:

* ``pyproject.toml``: the workspace defaults are re-read and everything is re-analysed;
* an open document whose buffer has no unsaved edits and whose file now holds new text: it is
  re-read and analysed, with the targets of other files that import it (unsaved edits win: such a
  buffer is left alone, as is a file that was deleted, whose last results stay);
* any other file: the targets whose last result imported it are analysed again (the cache, keyed
  by the imported files' content hashes, turns a change that changed nothing into no job at all).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from torchscan_lsp.server.features import Editor
from torchscan_lsp.session.state import content_hash, relative

log = logging.getLogger(__name__)

DEBOUNCE_S = 0.3
"""Quiet time after the last change before changed files are handled, seconds."""

REFRESH_S = 2.0
"""How often the set of watched folders is brought up to date, seconds."""


class _Forward(FileSystemEventHandler):
    """Hands the paths of watchdog's events to the event loop (called on watchdog's thread)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, note: Any) -> None:
        self.loop = loop
        self.note = note

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type in ("opened", "closed_no_write"):
            return
        for path in (event.src_path, getattr(event, "dest_path", "")):
            if path:
                self.loop.call_soon_threadsafe(self.note, str(path))


class WorkspaceWatcher:
    """Watches the folders the server's targets depend on; re-analyses on changes.

    Args:
        server: the language server (its session and notifications).
    """

    def __init__(self, server: Editor) -> None:
        self.server = server
        self.observer: Any = None
        self.watches: dict[str, Any] = {}
        self.pending: set[str] = set()
        self._flush_handle: asyncio.TimerHandle | None = None
        self._refresh_handle: asyncio.TimerHandle | None = None
        self._handler: _Forward | None = None

    def start(self) -> None:
        """Start watching (call on the event loop); a platform without a watcher only logs."""
        if self.observer is not None:
            return
        try:
            self.observer = Observer()
            self.observer.daemon = True
            self.observer.start()
        except Exception as error:  # no inotify instances left, say: work without watching
            log.warning("not watching files for changes: %r", error)
            self.observer = None
            return
        self._handler = _Forward(asyncio.get_running_loop(), self._note)
        self._refresh()

    def stop(self) -> None:
        """Stop watching."""
        for handle in (self._flush_handle, self._refresh_handle):
            if handle is not None:
                handle.cancel()
        if self.observer is not None:
            self.observer.stop()
            self.observer = None
        self.watches.clear()

    def wanted_folders(self) -> set[str]:
        """Folders to watch: of tracked documents, of files the targets' results imported, and the
        workspace roots."""
        store = self.server.session.store
        folders = {str(Path(d.path).parent) for d in store.documents.values()}
        folders |= {d.root for d in store.documents.values()}
        for state in store.targets.values():
            folders |= {str(Path(state.key.root, rel).parent) for rel in state.files}
        return {f for f in folders if Path(f).is_dir()}

    def refresh(self) -> None:
        """Bring the watched folders up to date now, not at the next periodic refresh: a document
        just opened, and its dependencies may change before then (an analysis can end sooner)."""
        if self._refresh_handle is not None:
            self._refresh_handle.cancel()
        self._refresh()

    def _refresh(self) -> None:
        if self.observer is None:
            return
        wanted = self.wanted_folders()
        for folder in set(self.watches) - wanted:
            self.observer.unschedule(self.watches.pop(folder))
        for folder in wanted - set(self.watches):
            try:
                self.watches[folder] = self.observer.schedule(self._handler, folder, recursive=False)
            except OSError as error:
                log.warning("cannot watch %s: %r", folder, error)
        self._refresh_handle = asyncio.get_running_loop().call_later(REFRESH_S, self._refresh)

    def _note(self, path: str) -> None:
        if not (path.endswith(".py") or Path(path).name == "pyproject.toml"):
            return
        self.pending.add(path)
        if self._flush_handle is not None:
            self._flush_handle.cancel()
        self._flush_handle = asyncio.get_running_loop().call_later(DEBOUNCE_S, self._flush)

    def _flush(self) -> None:
        paths, self.pending = self.pending, set()
        for path in sorted(paths):
            try:
                self.changed(path)
            except Exception:  # one bad file must not stop the others, nor the server
                log.exception("handling the change of %s failed", path)

    def changed(self, path: str) -> None:
        """Handle a change on disk of the file at ``path`` (see the module's docstring)."""
        server, session = self.server, self.server.session
        if Path(path).name == "pyproject.toml":
            session.forget_workspace_config()
            server.apply_settings()
            session.reanalyse_all()
            return
        resolved = str(Path(path).resolve())
        try:
            disk = Path(resolved).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            disk = None
        document = session.store.documents.get(resolved)
        if document is not None:
            clean = content_hash(document.text) == document.saved_hash
            if disk is None or not clean or content_hash(disk) == document.saved_hash:
                return
            session.open(resolved, document.root, disk, saved=True)
            server.states_changed(session.store.states_in(document.root, document.rel),
                                  {(document.root, document.rel)})
            session.analyse_saved(resolved)
            return
        for state in list(session.store.targets.values()):
            rel = relative(resolved, state.key.root)
            if rel is None or state.view is None or rel not in (state.view.result.get("imported_files") or []):
                continue
            owner = session.store.documents.get(str(Path(state.key.root, state.key.file)))
            if owner is not None:
                session.analyse(owner, [state.key.name])

"""Watching a changing set of folders (not recursively) for changed files, on a bounded number of
threads.

watchdog's observers run one emitter thread per scheduled watch, so a model that imports from a
hundred folders would give the server a hundred threads. On Linux every watch here is instead a
callback on watchdog's one shared inotify reader (``InotifyFD``, one file descriptor and one
thread for the whole process), however many folders are watched. Where that reader is not
available (macOS, Windows, a watchdog without it) a single watchdog ``Observer`` schedules one
watch per folder, with the thread per folder that its emitters take.

Either way the changed paths are handed to ``note(path, is_directory)`` on the watching thread,
and ``note("", True)`` says that events were lost (the kernel's queue overflowed): every file may
have changed.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from typing import Any, Callable

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

try:  # Linux only
    from watchdog.observers.inotify_c import InotifyConstants, InotifyFD
except (ImportError, OSError, AttributeError):  # pragma: no cover - other platforms
    InotifyConstants = InotifyFD = None

log = logging.getLogger(__name__)

Note = Callable[[str, bool], None]
"""``note(path, is_directory)``: a path in a watched folder changed (``""``: events were lost)."""


def folder_watch(note: Note) -> FolderWatch:
    """The folder watch of this platform: one thread for every folder on Linux (see the module's
    docstring), else a watchdog ``Observer``.

    Raises:
        OSError: no watch can be started (no inotify instance left, say).
    """
    if InotifyFD is not None and hasattr(InotifyFD, "get_instance"):
        return InotifyFolders(note)
    return ObserverFolders(note)


class FolderWatch:
    """A set of watched folders (absolute paths) that :meth:`watch` brings up to date."""

    def __init__(self, note: Note) -> None:
        self.note = note
        self.folders: set[str] = set()

    def watch(self, wanted: set[str]) -> None:
        """Watch exactly the folders of ``wanted`` from now on (those that exist and can be
        watched: one that cannot is logged and left out, to be tried again next time)."""
        for folder in self.folders - wanted:
            self._remove(folder)
            self.folders.discard(folder)
        for folder in wanted - self.folders:
            try:
                self._add(folder)
            except OSError as error:
                log.debug("cannot watch %s: %r", folder, error)
                continue
            self.folders.add(folder)

    def stop(self) -> None:
        """Watch nothing more."""
        self.watch(set())

    def _add(self, folder: str) -> None:
        raise NotImplementedError

    def _remove(self, folder: str) -> None:
        raise NotImplementedError


class InotifyFolders(FolderWatch):
    """Folders watched by callbacks on watchdog's shared inotify reader: one thread in all."""

    MASK = 0
    if InotifyConstants is not None:
        MASK = (InotifyConstants.IN_MODIFY | InotifyConstants.IN_CLOSE_WRITE | InotifyConstants.IN_CREATE
                | InotifyConstants.IN_DELETE | InotifyConstants.IN_MOVED_FROM | InotifyConstants.IN_MOVED_TO
                | InotifyConstants.IN_DELETE_SELF | InotifyConstants.IN_MOVE_SELF | InotifyConstants.IN_ONLYDIR)

    def __init__(self, note: Note) -> None:
        super().__init__(note)
        self._reader = InotifyFD.get_instance()
        self._lock = threading.Lock()
        self._by_watch: dict[int, set[str]] = {}  # one watch per directory, whatever its paths
        self._watch_of: dict[str, int] = {}
        self._gone: set[str] = set()

    def watch(self, wanted: set[str]) -> None:
        """Watch exactly ``wanted`` from now on; a folder deleted meanwhile is watched again if
        it is back."""
        with self._lock:
            gone, self._gone = self._gone, set()
        self.folders -= gone
        super().watch(wanted)

    def _add(self, folder: str) -> None:
        wd = self._reader.add_callback(os.fsencode(folder), self.MASK, self, id(self))
        if wd < 0:  # watchdog leaves a refused watch (EACCES) to its caller
            self._reader.remove_callbacks([(wd, id(self))])
            raise OSError(errno.EACCES, os.strerror(errno.EACCES), folder)
        with self._lock:
            self._by_watch.setdefault(wd, set()).add(folder)
            self._watch_of[folder] = wd

    def _remove(self, folder: str) -> None:
        with self._lock:
            wd = self._watch_of.pop(folder, None)
            paths = self._by_watch.get(wd, set())
            paths.discard(folder)
            last = wd is not None and not paths
            if last:
                self._by_watch.pop(wd, None)
        if last:
            self._reader.remove_callbacks([(wd, id(self))])

    # watchdog's WatchCallback, called on the reader's thread

    def on_event(self, event: Any) -> None:
        """Note the path of one inotify event in a watched folder."""
        with self._lock:
            folders = sorted(self._by_watch.get(event.wd, ()))
        name = os.fsdecode(event.name) if event.name else ""
        for folder in folders:
            self.note(os.path.join(folder, name) if name else folder, bool(event.is_directory or not name))

    def on_watch_deleted(self, wd: int) -> None:
        """A watched folder was deleted or moved away: forget its watch (the next :meth:`watch`
        adds it again if it is back) and note it, so that what it held is checked."""
        with self._lock:
            folders = self._by_watch.pop(wd, set())
            for folder in folders:
                self._watch_of.pop(folder, None)
            self._gone |= folders
        for folder in folders:
            self.note(folder, True)

    def on_queue_overflow(self) -> None:
        """The kernel dropped events: every file may have changed."""
        self.note("", True)


class ObserverFolders(FolderWatch):
    """Folders watched by one watchdog ``Observer`` (one emitter thread per folder)."""

    def __init__(self, note: Note) -> None:
        super().__init__(note)
        self._observer = Observer()
        self._observer.daemon = True
        self._observer.start()
        self._handler = _Forward(note)
        self._watches: dict[str, Any] = {}

    def _add(self, folder: str) -> None:
        if not os.path.isdir(folder):  # the observer would start an emitter that fails on its thread
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), folder)
        self._watches[folder] = self._observer.schedule(self._handler, folder, recursive=False)

    def _remove(self, folder: str) -> None:
        self._observer.unschedule(self._watches.pop(folder))

    def stop(self) -> None:
        """Watch nothing more, and stop the observer's threads."""
        super().stop()
        self._observer.stop()


class _Forward(FileSystemEventHandler):
    """Hands the paths of watchdog's events to ``note`` (called on watchdog's thread)."""

    def __init__(self, note: Note) -> None:
        self.note = note

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return
        for path in (event.src_path, getattr(event, "dest_path", "")):
            if path:
                self.note(os.fsdecode(path), event.is_directory)

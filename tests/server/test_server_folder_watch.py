"""Both ways of watching folders (``server/folder_watch.py``) name the files changed in the watched
folders, and only there: watchdog's shared inotify reader (Linux) and its observer (elsewhere)."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from torchscan_lsp.server.folder_watch import InotifyFolders, ObserverFolders

KINDS = [ObserverFolders] + ([InotifyFolders] if sys.platform.startswith("linux") else [])


class Notes:
    """What ``note`` was told, on the watching thread."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bool]] = []
        self.changed = threading.Event()

    def __call__(self, path: str, is_directory: bool) -> None:
        self.seen.append((path, is_directory))
        self.changed.set()

    def wait_for(self, entry: tuple[str, bool]) -> None:
        deadline = time.monotonic() + 10
        while entry not in self.seen:
            assert time.monotonic() < deadline, f"{entry} never noted: {self.seen}"
            self.changed.wait(0.05)
            self.changed.clear()


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_changes_in_watched_folders_are_noted(tmp_path, kind):
    watched, other = tmp_path / "watched", tmp_path / "other"
    watched.mkdir()
    other.mkdir()
    notes = Notes()
    folders = kind(notes)
    try:
        folders.watch({str(watched), str(tmp_path / "missing")})
        assert folders.folders == {str(watched)}                   # a missing folder is left out
        (other / "b.py").write_text("x = 1\n")
        (watched / "a.py").write_text("x = 1\n")
        notes.wait_for((str(watched / "a.py"), False))
        assert not any(path.startswith(str(other)) for path, _ in notes.seen)

        folders.watch(set())                                       # nothing watched: nothing noted
        assert folders.folders == set()
        notes.seen.clear()
        (watched / "c.py").write_text("x = 1\n")
        time.sleep(0.5)
        assert notes.seen == []
    finally:
        folders.stop()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify")
def test_a_deleted_folder_is_noted_and_watched_again_when_it_is_back(tmp_path):
    folder = tmp_path / "pkg"
    folder.mkdir()
    notes = Notes()
    folders = InotifyFolders(notes)
    try:
        folders.watch({str(folder)})
        folder.rmdir()                                             # a checkout of a branch without it
        notes.wait_for((str(folder), True))
        folder.mkdir()
        folders.watch({str(folder)})
        assert folders.folders == {str(folder)}
        (folder / "a.py").write_text("x = 1\n")
        notes.wait_for((str(folder / "a.py"), False))
    finally:
        folders.stop()

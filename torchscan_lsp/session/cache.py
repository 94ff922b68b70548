"""Results of finished analyses, reused while nothing they depend on has changed.

A result is valid for a job as long as the target's file, every workspace file the result lists in
``imported_files``, every installed module file it lists in ``library_stamps`` (this package's
modules and the top level of each library the model imported), the options, the measurements asked
for and the interpreter are what they were. The key covers the target's own file, options,
measurements, interpreter and this package's version; the imported files are checked by content
hash and the library files by modification time at look-up, because which files a model imports
is only known after it ran.

The editor's session also keeps its results on disk (setting ``torchscan.cacheResults``), one JSON
file per key under :func:`cache_folder` ``("results")``, so that a reopened editor shows the hints of
unchanged targets without running them again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

from torchscan_lsp.version import package_version

FileHash = Callable[[str], "str | None"]
"""Returns the content hash of a workspace-relative file (buffer or disk), ``None`` if unreadable."""

FORMAT = 2
"""Version of the entry layout on disk; part of every key, so an older layout is never read."""


def cache_folder(kind: str, root: str | None = None) -> Path:
    """This package's folder of ``kind`` under the user's cache directory, created on demand:
    ``$XDG_CACHE_HOME/torchscan-lsp/<kind>`` (``~/.cache`` without the variable); with a workspace
    ``root``, one folder per workspace inside it, named by the root's folder name and a short hash
    of its absolute path, so that two projects with the same names never share files."""
    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "torchscan-lsp" / kind
    if root is not None:
        digest = hashlib.sha256(str(Path(root).resolve()).encode("utf-8")).hexdigest()[:10]
        folder /= f"{re.sub(r'[^A-Za-z0-9_.-]', '_', Path(root).name) or 'root'}-{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def job_key(job: Mapping[str, Any], file_hash: str, python: str) -> str:
    """The cache key of ``job`` run by ``python`` on a target file whose content hash is ``file_hash``."""
    material = {
        "format": FORMAT,
        "version": package_version(),
        "root": job.get("workspace_root"),
        "file": job.get("file"),
        "target": job.get("target"),
        "options": job.get("options"),
        "measure": sorted(job.get("measure") or []),
        "file_hash": file_hash,
        "python": python,
    }
    if job.get("kind"):  # a plan job holds the same options as its target's analysis
        material["kind"] = job["kind"]
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


def _stamps_hold(stamps: Mapping[str, Any]) -> bool:
    """Whether every file of ``stamps`` (path to ``st_mtime_ns``) still has its modification time."""
    for path, stamp in stamps.items():
        try:
            if os.stat(path).st_mtime_ns != stamp:
                return False
        except OSError:
            return False
    return True


class ResultCache:
    """Successful results by job key, each with the hashes of the files it imported.

    A key keeps up to ``variants`` results that differ in what they imported (an imported file
    edited back and forth, a branch switched and back): a variant that does not hold now is kept,
    since it may hold again, until newer ones push it out.

    Args:
        max_entries: the oldest keys in memory are dropped beyond this many.
        folder: where entries are also kept on disk (:meth:`persist`); ``None``: memory only.
        max_files: the least recently written files in ``folder`` are deleted beyond this many.
        variants: results kept per key.
    """

    def __init__(self, max_entries: int = 64, folder: Path | None = None, max_files: int = 512,
                 variants: int = 4) -> None:
        self._entries: dict[str, list[tuple[dict, dict[str, str | None]]]] = {}
        self._max = max_entries
        self.folder = folder
        self._max_files = max_files
        self._variants = variants

    def persist(self, folder: Path | None) -> None:
        """Keep entries in ``folder`` from now on (``None``: in memory only)."""
        self.folder = folder

    def put(self, key: str, result: dict, file_hash: FileHash) -> None:
        """Store an ``ok`` result (failures are never cached: the next run may succeed)."""
        if not result.get("ok"):
            return
        imported = {name: file_hash(name) for name in result.get("imported_files") or []}
        known = self._entries.get(key)
        if known is None:
            known = self._read(key)
        variants = [(result, imported), *(v for v in known if v[1] != imported)][: self._variants]
        self._remember(key, variants)
        if self.folder is not None:
            self._write(key, {"variants": [{"result": r, "imported": i} for r, i in variants]})

    def get(self, key: str, file_hash: FileHash) -> dict | None:
        """The stored result for ``key`` (in memory, else on disk) whose imported files all still
        have the stored hashes and whose library files their modification times, if any."""
        variants = self._entries.get(key)
        if variants is None:
            variants = self._read(key)
            if variants:
                self._remember(key, variants)
        for result, imported in variants:
            if (all(file_hash(name) == digest for name, digest in imported.items())
                    and _stamps_hold(result.get("library_stamps") or {})):
                return result
        return None

    def _remember(self, key: str, variants: list[tuple[dict, dict[str, str | None]]]) -> None:
        self._entries.pop(key, None)
        self._entries[key] = variants
        while len(self._entries) > self._max:
            self._entries.pop(next(iter(self._entries)))

    def _read(self, key: str) -> list[tuple[dict, dict[str, str | None]]]:
        if self.folder is None:
            return []
        try:
            entry = json.loads((self.folder / f"{key}.json").read_text(encoding="utf-8"))
            variants = [(v["result"], v["imported"]) for v in entry["variants"]]
        except (OSError, ValueError, KeyError, TypeError):  # absent, or written by a process that died
            return []
        return [(r, i) for r, i in variants if isinstance(r, dict) and r.get("ok") and isinstance(i, dict)]

    def _write(self, key: str, entry: dict) -> None:
        """Write ``entry`` atomically (a reader sees the old file or the new one), then prune."""
        assert self.folder is not None
        temporary = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(entry, out, separators=(",", ":"))
            os.replace(temporary, self.folder / f"{key}.json")
            temporary = None
            files = sorted(self.folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
            for old in files[: max(0, len(files) - self._max_files)]:
                old.unlink()
        except OSError:  # a full disk or a read-only cache costs the reuse, never the result
            if temporary is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)

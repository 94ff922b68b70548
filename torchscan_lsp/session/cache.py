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
unchanged targets without running them again. What is read back is checked against the contract
(:func:`~torchscan_lsp.contract.conformance.result_problem`: the result's types and its report's
schema version) and against this file's layout; anything else is dropped, said once in the log,
and the target runs again. A folder that cannot be created or written to keeps nothing: the
cache says why once (:attr:`ResultCache.problem`) and works from memory.

The session calls :meth:`ResultCache.get` and :meth:`ResultCache.put` from worker threads (they
hash files and read and write JSON): a lock keeps the entries consistent. A result of a few
hundred modules is a megabyte of JSON, and one call of the C encoder or decoder would hold the
interpreter lock from the event loop for tens of milliseconds: entries are read in pieces, and a
result read from the worker's file or an entry is written again from the text it was read from
(:mod:`torchscan_lsp.worker.result_text`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Mapping

from torchscan_lsp.contract.conformance import result_problem, type_problem
from torchscan_lsp.contract.folders import cache_folder  # noqa: F401 - its rule lives in the contract; the session names it here
from torchscan_lsp.version import package_version
from torchscan_lsp.worker import result_text

log = logging.getLogger(__name__)

FileHash = Callable[[str], "str | None"]
"""Returns the content hash of a workspace-relative file (buffer or disk), ``None`` if unreadable."""

FORMAT = 3
"""Version of the entry layout on disk; part of every key, and written in every entry (``format``),
so an entry of another layout is never taken."""

Variant = tuple[dict, dict[str, "str | None"]]
"""One kept result and the content hashes of the workspace files it imported, by relative path."""

_ENTRY_LEVELS = 3 + result_text.RESULT_LEVELS
"""The levels of an entry's containers read in Python: the entry, its variants, each variant, and
a result's own (:data:`~torchscan_lsp.worker.result_text.RESULT_LEVELS`)."""


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

    Attributes:
        problem: why results are not kept on disk although a folder was asked for (it cannot be
            created, or written to), in words for the user; ``None`` while they are kept.
    """

    def __init__(self, max_entries: int = 64, folder: Path | None = None, max_files: int = 512,
                 variants: int = 4) -> None:
        self._entries: dict[str, list[Variant]] = {}
        self._max = max_entries
        self.folder = folder
        self.problem: str | None = None
        self._writable = folder is not None
        self._rejected: set[str] = set()
        self._lock = threading.RLock()
        self._max_files = max_files
        self._variants = variants

    def persist(self, folder: Callable[[], Path] | Path | None) -> None:
        """Keep entries on disk from now on, in ``folder`` (or the folder it returns: a call of
        :func:`cache_folder`, which may raise), or in memory only with ``None``.

        A folder that cannot be created leaves the cache in memory only; one that cannot be written
        to (read-only) is still read. Either way :attr:`problem` says why results are not kept.
        """
        self.problem = None
        if callable(folder):
            try:
                folder = folder()
            except OSError as error:
                self.folder, self._writable = None, False
                self.problem = f"results are not kept between sessions: the cache folder cannot be created ({_reason(error)})"
                return
        self.folder, self._writable = folder, folder is not None
        if folder is not None:
            try:  # a read-only folder would drop every write in silence
                handle, probe = tempfile.mkstemp(dir=folder, suffix=".tmp")
                os.close(handle)
                os.unlink(probe)
            except OSError as error:
                self._refuse_writes(folder, error)

    def _refuse_writes(self, folder: Path, error: OSError) -> None:
        self._writable = False
        self.problem = f"results are not kept between sessions: cannot write in {folder} ({_reason(error)})"

    def put(self, key: str, result: dict, file_hash: FileHash) -> None:
        """Store an ``ok`` result (failures are never cached: the next run may succeed); hashes
        the files it imported (``file_hash``) and writes the entry's file."""
        if not result.get("ok"):
            return
        imported = {name: file_hash(name) for name in result.get("imported_files") or []}
        with self._lock:
            known = self._entries.get(key)
            if known is None:
                known = self._read(key)
            variants = [(result, imported), *(v for v in known if v[1] != imported)][: self._variants]
            self._remember(key, variants)
            if self.folder is not None and self._writable:
                self._write(key, self._entry_text(variants))

    def get(self, key: str, file_hash: FileHash) -> dict | None:
        """The stored result for ``key`` (in memory, else on disk) whose imported files all still
        have the stored hashes (``file_hash``) and whose library files their modification times,
        if any."""
        with self._lock:
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

    def _remember(self, key: str, variants: list[Variant]) -> None:
        self._entries.pop(key, None)
        self._entries[key] = variants
        while len(self._entries) > self._max:
            self._entries.pop(next(iter(self._entries)))

    @staticmethod
    def _entry_text(variants: list[Variant]) -> str:
        """The JSON text of an entry of layout :data:`FORMAT` holding ``variants``.

        A result read from the worker's file or from an entry is written from the text it was read
        from (:func:`~torchscan_lsp.worker.result_text.dumps`): copying 850 kB (a 200-module model's
        result) takes a millisecond, where encoding it held the interpreter lock from the event loop
        for 18 ms. Only what was added to it since (``log_tail``), and a result made otherwise (a
        training estimate's), is encoded."""
        texts = ['{"result":%s,"imported":%s}' % (result_text.dumps(result), result_text.dumps(imported))
                 for result, imported in variants]
        return '{"format":%s,"variants":[%s]}' % (json.dumps(FORMAT), ",".join(texts))

    def _read(self, key: str) -> list[Variant]:
        """The variants kept in ``key``'s file; ``[]`` when there is none, or when it is not an
        entry of this layout holding results of this contract (said once in the log)."""
        if self.folder is None or key in self._rejected:
            return []
        path = self.folder / f"{key}.json"
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError) as error:
            return self._reject(key, path, f"cannot be read ({error})")
        try:
            entry = result_text.loads(text, _ENTRY_LEVELS)
        except ValueError as error:  # written by a process that died mid-file, or not by us
            return self._reject(key, path, f"is not JSON ({error})")
        problem = _entry_problem(entry)
        if problem is not None:
            return self._reject(key, path, problem)
        return [(v["result"], v["imported"]) for v in entry["variants"]]

    def _reject(self, key: str, path: Path, why: str) -> list[Variant]:
        self._rejected.add(key)
        log.warning("dropped the kept result %s: it %s; the target runs again", path, why)
        return []

    def _write(self, key: str, entry: str) -> None:
        """Write ``entry`` (its JSON text) atomically (a reader sees the old file or the new one),
        then prune."""
        assert self.folder is not None
        temporary = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(entry)
            os.replace(temporary, self.folder / f"{key}.json")
            temporary = None
            self._rejected.discard(key)
            files = sorted(self.folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
            for old in files[: max(0, len(files) - self._max_files)]:
                old.unlink()
        except OSError as error:  # a full disk or a read-only cache costs the reuse, never the result
            if temporary is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
            if self.problem is None:
                self._refuse_writes(self.folder, error)


def _entry_problem(entry: Any) -> str | None:
    """What makes ``entry`` (a file's JSON) not an entry of layout :data:`FORMAT` whose every
    variant is a successful result of the contract with the hashes of its imported files."""
    if not isinstance(entry, dict) or entry.get("format") != FORMAT:
        found = entry.get("format") if isinstance(entry, dict) else None
        return f"is not a results entry of layout {FORMAT} (its format: {found!r})"
    problem = type_problem(entry.get("variants"), list[dict[str, Any]], "variants")
    for index, variant in enumerate(entry["variants"] if problem is None else []):
        where = f"variants[{index}]"
        problem = (type_problem(variant.get("imported"), dict[str, str | None], f"{where}.imported")
                   or (f"{where}.result: {found}" if (found := result_problem(variant.get("result"))) else None))
        if problem is not None:
            break
    return None if problem is None else f"does not hold results of this version ({problem})"


def _reason(error: OSError) -> str:
    """An ``OSError`` in a few words: ``Permission denied: '/ro/torchscan-lsp'``."""
    if error.strerror and error.filename:
        return f"{error.strerror}: {str(error.filename)!r}"
    return error.strerror or str(error)

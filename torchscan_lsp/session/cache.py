"""Results of finished analyses, reused while nothing they depend on has changed.

A result is valid for a job as long as the target's file, every workspace file the result lists in
``imported_files``, the options, the measurements asked for and the interpreter are what they were.
The key covers the target's own file, options, measurements and interpreter; the imported files are
checked by content hash at look-up, because which files a model imports is only known after it ran.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Mapping

FileHash = Callable[[str], "str | None"]
"""Returns the content hash of a workspace-relative file (buffer or disk), ``None`` if unreadable."""


def job_key(job: Mapping[str, Any], file_hash: str, python: str) -> str:
    """The cache key of ``job`` run by ``python`` on a target file whose content hash is ``file_hash``."""
    material = {
        "root": job.get("workspace_root"),
        "file": job.get("file"),
        "target": job.get("target"),
        "options": job.get("options"),
        "measure": sorted(job.get("measure") or []),
        "file_hash": file_hash,
        "python": python,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


class ResultCache:
    """Successful results by job key, each with the hashes of the files it imported.

    Args:
        max_entries: the oldest entries are dropped beyond this many.
    """

    def __init__(self, max_entries: int = 64) -> None:
        self._entries: dict[str, tuple[dict, dict[str, str | None]]] = {}
        self._max = max_entries

    def put(self, key: str, result: dict, file_hash: FileHash) -> None:
        """Store an ``ok`` result (failures are never cached: the next run may succeed)."""
        if not result.get("ok"):
            return
        imported = {name: file_hash(name) for name in result.get("imported_files") or []}
        self._entries.pop(key, None)
        self._entries[key] = (result, imported)
        while len(self._entries) > self._max:
            self._entries.pop(next(iter(self._entries)))

    def get(self, key: str, file_hash: FileHash) -> dict | None:
        """The stored result for ``key`` if every imported file still has the stored hash."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        result, imported = entry
        if any(file_hash(name) != digest for name, digest in imported.items()):
            del self._entries[key]
            return None
        return result

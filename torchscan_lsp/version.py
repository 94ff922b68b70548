"""The installed version of this package, looked up on every call (never cached: docs/report-schema.md, `context`).

Finding the distribution scans ``sys.path`` (about a third of a millisecond, a few per cent of a
small model's analysis), so the *location* of its metadata file is remembered, and every call
checks that file (``os.stat``: inode, size, modification time) and reads it again when it changed:
an upgrade or a reinstall in a running process is seen at once (an upgrade removes the old metadata,
and the next call finds the new one).
"""

import os
from importlib import metadata

PACKAGE_NAME = "torchscan-lsp"

#: The metadata file of the last full lookup (absolute path), or nothing.
_LOCATION: list[str] = []
#: ``(path, (inode, size, mtime_ns), version)`` of the last read.
_READ: list[tuple[str, tuple[int, int, int], str]] = []


def _read_version(path: str) -> str | None:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("Version:"):
                return line.partition(":")[2].strip()
            if not line.strip():  # the headers end at the first blank line
                break
    return None


def package_version() -> str:
    """Return the installed ``torchscan-lsp`` version, or ``"unknown"`` without package metadata."""
    if _LOCATION:
        path = _LOCATION[0]
        try:
            info = os.stat(path)
            stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
            if _READ and _READ[0][0] == path and _READ[0][1] == stamp:
                return _READ[0][2]
            found = _read_version(path)
        except OSError:
            found = None
        if found is not None:
            _READ[:] = [(path, stamp, found)]
            return found
        _LOCATION.clear()
    try:
        distribution = metadata.distribution(PACKAGE_NAME)
    except metadata.PackageNotFoundError:
        return "unknown"
    folder = getattr(distribution, "_path", None)  # PathDistribution's metadata folder
    if folder is not None:
        for name in ("METADATA", "PKG-INFO"):
            path = os.path.abspath(os.path.join(os.fspath(folder), name))
            if os.path.isfile(path):
                _LOCATION.append(path)
                break
    return distribution.version

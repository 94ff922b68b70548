"""Where this package keeps files of its own: the one folder rule every layer follows (the session's
results and reports, the worker's measured device ceilings), standard library only."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

__all__ = ["cache_folder"]


def cache_folder(kind: str, root: str | None = None) -> Path:
    """This package's folder of ``kind`` under the user's cache directory, created on demand:
    ``$XDG_CACHE_HOME/torchscan-lsp/<kind>`` (``~/.cache`` without the variable); with a workspace
    ``root``, one folder per workspace inside it, named by the root's folder name and a short hash
    of its absolute path, so that two projects with the same names never share files.

    Raises:
        OSError: the folder cannot be created (a read-only parent, ``XDG_CACHE_HOME`` naming a
            file, a home folder that is not writable), or no home folder is known without
            ``XDG_CACHE_HOME`` (``Path.home()``'s ``RuntimeError``, turned into an ``OSError``).
    """
    try:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    except RuntimeError as error:  # no HOME and no password entry for this user
        raise OSError(f"XDG_CACHE_HOME is not set and the home folder is unknown ({error})") from error
    folder = base / "torchscan-lsp" / kind
    if root is not None:
        digest = hashlib.sha256(str(Path(root).resolve()).encode("utf-8")).hexdigest()[:10]
        folder /= f"{re.sub(r'[^A-Za-z0-9_.-]', '_', Path(root).name) or 'root'}-{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder

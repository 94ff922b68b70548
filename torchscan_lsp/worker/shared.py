"""Where a warm parent shared by several servers listens, and how a server's relay reaches it (no torch).

Importing torch and the libraries a model is built with takes a warm parent seconds (torch and
transformers' GPT-2: about 5 s on a 2-core machine), and every server started its own: a second
editor window, a restarted server or an editor reopened a minute later paid it again before its
first hints. A warm parent may instead listen on a Unix socket (``python -m
torchscan_lsp.worker.zygote --listen PATH``) and serve every server of the same user that would
have started an identical one; it stays a while after its last server left
(:data:`DEFAULT_LINGER_S`, the ``torchscan.keepWarmMinutes`` setting), then exits.

"Identical" is the key of :func:`socket_path`: the interpreter, this package's version and source
files (an edited checkout never gets an old warm parent), and the environment variables that
change what torch and the libraries do when they are imported (:data:`KEYED_PREFIXES`); every other
variable is the requesting server's, applied in each job's child (:mod:`.relay` sends it).

Sockets live in ``$XDG_RUNTIME_DIR/torchscan-lsp`` (else ``<tempdir>/torchscan-lsp-<uid>``), a
folder only this user may enter; when that cannot be had, :func:`socket_folder` is ``None`` and the
server's warm parent is its own, as before. ``TORCHSCAN_LSP_SHARE_WARM=0`` turns sharing off.

Races: a relay connects, and spawns the warm parent when none listens, while holding the key's
lock file (:func:`locked`); a warm parent that leaves takes the same lock, and stays when a
connection is already waiting, so a relay never connects to a warm parent that is on its way out.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import stat
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import torchscan_lsp

DEFAULT_LINGER_S = 600.0
"""How long a shared warm parent stays after its last server left, unless a server said otherwise."""

KEYED_PREFIXES = ("PYTHON", "TORCH", "PYTORCH", "CUDA", "NVIDIA", "OMP_", "MKL_", "OPENBLAS", "KMP_", "HF_",
                  "TRANSFORMERS_", "TOKENIZERS", "LD_", "VIRTUAL_ENV", "CONDA_PREFIX", "HOME", "TMPDIR", "TMP",
                  "TEMP", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME")
"""Environment variables (by prefix) read when torch and model libraries are imported, or that
imported libraries turn into paths then (``huggingface_hub`` its cache folder from
``XDG_CACHE_HOME``, ``tempfile`` its folder from ``TMPDIR``, ``site`` the user's packages from
``HOME``): servers whose values differ never share a warm parent. This package's own
(``TORCHSCAN_``) are not among them: they are read when a job runs, in its server's environment."""

_PACKAGE = Path(torchscan_lsp.__file__).resolve().parent


def sharing_enabled(env: Mapping[str, str] = os.environ) -> bool:
    """Whether warm parents may be shared (``TORCHSCAN_LSP_SHARE_WARM`` is not ``0``, and Unix sockets exist)."""
    return env.get("TORCHSCAN_LSP_SHARE_WARM", "1") != "0" and hasattr(os, "fork") and sys.platform.startswith("linux")


def socket_folder(env: Mapping[str, str] = os.environ) -> Path | None:
    """The private folder of this user's sockets (made with mode 0700), or ``None`` when it cannot
    be made, or is not this user's own with no access for others."""
    runtime = env.get("XDG_RUNTIME_DIR")
    folder = Path(runtime) / "torchscan-lsp" if runtime else Path(tempfile.gettempdir()) / f"torchscan-lsp-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, parents=runtime is not None, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    return folder


def _package_stamp() -> str:
    """This package's source files with their sizes and modification times, hashed."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        with contextlib.suppress(OSError):
            info = path.stat()
            digest.update(f"{path}:{info.st_size}:{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def key(python: str, env: Mapping[str, str]) -> str:
    """The key of the warm parent ``python`` would run in ``env``: 16 hexadecimal digits."""
    from torchscan_lsp.version import package_version

    keyed = sorted((name, value) for name, value in env.items()
                   if name.startswith(KEYED_PREFIXES) and not name.startswith("TORCHSCAN_"))
    material = repr((os.path.realpath(python), python, package_version(), _package_stamp(), keyed))
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def socket_path(python: str, env: Mapping[str, str]) -> Path | None:
    """Where the shared warm parent of ``python`` in ``env`` listens; ``None`` without a private folder."""
    folder = socket_folder(env)
    return None if folder is None else folder / f"{key(python, env)}.sock"


@contextlib.contextmanager
def locked(socket: Path) -> Iterator[None]:
    """Hold the lock file of ``socket``'s key (``<key>.lock`` beside it) for the block."""
    with open(socket.with_suffix(".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

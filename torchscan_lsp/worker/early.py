"""A warm parent started before the language server has imported anything (server side, no torch).

Importing torch takes the warm parent seconds, and the server's own imports (pygls, lsprotocol)
most of a second: :func:`spawn` starts the warm parent of the server's own interpreter first thing,
so both happen at once on different cores. That runs no workspace code (the interpreter is the
server's own, the working directory ``/``), so it may happen before the workspace is trusted;
when the workspace turns out untrusted, or its settings name another interpreter, the process is
stopped unused (:func:`discard`). Otherwise :func:`adopt` hands it, wrapped in the interface of an
``asyncio`` subprocess, to the pool's :class:`~.pool.WarmParent` of that interpreter.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import torchscan_lsp
from torchscan_lsp.worker import shared

_PACKAGE_PARENT = str(Path(torchscan_lsp.__file__).resolve().parent.parent)


def command(python: str, scratch: str) -> tuple[list[str], dict[str, str]]:
    """The warm parent's command line and environment for ``python`` (its reports go to
    ``scratch``): a relay to the shared one where sharing is on (:mod:`.shared`), else its own."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    module = "torchscan_lsp.worker.relay" if shared.sharing_enabled(env) else "torchscan_lsp.worker.zygote"
    return [python, "-m", module, "--scratch", scratch], env


_early: dict[str, tuple[subprocess.Popen, str]] = {}


def spawn(scratch: str) -> None:
    """Start the warm parent of ``sys.executable`` now (reports to ``scratch``), for a later
    :func:`adopt`; nothing happens when it cannot start."""
    argv, env = command(sys.executable, scratch)
    try:
        # cwd "/": nothing of a workspace (a stray torch.py, say) may shadow what it imports.
        process = subprocess.Popen(argv, cwd="/", env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   start_new_session=True)
    except OSError:
        return
    _early[sys.executable] = (process, scratch)


class Adopted:
    """A :class:`subprocess.Popen` warm parent behind the interface of an asyncio subprocess
    (``pid``, ``returncode``, ``stdin``, ``stdout``, ``kill()``, ``await wait()``)."""

    def __init__(self, process: subprocess.Popen, stdin: asyncio.StreamWriter, stdout: asyncio.StreamReader) -> None:
        self._process = process
        self.pid = process.pid
        self.stdin = stdin
        self.stdout = stdout

    @property
    def returncode(self) -> int | None:
        """The exit status once it ended, else ``None``."""
        return self._process.poll()

    def kill(self) -> None:
        """Send it ``SIGKILL``."""
        self._process.kill()

    async def wait(self) -> int:
        """Wait for it to end (in a thread: it is not a child of the event loop); its status."""
        return await asyncio.get_running_loop().run_in_executor(None, self._process.wait)


async def adopt(python: str) -> tuple[Adopted, str] | None:
    """The early warm parent of ``python`` and its scratch folder, now driven by the running event
    loop; ``None`` when none was started for ``python`` (or it already ended)."""
    process, scratch = _early.pop(python, (None, ""))
    if process is None or process.poll() is not None:
        return None
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20, loop=loop)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), process.stdout)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, process.stdin)
    return Adopted(process, asyncio.StreamWriter(transport, protocol, None, loop), reader), scratch


def discard(keep: str | None = None) -> list[str]:
    """Stop every early warm parent not adopted, except that of interpreter ``keep``; returns the
    scratch folders they used (for the caller to remove)."""
    folders = []
    for python in [p for p in _early if p != keep]:
        process, scratch = _early.pop(python)
        with contextlib.suppress(OSError):
            process.kill()
            process.wait(timeout=5)
        folders.append(scratch)
    return folders


def kill(process: asyncio.subprocess.Process | Adopted) -> None:
    """``SIGKILL`` a warm parent process unless it has ended.

    Never through ``asyncio.subprocess.Process.kill``: before Python 3.13 it signals through
    ``subprocess.Popen.send_signal``, which first polls the child with ``waitpid`` and so may reap a
    warm parent that just exited before asyncio's child watcher does; the watcher then finds no
    child and logs ``Unknown child process pid N, will report returncode 255`` on stderr (CPython
    gh-87744). ``os.kill`` leaves the reaping to the watcher (an adopted early parent, a
    ``subprocess.Popen`` no watcher knows, answers ``returncode`` by polling itself).
    """
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(process.pid, signal.SIGKILL)

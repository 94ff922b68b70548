"""``python -m torchscan_lsp.worker.relay``: a server's line to the shared warm parent (no torch).

The server runs this in place of a warm parent of its own (see :mod:`.shared`): it connects to the
warm parent listening for this interpreter and environment, starting one when none does, and then
passes lines both ways unchanged (the protocol of :mod:`.zygote`), except that each job request
gets ``env``, this process's environment (the server's), for the job's child to run in. It dies
with the server; when the server closes its stdin, or dies, the connection closes and the warm
parent kills the jobs this server started.

When no private socket folder exists, or sharing is off, it becomes (``exec``) an unshared warm
parent, the server's own, as if the server had started that.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import socket
import subprocess
import sys
from pathlib import Path

from torchscan_lsp.worker import shared
from torchscan_lsp.worker.limits import die_with_parent

CONNECT_TRIES = 3
"""Connections tried when one ends before the warm parent said it was ready (it was leaving)."""


def _connect(path: Path) -> socket.socket | None:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(str(path))
    except OSError:
        client.close()
        return None
    return client


def _spawn(path: Path) -> socket.socket | None:
    """Start the shared warm parent of ``path`` on a socket bound here, and connect to it: the
    connection waits in the socket's queue while the warm parent imports torch."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with contextlib.suppress(FileNotFoundError):  # a killed warm parent leaves its socket file behind
            path.unlink()
        listener.bind(str(path))
        listener.listen(64)
        with open(path.with_suffix(".log"), "w") as log:  # its stray output; the last one's only
            subprocess.Popen([sys.executable, "-m", "torchscan_lsp.worker.zygote", "--listen", str(path),
                              "--listen-fd", str(listener.fileno())], cwd="/", stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
                             pass_fds=[listener.fileno()])
    except OSError:
        return None
    finally:
        listener.close()
    return _connect(path)


def connect(path: Path) -> socket.socket | None:
    """A connection to the warm parent listening at ``path``, started when none listens; ``None``
    when it could not be started."""
    with shared.locked(path):
        return _connect(path) or _spawn(path)


def _with_env(line: bytes) -> bytes:
    """A request line, with this process's environment added when it is a job request."""
    try:
        request = json.loads(line)
    except ValueError:
        return line
    if isinstance(request, dict) and "job" in request:
        request["env"] = dict(os.environ)
        return json.dumps(request).encode() + b"\n"
    return line


def relay(client: socket.socket) -> str:
    """Pass lines between stdin/stdout and ``client`` until one side ends; returns which:
    ``"server"`` (stdin closed), ``"early"`` (the warm parent left before it was ready) or
    ``"parent"`` (it left later)."""
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ, "server")
    selector.register(client, selectors.EVENT_READ, "parent")
    pending, ready = b"", False
    while True:
        for selected, _ in selector.select():
            if selected.data == "server":
                chunk = os.read(0, 65536)
                if not chunk:
                    return "server"
                pending += chunk
                *lines, pending = pending.split(b"\n")
                client.sendall(b"".join(_with_env(line + b"\n") for line in lines if line.strip()))
            else:
                chunk = client.recv(65536)
                if not chunk:
                    return "parent" if ready else "early"
                ready = True
                os.write(1, chunk)


def main() -> int:
    """Connect and relay; an unshared warm parent replaces this process when no socket can be had."""
    die_with_parent(os.getppid())
    path = shared.socket_path(sys.executable, os.environ) if shared.sharing_enabled() else None
    for _ in range(CONNECT_TRIES if path is not None else 0):
        client = connect(path)
        if client is None:
            break
        ended = relay(client)
        client.close()
        if ended == "parent":  # the server would log this process's status as the warm parent's
            os.write(1, json.dumps({"event": "retire", "message": "the shared warm worker ended"}).encode() + b"\n")
        if ended != "early":
            return 0
    os.execv(sys.executable, [sys.executable, "-m", "torchscan_lsp.worker.zygote", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())

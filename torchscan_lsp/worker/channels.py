"""The warm parent's lines to its servers: one channel per server, and the socket that takes new ones.

An unshared warm parent has one :class:`Channel`, its stdin and stdout; a shared one (see
:mod:`.shared`) a :class:`Listener` on its Unix socket and one channel per connected relay.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
from pathlib import Path
from typing import Any, Callable

from torchscan_lsp.worker import shared


class Channel:
    """One server's line: requests are read from ``fd``, events written with ``write``.

    Args:
        fd: the file descriptor requests arrive on (its end of file: the server left).
        write: writes bytes to the server; an ``OSError`` means it left.
        close: releases the channel's descriptors.
    """

    def __init__(self, fd: int, write: Callable[[bytes], Any], close: Callable[[], None] = lambda: None) -> None:
        self.fd = fd
        self._write = write
        self._close = close
        self.pending = b""
        self.open = True

    @classmethod
    def of_socket(cls, connection: socket.socket) -> Channel:
        """The channel of an accepted connection (its writes block: events are short lines)."""
        connection.setblocking(True)
        return cls(connection.fileno(), connection.sendall, connection.close)

    def send(self, event: dict[str, Any]) -> None:
        """Write one event line; a server that left is ignored (its end of file comes next)."""
        if not self.open:
            return
        try:
            self._write((json.dumps(event) + "\n").encode())
        except OSError:
            self.open = False

    def requests(self) -> list[dict[str, Any]] | None:
        """The complete request lines that arrived; ``None`` at end of file."""
        chunk = os.read(self.fd, 65536)
        if not chunk:
            return None
        self.pending += chunk
        *lines, self.pending = self.pending.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def close(self) -> None:
        """Release the descriptors."""
        self.open = False
        self._close()


class Listener:
    """The socket of a shared warm parent at ``path``: the listening socket ``fd`` its relay bound
    and handed down (so relays connect, and wait for ``ready``, while torch is imported).

    Raises:
        OSError: ``fd`` is not a socket, or ``path`` is gone.
    """

    def __init__(self, path: str, fd: int) -> None:
        self.path = Path(path)
        self.socket: socket.socket | None = socket.socket(fileno=fd)
        self._inode = os.stat(self.path).st_ino

    def fileno(self) -> int:
        """The listening socket's descriptor (``-1`` once it stopped listening)."""
        return self.socket.fileno() if self.socket is not None else -1

    def accept(self) -> Channel:
        """The channel of the next connection."""
        assert self.socket is not None
        connection, _ = self.socket.accept()
        return Channel.of_socket(connection)

    def leave(self) -> bool:
        """Stop listening unless a relay is already waiting to be accepted (under the key's lock,
        which relays hold while they connect); returns whether it stopped."""
        if self.socket is None:
            return True
        with shared.locked(self.path):
            if select.select([self.socket], [], [], 0)[0]:
                return False
            self.stop()
        return True

    def stop(self) -> None:
        """Stop listening: the socket file goes (when it is still this one's, not a successor's)."""
        if self.socket is None:
            return
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == self._inode:
                self.path.unlink()
        self.socket.close()
        self.socket = None

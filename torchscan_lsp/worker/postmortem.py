"""Where a worker process was when it died: the last Python stack it dumped into its log.

Job processes enable :mod:`faulthandler`, so a fatal signal (a segfault, a C++ abort) writes the
Python stack to their output, and ``SIGUSR1`` (sent by the server before it kills a job at a
limit) does the same. The innermost frame of the last such dump that lies inside the workspace
is the line to show the diagnostic on (a workspace file by :mod:`.workspace`'s rule). Never
imports torch.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from torchscan_lsp.worker.workspace import Workspace

LOG_WINDOW_BYTES = 64 * 1024
"""How much of the end of a log is searched for a stack dump."""

_DUMP_START = re.compile(r"^(?:Current thread|Thread|Stack) .*\(most recent call first\):\s*$", re.MULTILINE)
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+) in ', re.MULTILINE)
_TRACEBACK_START = re.compile(r"^Traceback \(most recent call last\):\s*$", re.MULTILINE)
_TRACEBACK_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+), in ', re.MULTILINE)


def read_end(path: str | Path, size: int = LOG_WINDOW_BYTES) -> str:
    """The last ``size`` bytes of the file at ``path``, decoded leniently ('' when unreadable)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - size))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _first_in_workspace(frames: list[re.Match], workspace_root: str) -> tuple[str, int] | None:
    """The first of ``frames`` in a workspace file, by the rule every location follows
    (:class:`~.workspace.Workspace`: never a pseudo-file such as ``<frozen runpy>``, a virtual
    environment or this package)."""
    workspace = Workspace(workspace_root)
    for frame in frames:
        relative = workspace.relative(frame["file"])
        if relative is not None:
            return relative, int(frame["line"])
    return None


def last_stack_location(log_text: str, workspace_root: str) -> tuple[str, int] | None:
    """The innermost workspace frame of the last stack dump in ``log_text``, as a
    ``(workspace-relative path with / separators, 1-based line)`` pair; ``None`` without one."""
    starts = list(_DUMP_START.finditer(log_text))
    if not starts:
        return None
    # faulthandler lists the most recent call first: the first workspace frame is the innermost.
    return _first_in_workspace(list(_FRAME.finditer(log_text, starts[-1].end())), workspace_root)


def last_traceback_location(log_text: str, workspace_root: str) -> tuple[str, int] | None:
    """The innermost workspace frame of the last Python traceback printed in ``log_text`` (the
    worker prints one for an exception that escaped the runner, a ``KeyboardInterrupt`` say)."""
    starts = list(_TRACEBACK_START.finditer(log_text))
    if not starts:
        return None
    frames = list(_TRACEBACK_FRAME.finditer(log_text, starts[-1].end()))
    return _first_in_workspace(frames[::-1], workspace_root)  # most recent call last

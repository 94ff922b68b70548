"""One quiet global trace function, shared by everything that traces frames of the recording pass.

Python calls a frame's own trace function (``frame.f_trace``) only while a global one is set
(``sys.settrace``). The pass sets frame trace functions of its own in two places: on a direct
``forward`` call's frame to see what it returns (:mod:`.direct_calls`), and on the frames of
workspace loops to see their line events (:mod:`torchscan_lsp.worker.line_runs`). Both need the
same global function, :func:`quiet`, which traces no new frame (as ``pdb`` does while it watches
frames of its own choosing), and neither may remove it while the other still needs it:
:func:`hold` and :func:`release` count its users on each thread.

A global trace function that is not :func:`quiet` (a debugger, a coverage tool) is left alone:
:func:`hold` refuses, and whoever asked does without frame tracing. Chaining into it would slow
it down and change what it sees, and a debugger stepping through model code must not see
the analysis's own trace functions take over its frames.
"""

from __future__ import annotations

import sys
import threading
import types
from typing import Any

__all__ = ["quiet", "hold", "release"]

_state = threading.local()


def quiet(frame: types.FrameType, event: str, arg: Any) -> None:
    """The global trace function while frames are watched: it traces no new frame."""
    return None


def hold() -> bool:
    """Make sure :func:`quiet` is the global trace function on this thread, and count one more
    user of it. False, with nothing changed, when another trace function is set."""
    current = sys.gettrace()
    if current is None:
        sys.settrace(quiet)
        _state.users = 1
        return True
    if current is quiet:
        _state.users = getattr(_state, "users", 0) + 1
        return True
    return False


def release() -> None:
    """One user of :func:`quiet` is done (after a :func:`hold` that returned True); the last one
    removes it, unless something else has been set in its place since."""
    users = getattr(_state, "users", 0) - 1
    _state.users = max(users, 0)
    if users <= 0 and sys.gettrace() is quiet:
        sys.settrace(None)

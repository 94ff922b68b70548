"""Where below the line blamed a failed job failed: the innermost frames of its traceback, as a
failed result's ``error`` carries them (docs/architecture.md, "The worker job protocol"), and the
one-line text that diagnostics, ``check``, ``scan`` and the server's log add to the error's message.
Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

__all__ = ["TracebackFrame", "traceback_text"]


class TracebackFrame(TypedDict):
    """One frame of a failed job's traceback: ``file`` (workspace-relative, or an installed file's
    path below ``site-packages``: ``torchvision/_meta_registrations.py``), its 1-based ``line``, the
    ``function`` running there (``<module>`` while a module is imported) and ``source``, the line's
    text (stripped; ``""`` when it cannot be read)."""

    file: str
    line: int
    function: str
    source: str


def traceback_text(error: Mapping[str, Any]) -> str:
    """An error's ``cause`` (unless its message says it already) and ``traceback`` in one line, as
    diagnostics and ``scan`` add them to the message: ``"caused by RuntimeError: ...; innermost
    frames: lib/ops.py:4 in <module> (`register("nms")`) → lib/registry.py:9 in register (`raise
    RuntimeError(...)`)"``; ``""`` when the error has neither."""
    parts = []
    cause = str(error.get("cause") or "")
    if cause and cause.split(": ", 1)[-1] not in str(error.get("message") or ""):
        parts.append(f"caused by {cause}")
    frames = [f for f in error.get("traceback") or [] if isinstance(f, Mapping)]
    if frames:
        parts.append("innermost frames: " + " → ".join(
            f"{f.get('file')}:{f.get('line')} in {f.get('function')}" + (f" (`{f['source']}`)" if f.get("source") else "")
            for f in frames))
    return "; ".join(parts)

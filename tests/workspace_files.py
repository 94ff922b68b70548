"""Helpers the tests share: writing a small workspace of dedented source files, and finding the
1-based line of a piece of text in one (what the expected locations of hints and errors are)."""

from __future__ import annotations

import textwrap
from pathlib import Path

__all__ = ["write", "line_of", "loc"]


def write(root: Path, files: dict[str, str]) -> dict[str, str]:
    """Write each ``files[rel]``, dedented and without its leading newline, to ``root / rel``
    (folders created); returns the texts as written, by ``rel``."""
    written = {}
    for rel, text in files.items():
        text = textwrap.dedent(text).lstrip("\n")
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written[rel] = text
    return written


def line_of(text: str, needle: str, occurrence: int = 0) -> int:
    """The 1-based line of the ``occurrence``-th (0: the first) ``needle`` in ``text``."""
    start = -1
    for _ in range(occurrence + 1):
        start = text.index(needle, start + 1)
    return text.count("\n", 0, start) + 1


def loc(file: str, line: int) -> dict:
    """A source location as results carry it: ``{"file": ..., "line": ...}``."""
    return {"file": file, "line": line}

"""Helpers the tests share: writing a small workspace of dedented source files, finding the
1-based line of a piece of text in one (what the expected locations of hints and errors are), and
running ``torchscan-lsp scan`` in the test's own process."""

from __future__ import annotations

import textwrap
from pathlib import Path

__all__ = ["write", "line_of", "loc", "run_scan"]


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


def run_scan(capsys, *argv: str) -> tuple[int, str, str]:
    """``torchscan-lsp scan ARGV`` in this process (``capsys``: pytest's captured output); returns
    the exit status, stdout and stderr, and fails when a traceback of ours reached stderr."""
    from torchscan_lsp.cli import main

    code = main(["scan", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err

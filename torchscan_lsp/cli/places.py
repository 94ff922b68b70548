"""How ``scan`` and ``check`` name a line: ``FILE:LINE``, or ``FILE:cell N:LINE`` in a notebook.

A notebook is analysed as its code cells joined into one program (:mod:`torchscan_lsp.session.notebooks`);
every line a result names is a line of that program, and is printed as the cell (numbered from 1
among all cells, markdown included) and the line in it: ``nb.ipynb:cell 3:12``, as ruff prints them.
"""

from __future__ import annotations

from pathlib import Path

from torchscan_lsp.session.controller import Session
from torchscan_lsp.session.notebooks import Program

__all__ = ["Places"]


class Places:
    """Positions as the commands print them, for the documents of ``session`` (``None``: plain
    ``FILE:LINE`` for every file)."""

    def __init__(self, session: Session | None = None) -> None:
        self.session = session

    def program(self, path: str | Path) -> Program | None:
        """The program of the notebook at ``path`` (absolute, or relative to the current folder),
        ``None`` for any other file."""
        if self.session is None:
            return None
        document = self.session.store.documents.get(str(Path(path).resolve()))
        return document.program if document is not None else None

    def at(self, shown: str, line: int | None) -> str:
        """``shown:LINE`` (``shown:cell N:LINE`` in a notebook); ``shown`` alone without a line.
        ``shown`` is the file as printed, relative to the current folder."""
        if not line:
            return shown
        program = self.program(shown)
        return f"{shown}:{program.where(line) if program is not None else line}"

    def cell(self, path: str | Path, line: int) -> tuple[int | None, int]:
        """The cell number and the line in it of 1-based ``line`` of the file at ``path``:
        ``(None, line)`` outside a notebook (or outside every cell)."""
        program = self.program(path)
        found = program.locate(line) if program is not None else None
        return (found[0].number, found[1]) if found is not None else (None, line)

    def message(self, path: str | Path, rel: str, text: str) -> str:
        """``text`` with the program lines it names of the notebook at ``path`` (workspace-relative
        ``rel``: ``raised at nb.ipynb:14``) written as cells (``raised at nb.ipynb:cell 3:2``)."""
        program = self.program(path)
        return program.relabel(text, rel) if program is not None else text

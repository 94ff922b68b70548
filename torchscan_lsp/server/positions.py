"""Positions in the client's encoding.

``ast`` columns and Python string indexes count code points; LSP positions count code units of
the negotiated encoding (UTF-16 unless the client chose otherwise). :class:`Lines` converts one
document's columns, and gives the ranges the features need (a whole statement line, its end).
"""

from __future__ import annotations

from typing import Callable

from lsprotocol import types

Units = Callable[[str], int]
"""Counts the client's code units in a string (``len`` for code points)."""


def utf16_units(text: str) -> int:
    """UTF-16 code units in ``text`` (characters beyond the BMP count twice)."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


class Lines:
    """The lines of one document with a column converter.

    Args:
        text: the document text.
        units: code-unit counter of the negotiated encoding (``len`` for UTF-32 and the ``check``
            command, :func:`utf16_units` for UTF-16, a pygls codec's ``client_num_units``).
    """

    def __init__(self, text: str, units: Units = utf16_units) -> None:
        self.lines = text.splitlines()
        self.units = units

    def text(self, line: int) -> str:
        """Text of 1-based ``line`` ('' past the end)."""
        return self.lines[line - 1] if 0 < line <= len(self.lines) else ""

    def position(self, line: int, column: int) -> types.Position:
        """Position of 1-based ``line`` and code-point ``column`` (clamped to the line)."""
        text = self.text(line)
        column = max(0, min(column, len(text)))
        return types.Position(line=max(0, line - 1), character=self.units(text[:column]))

    def end(self, line: int) -> types.Position:
        """Position just after the last character of 1-based ``line``."""
        return self.position(line, len(self.text(line)))

    def statement(self, line: int) -> types.Range:
        """Range from the first non-blank character of 1-based ``line`` to its end."""
        text = self.text(line)
        start = len(text) - len(text.lstrip())
        return types.Range(start=self.position(line, start), end=self.end(line))

    def span(self, line: int, column: int, end_column: int | None) -> types.Range:
        """Range of code-point columns ``[column, end_column)`` on 1-based ``line``; to the line's
        end when ``end_column`` is ``None`` or not after ``column``."""
        start = self.position(line, column)
        if end_column is None or end_column <= column:
            return types.Range(start=start, end=self.end(line))
        return types.Range(start=start, end=self.position(line, end_column))

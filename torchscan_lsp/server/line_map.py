"""Line correspondence between the text a result was computed from and the current text.

A result names 1-based lines of the text its worker read. After an unsaved edit (or a save that
could not be analysed) the buffer's lines have moved: :class:`LineMap` matches the two versions
line by line (:class:`difflib.SequenceMatcher`) so that what a result says about an unchanged line
follows that line, and nothing is said about a line that changed.
"""

from __future__ import annotations

import difflib
from typing import Sequence


class LineMap:
    """Maps 1-based lines of ``analysed`` to those of ``current`` and back.

    Only lines inside equal runs correspond; a changed, inserted or deleted line maps to ``None``.
    Equal texts give the identity without running the matcher.

    Args:
        analysed: the lines the result was computed from.
        current: the lines of the document now.
    """

    def __init__(self, analysed: Sequence[str], current: Sequence[str]) -> None:
        self.identity = list(analysed) == list(current)
        self._forward: dict[int, int] = {}
        self._backward: dict[int, int] = {}
        if self.identity:
            return
        # autojunk off: blank lines and "return x" are frequent in source, and must still anchor.
        matcher = difflib.SequenceMatcher(None, list(analysed), list(current), autojunk=False)
        for old_start, new_start, size in matcher.get_matching_blocks():
            for offset in range(size):
                self._forward[old_start + offset + 1] = new_start + offset + 1
                self._backward[new_start + offset + 1] = old_start + offset + 1

    def to_current(self, line: int) -> int | None:
        """The current line that analysed ``line`` became, or ``None`` when it changed."""
        return line if self.identity else self._forward.get(line)

    def to_analysed(self, line: int) -> int | None:
        """The analysed line that current ``line`` was, or ``None`` when it is new or changed."""
        return line if self.identity else self._backward.get(line)


IDENTITY = LineMap((), ())
"""The map of a result whose text is unknown (taken as current) or unchanged."""

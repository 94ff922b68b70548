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
        old, new = list(analysed), list(current)
        # An edit is usually local: the common head and tail match as they are, and only the middle
        # goes through the matcher, whose cost grows with the product of the lengths it compares.
        head = 0
        while head < min(len(old), len(new)) and old[head] == new[head]:
            head += 1
        tail = 0
        while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
            tail += 1
        blocks = [(0, 0, head), (len(old) - tail, len(new) - tail, tail)]
        # autojunk off: blank lines and "return x" are frequent in source, and must still anchor.
        matcher = difflib.SequenceMatcher(None, old[head:len(old) - tail], new[head:len(new) - tail], autojunk=False)
        blocks += [(head + a, head + b, size) for a, b, size in matcher.get_matching_blocks()]
        for old_start, new_start, size in blocks:
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

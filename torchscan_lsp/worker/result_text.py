"""A result's JSON text, read in pieces that remember their text, and written again from it.

A model of a few hundred modules has a result of about a megabyte (a 200-module model's: 850 kB).
``json.loads`` decodes it in one call of its C decoder, which holds the interpreter lock throughout
(13 ms on an idle machine, twice that on a busy one), and the server's event loop, which answers
hints and hovers, waits that long even though the decoding runs in a thread; encoding it again
(``json.dumps``, to keep it on disk) holds the lock as long. :func:`loads` decodes the outer
``levels`` of containers in Python and every value below them (a layer of the report, an entry of
the source map: a few kB) with one call of the C decoder, so that the lock changes hands between
pieces (every ``sys.getswitchinterval()``) and the same value comes out as from ``json.loads``.

Each object that :func:`loads` decodes in Python is a :class:`TextObject`, a ``dict`` that knows
where each member's value lies in the text. :func:`dumps` writes one again by copying those texts
instead of encoding the values: a member is written from its text while it is the very object
that was decoded; members added or replaced since are encoded. A value must therefore not be
changed in place after it was read (the session hands results on and never edits them: the server
only adds members, such as ``log_tail``).
"""

from __future__ import annotations

import json
import re
from json.decoder import JSONDecodeError, scanstring
from typing import Any

__all__ = ["RESULT_LEVELS", "TextObject", "dumps", "loads"]

RESULT_LEVELS = 3
"""The levels of a result's containers that :func:`loads` decodes in Python: the result, its members
(the report, the source map) and theirs (the report's layers, the source map's lists), whose items
are a few kB each. A level more costs four times the time (each layer's members in Python)."""

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


class TextObject(dict):
    """A JSON object decoded by :func:`loads`: a ``dict`` (compares, encodes and copies like one,
    a copy being a plain ``dict``) that also holds the text it was decoded from and, for each
    member, the span of its value there."""

    __slots__ = ("_text", "_spans")

    def __init__(self, text: str) -> None:
        super().__init__()
        self._text = text
        self._spans: dict[str, tuple[Any, int, int]] = {}

    def member_text(self, key: str) -> str | None:
        """The JSON text ``key``'s value was decoded from, while the member is still that value
        (the same object); ``None`` for a member added or replaced since, or missing."""
        span = self._spans.get(key)
        if span is None or key not in self or self[key] is not span[0]:
            return None
        return self._text[span[1]:span[2]]

    def _add(self, key: str, value: Any, start: int, end: int) -> None:
        self[key] = value
        self._spans[key] = (value, start, end)


def loads(text: str, levels: int) -> Any:
    """The value of the JSON document ``text``, as ``json.loads(text)`` decodes it, the containers
    of the outer ``levels`` (0: none; 1: the document's own) decoded in Python, their objects as
    :class:`TextObject`, and each value below them with one call of the C decoder.

    Raises:
        ValueError: ``text`` is not one JSON document (a ``json.JSONDecodeError``, as from
            ``json.loads``).
    """
    value, end = _value(text, _skip(text, 0), levels)
    end = _skip(text, end)
    if end != len(text):
        raise JSONDecodeError("Extra data", text, end)
    return value


def dumps(value: Any) -> str:
    """Compact JSON text of ``value`` (``separators=(",", ":")``); a :class:`TextObject`'s members
    copied from the text they were read from where they are unchanged (see the module's docstring),
    the rest encoded by ``json.dumps``."""
    if not isinstance(value, TextObject) or not all(isinstance(key, str) for key in value):
        return json.dumps(value, separators=(",", ":"))
    parts = []
    for key, item in value.items():
        text = value.member_text(key)
        parts.append(f"{json.dumps(key)}:{dumps(item) if text is None else text}")
    return "{" + ",".join(parts) + "}"


def _skip(text: str, index: int) -> int:
    return _SPACE.match(text, index).end()  # type: ignore[union-attr] - the pattern matches anywhere


def _value(text: str, index: int, levels: int) -> tuple[Any, int]:
    """The value starting at ``index`` and the index after it."""
    opening = text[index:index + 1]
    if levels > 0 and opening == "{":
        return _object(text, index + 1, levels - 1)
    if levels > 0 and opening == "[":
        return _array(text, index + 1, levels - 1)
    return _DECODER.raw_decode(text, index)


def _object(text: str, index: int, levels: int) -> tuple[TextObject, int]:
    found = TextObject(text)
    index = _skip(text, index)
    if text[index:index + 1] == "}":
        return found, index + 1
    while True:
        if text[index:index + 1] != '"':
            raise JSONDecodeError("Expecting property name enclosed in double quotes", text, index)
        key, index = scanstring(text, index + 1, True)
        index = _skip(text, index)
        if text[index:index + 1] != ":":
            raise JSONDecodeError("Expecting ':' delimiter", text, index)
        start = _skip(text, index + 1)
        item, index = _value(text, start, levels)
        found._add(key, item, start, index)
        index, ended = _next_member(text, index, "}")
        if ended:
            return found, index


def _array(text: str, index: int, levels: int) -> tuple[list, int]:
    found: list = []
    index = _skip(text, index)
    if text[index:index + 1] == "]":
        return found, index + 1
    while True:
        item, index = _value(text, index, levels)
        found.append(item)
        index, ended = _next_member(text, index, "]")
        if ended:
            return found, index


def _next_member(text: str, index: int, closing: str) -> tuple[int, bool]:
    """After a member of an object or array: past the ``,`` to the next member (``False``), or
    past ``closing`` (``True``).

    Raises:
        JSONDecodeError: neither follows, as ``json.loads`` says it.
    """
    index = _skip(text, index)
    separator = text[index:index + 1]
    if separator == closing:
        return index + 1, True
    if separator != ",":
        raise JSONDecodeError("Expecting ',' delimiter", text, index)
    return _skip(text, index + 1), False

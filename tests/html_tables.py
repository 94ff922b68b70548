"""The tables of an HTML report page as cell texts, for tests that compare the page's numbers with
what an editor showed."""

from __future__ import annotations

import re
from html.parser import HTMLParser

__all__ = ["page_tables", "exact"]


class _Tables(HTMLParser):
    """The rows (cell texts) of every table of a page, by the table's class."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._table: list[list[str]] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._table = self.tables.setdefault(dict(attrs).get("class") or "", [])
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self._table[-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def page_tables(html: str) -> dict[str, list[list[str]]]:
    """Every table of ``html`` by its class: a list of rows (the header row first), each a list of
    cell texts."""
    parser = _Tables()
    parser.feed(html)
    return parser.tables


def exact(cell: str) -> tuple[bool, int]:
    """A page cell's number in full: ``"≥ 105,047 FLOPs partial"`` → (lower bound, 105047)."""
    found = re.match(r"(≥ )?([\d,]+) ", cell)
    assert found, cell
    return bool(found[1]), int(found[2].replace(",", ""))

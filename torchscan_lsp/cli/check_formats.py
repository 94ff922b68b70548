"""The outputs of ``check``: text for terminals, GitHub workflow commands, and SARIF 2.1.0.

* ``text``: ``FILE:LINE:COL: SEVERITY: MESSAGE`` (``FILE:cell N:LINE:COL`` in a notebook), severity
  ``error``, ``warning``, ``info`` or ``hint`` (an inlay hint's label);
* ``github``: one workflow command per diagnostic, ``::warning file=F,line=L,col=C,title=T::MESSAGE``
  (``error``, ``warning``, ``notice`` for information), escaped as the runner's toolkit escapes
  them (``%``, ``\\r``, ``\\n`` in a message; also ``:`` and ``,`` in a property), so that the
  Actions log and a pull request's files show each one on its line; hints are left out;
* ``sarif``: one SARIF 2.1.0 log (OASIS Static Analysis Results Interchange Format) for code
  scanning: a run of the tool ``torchscan-lsp`` with one rule per diagnostic code, one result
  per diagnostic (levels ``error``, ``warning``, ``note``), each located by its file relative to
  ``%SRCROOT%`` (the workspace root) and its 1-based line and column; hints are left out.

In both file-based formats a notebook's entry is at the notebook's first line, its message starting
with the cell and line (``cell 3:12: ...``): the lines of a notebook file are JSON, not cells.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, NamedTuple

from torchscan_lsp.version import package_version

__all__ = ["FORMATS", "Entry", "text_lines", "github_lines", "sarif_log", "SARIF_SCHEMA"]

FORMATS = ("text", "github", "sarif")

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
"""The ``$schema`` a SARIF 2.1.0 log names (the OASIS schema's own ``id``)."""

_GITHUB = {"error": "error", "warning": "warning", "info": "notice"}
_SARIF = {"error": "error", "warning": "warning", "info": "note"}


class Entry(NamedTuple):
    """One line of ``check``'s output.

    Attributes:
        shown: the file as the text output names it (relative to the current folder).
        rel: the file relative to the command's workspace root, with ``/`` separators (SARIF's and
            GitHub's); its absolute path when it lies outside (a path given outside the root).
        line: 1-based line.
        column: 1-based column (an inlay hint's position is the end of its line).
        severity: ``error``, ``warning``, ``info`` or ``hint``.
        message: what is said (a hint's label).
        code: the diagnostic's code (``budget-exceeded``, ``uncounted_operator``...), ``hint`` for a hint.
        cell: in a notebook, the cell (numbered from 1 among all cells) whose ``line`` it is; else ``None``.
    """

    shown: str
    rel: str
    line: int
    column: int
    severity: str
    message: str
    code: str
    cell: int | None = None

    @property
    def place(self) -> str:
        """``FILE:LINE:COL``, or ``FILE:cell N:LINE:COL`` in a notebook."""
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.shown}:{cell}{self.line}:{self.column}"

    def located(self) -> tuple[int, int, str]:
        """The line, column and message a file-based format gives: a notebook's JSON has no lines
        of cells, so a cell's entry is at the file's first line and its message starts with the
        cell and line (``cell 3:12: ...``)."""
        if self.cell is None:
            return self.line, self.column, self.message
        return 1, 1, f"cell {self.cell}:{self.line}: {self.message}"


def text_lines(entries: Iterable[Entry]) -> list[str]:
    """``FILE:LINE:COL: SEVERITY: MESSAGE`` per entry."""
    return [f"{e.place}: {e.severity}: {e.message}" for e in entries]


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_lines(entries: Iterable[Entry]) -> list[str]:
    """One GitHub Actions workflow command per diagnostic (hints left out)."""
    out = []
    for e in entries:
        if e.severity not in _GITHUB:
            continue
        line, column, message = e.located()
        properties = ",".join(f"{name}={_escape_property(str(value))}" for name, value in (
            ("file", e.rel), ("line", line), ("col", column), ("title", f"torchscan {e.code}")))
        out.append(f"::{_GITHUB[e.severity]} {properties}::{_escape_data(message)}")
    return out


def sarif_log(entries: Iterable[Entry], root: Path) -> dict:
    """The SARIF 2.1.0 log of the diagnostics (hints left out), paths relative to ``root``."""
    results, rules = [], {}
    for e in entries:
        if e.severity not in _SARIF:
            continue
        rules.setdefault(e.code, {"id": e.code, "shortDescription": {"text": f"torchscan-lsp: {e.code}"}})
        line, column, message = e.located()
        results.append({
            "ruleId": e.code,
            "level": _SARIF[e.severity],
            "message": {"text": message},
            "locations": [{"physicalLocation": {
                "artifactLocation": _artifact(e.rel),
                "region": {"startLine": max(1, line), "startColumn": max(1, column)}}}],
        })
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "torchscan-lsp", "version": package_version(),
                                "rules": list(rules.values())}},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": root.resolve().as_uri() + "/"}},
            "results": results,
        }],
    }


def _artifact(rel: str) -> dict:
    """SARIF's ``artifactLocation`` of a file: relative to ``%SRCROOT%``, or, outside the root, its
    own ``file:`` URI (an absolute URI takes no base)."""
    if Path(rel).is_absolute():
        return {"uri": Path(rel).as_uri()}
    return {"uri": rel, "uriBaseId": "%SRCROOT%"}


def sarif_text(entries: Iterable[Entry], root: Path) -> str:
    """:func:`sarif_log` as indented JSON."""
    return json.dumps(sarif_log(entries, root), indent=2)

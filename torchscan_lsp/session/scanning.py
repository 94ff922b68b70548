"""Scanning a document for targets: ``ast`` only, never executed, on every change.

A broken edit (a syntax error, say) keeps the targets it hid, moved to where their lines went, so
their last good results stay on screen (marked stale) until the edit is fixed.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from torchscan_lsp.session.line_map import LineMap
from torchscan_lsp.session.state import Document

__all__ = ["MAX_SCAN_CHARS", "ScanFailure", "rescan"]

log = logging.getLogger(__name__)

MAX_SCAN_CHARS = 5_000_000
"""Longer files are neither scanned nor analysed: scanning runs on the event loop (about a second per
10 MB), and no model definition is that long (generated data is)."""


class ScanFailure:
    """A problem of a whole file (line 1, whole line): a scanner that raised, a file too long."""

    def __init__(self, message: str, severity: str = "error") -> None:
        self.line, self.column, self.end_column, self.message, self.severity = 1, 0, None, message, severity


def _scan(text: str, path: str) -> tuple[list[Any], list[Any], list[str]]:
    """Targets, problems and imports of ``text`` (see :func:`torchscan_lsp.targets.find_targets`)."""
    from torchscan_lsp.targets import find_targets

    if len(text) > MAX_SCAN_CHARS:
        return [], [ScanFailure(f"torchscan skips files over {MAX_SCAN_CHARS / 1e6:g} million characters (this one "
                                f"has {len(text) / 1e6:.1f} million): its targets are not analysed", "warning")], []
    scan = find_targets(text, path)
    return list(scan.targets), list(scan.problems), list(scan.imports)


def _is_error(problem: Any) -> bool:
    return str(getattr(problem, "severity", "error")).lower().endswith("error")


def _follow(target: Any, moved: LineMap) -> Any:
    """``target`` moved to where its lines went in the current text (unchanged when its ``def`` or
    ``class`` line itself was edited: there is no better place for its last good results)."""
    line = moved.to_current(target.line)
    if line is None or line == target.line:
        return target
    annotation = moved.to_current(target.annotation_line)
    return dataclasses.replace(target, line=line, annotation_line=annotation if annotation is not None else line)


def rescan(document: Document) -> set[str]:
    """Scan ``document``'s text: set its ``targets``, ``problems``, ``retained``, ``scanned_text``
    and (when it parsed) ``imports``; return the names of the targets kept from before a broken edit."""
    try:
        targets, problems, imports = _scan(document.text, document.path)
    except Exception as error:  # a scanner bug must not take the server down
        log.exception("target scan failed for %s", document.path)
        targets, problems, imports = [], [ScanFailure(f"torchscan could not scan this file: {error}")], []
    if document.program is not None:  # a notebook's left-out IPython lines, said where they are
        problems += document.program.notices
    if imports or targets:
        document.imports = imports
    retained: set[str] = set()
    if any(_is_error(p) for p in problems):
        names = {t.name for t in targets}
        moved = LineMap(document.scanned_text.splitlines(), document.lines)
        kept = [_follow(t, moved) for t in document.targets if t.name not in names]
        retained = {t.name for t in kept}
        targets += kept
    document.targets, document.problems, document.retained = targets, problems, retained
    document.scanned_text = document.text
    return retained

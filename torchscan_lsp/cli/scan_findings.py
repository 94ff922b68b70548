"""``scan``'s diagnostics list: the editor's folded findings (:mod:`torchscan_lsp.session.findings`),
the headline method's first.

The list reads as the editor warns: first what makes a number of the headline method
(``torchscan.headline``, the dispatched operators by default) or the parameters a lower bound, then
what the other method misses, each cause once with the number of layers it stands for
(``×12 layers``). Receptive-field notes only when asked for (``--receptive-field-notes``, as the
editor's ``torchscan.receptiveFieldNotes``). Each line names the file and line it is about.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from torchscan_lsp.session.findings import Finding, every_finding
from torchscan_lsp.session.headline import method, other
from torchscan_lsp.session.state import TargetState

__all__ = ["diagnostic_lines"]

_OTHER_CODES = frozenset({"partial-totals", "packed_parameters", "uninitialized_parameters"})
"""Findings the other method's part leaves out: its target note (those totals are not the ones
shown first) and the parameters' (told in the first part already)."""


def _rank(found: Finding) -> int:
    return 0 if found.severity != "information" else 1 if found.code == "partial-totals" else 2


def _line(root: str, name: str, found: Finding, display: Callable[[Path], str], severity: str | None = None) -> str:
    return f"  {display(Path(root, name))}:{found.line}: {severity or found.severity}: {found.message}"


def diagnostic_lines(state: TargetState, headline: str, display: Callable[[Path], str], *,
                     receptive_field_notes: bool = False) -> list[str]:
    """The diagnostics part of ``state``'s table: a heading and one line per folded finding of the
    headline method, then of the other method (``display``: a path as ``scan`` prints it). Empty
    when neither method misses anything."""
    if state.view is None:
        return []
    shown, rest = method(headline), other(headline)
    # what makes a shown number a lower bound first, then the target's note, then the notes
    first = sorted(every_finding(state, shown.name, receptive_field_notes=receptive_field_notes),
                   key=lambda entry: _rank(entry[1]))
    told = {found.message for _, found in first}
    second = [(name, found) for name, found in every_finding(state, rest.name)
              if found.code not in _OTHER_CODES and found.message not in told]
    lines = []
    root = state.key.root
    if first:
        lines.append(f"Diagnostics of the {shown.title} (the headline) and the parameters ({len(first)}):")
        lines += [_line(root, name, found, display) for name, found in first]
    if second:
        lines.append(f"Also missed by the {rest.title} ({len(second)}):")
        # the editor does not warn about them: detail, as in its hover
        lines += [_line(root, name, found, display, "note") for name, found in second]
    if lines:
        lines.append("  (--format json lists each report diagnostic in full)")
    return lines

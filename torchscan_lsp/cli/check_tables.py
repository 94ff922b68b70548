"""``check --compare-with REF``: each target's diff table against its baseline, as plain text.

The same rows as the hover's (:mod:`torchscan_lsp.server.comparison_card`: outermost added and
removed calls, innermost changed ones, largest FLOP change first), every one of them, in aligned
columns under a line that names the target, the baseline and what changed in total, or the one
line that says why a target has no delta.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from torchscan_lsp.server.comparison_card import HEADERS, row_cells, summary_text
from torchscan_lsp.session.headline import DEFAULT_HEADLINE, method

__all__ = ["comparison_tables"]


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return ["  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]


def comparison_tables(session: Any, display: Callable[[Path], str], headline: str = DEFAULT_HEADLINE) -> list[str]:
    """The lines of every target's comparison in ``session``, targets in file and line order;
    ``display`` names a file as the output does."""
    shown = method(headline)
    out = []
    for state in sorted(session.store.targets.values(), key=lambda s: (s.key.file, s.line)):
        comparison = state.comparison
        where = f"{display(Path(state.key.root, state.key.file))}:{state.line}: {state.key.name}"
        if state.view is None or comparison is None:
            continue
        if not comparison.ready:
            out.append(f"{where}: no delta against {comparison.label}: {comparison.note}")
            continue
        out.append(f"{where}: {summary_text(comparison, headline)} {comparison.since}")
        rows = comparison.layer_rows(shown.flops)
        if rows:
            out += _aligned([list(HEADERS)] + [row_cells(row, "") for row in rows])
    return out

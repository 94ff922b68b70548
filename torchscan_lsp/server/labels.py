"""The editor's own compositions of formatted numbers: the totals line and the shape hint.

Every number goes through :mod:`torchscan_lsp.contract.format`, the formatter the summary table,
the HTML report and ``scan`` use too (``≥`` for a lower bound, ``?`` for a number not measured).
"""

from __future__ import annotations

from typing import Any, Mapping

from torchscan_lsp.contract import format as fmt

SHAPE_LIMIT = 40
"""Characters of a shape hint before it is cut with ``…``."""


def totals_label(totals: Mapping[str, Mapping[str, Any]]) -> str:
    """The one-line summary of a report's totals: ``"11.7M params · 1.82 GMACs · 3.64 GFLOPs"``.

    FLOPs are the module-formula FLOPs (the same method as the MACs); operator FLOPs, counted by
    another method, are shown beside them in hovers, never merged into this line.
    """
    return fmt.SEPARATOR.join(
        [
            fmt.metric_text(totals.get("parameters"), "params"),
            fmt.metric_text(totals.get("macs"), "MACs"),
            fmt.metric_text(totals.get("module_flops"), "FLOPs"),
        ]
    )


def shape_label(meta: Mapping[str, Any] | None) -> str:
    """The inlay-hint text for a call's output: ``"→ (1, 64, 56, 56)"``."""
    return fmt.ARROW + fmt.shape_text(meta, limit=SHAPE_LIMIT)


HOVER_SHAPE_LIMIT = 60
"""Characters of a shape in a hover or tooltip before it is cut with ``…``."""


def shape(meta: Mapping[str, Any] | None) -> str:
    """A value's shape as hovers and tooltips show it: ``(1, 64, 56, 56)``."""
    return fmt.shape_text(meta, limit=HOVER_SHAPE_LIMIT)

"""The source map's operator entries gathered by source line, for :class:`~torchscan_lsp.session.results.ResultView`."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Mapping

__all__ = ["Site", "operators_by_line"]

Site = tuple[str, int]
"""A file (workspace-relative with ``/`` separators, or absolute for a library file) and a 1-based line."""


def operators_by_line(entries: Iterable[Mapping[str, Any]]) -> dict[Site, list[dict]]:
    """Source-map operator entries by line, one per operator: a line that ran an operator in the
    calls of several modules (a helper they share) has their calls and FLOPs summed (FLOPs unknown
    when one entry's are)."""
    found: dict[Site, dict[str, dict]] = defaultdict(dict)
    for entry in entries:
        if not (entry.get("file") and entry.get("line")):
            continue
        merged = found[(entry["file"], int(entry["line"]))]
        into = merged.get(entry.get("operator"))
        if into is None:
            merged[entry.get("operator")] = {name: value for name, value in entry.items() if name not in ("module", "layer")}
            continue
        into["calls"] = into.get("calls", 0) + entry.get("calls", 0)
        both = (into.get("flops"), entry.get("flops"))
        into["flops"] = None if None in both else both[0] + both[1]
    return {site: list(merged.values()) for site, merged in found.items()}

"""The part of a target's hover that says what changed since its baseline: one line of totals, then
the per-layer table (added, removed and changed calls, their parameters, the headline method's
FLOPs and their output shapes), built from ``compare_reports``' diff
(:meth:`~torchscan_lsp.session.deltas.Comparison.layer_rows`); or the one line that says why there
is no delta. Markdown, from the target state alone."""

from __future__ import annotations

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.server import labels
from torchscan_lsp.session.deltas import Change, Comparison, LayerRow
from torchscan_lsp.session.headline import DEFAULT_HEADLINE, method

__all__ = ["MAX_ROWS", "comparison_card", "layer_table", "row_cells", "summary_text", "HEADERS"]

HEADERS = ("layer", "type", "change", "parameters", "FLOPs", "output")
"""The columns of the per-layer table."""

MAX_ROWS = 10
"""Layer rows a hover shows; the rest are counted, and the full diff is behind the code lens."""


def summary_text(comparison: Comparison, headline: str = DEFAULT_HEADLINE, *, macs: bool = False) -> str:
    """``"+112 params · +50 % FLOPs"``: the parameters and the headline method's FLOPs (and, with
    ``macs``, its MACs), those that changed since the baseline, or the calls added and removed,
    else ``"no change"``."""
    shown = method(headline)
    parts = []
    rows = [("parameters", "params", False), (shown.macs, "MACs", True), (shown.flops, "FLOPs", True)]
    for name, unit, relative in rows if macs else (rows[0], rows[2]):
        text = labels.change_text(comparison.total(name), relative)
        if text:
            parts.append(f"{text} {unit}")
    layers = comparison.diff["layers"] if comparison.diff else {}
    if not parts and (layers.get("added") or layers.get("removed")):
        parts.append(f"{len(layers['added'])} calls added, {len(layers['removed'])} removed")
    return fmt.SEPARATOR.join(parts) or "no change"


def _count(value: float | None, unit: str, known: bool) -> str:
    if value is None:
        return "—"
    text = fmt.number(value, unit)
    return fmt.LOWER_BOUND + text if known else text


def _cell(change: Change, unit: str, relative: bool) -> str:
    if change.before is None or change.after is None:
        return _count(change.after if change.before is None else change.before, unit, change.known)
    if not change.changed:
        return _count(change.after, unit, change.known)
    shown = labels.change_text(change, relative)
    return f"{_count(change.before, unit, change.known)} → {_count(change.after, unit, change.known)} ({shown})"


def _shapes(row: LayerRow) -> str:
    before, after = (labels.shape(meta) if meta is not None else None for meta in row.shapes)
    if before is None or after is None:
        return before or after or "—"
    return after if before == after else f"{before} → {after}"


def row_cells(row: LayerRow, quote: str = "`") -> list[str]:
    """The cells of one row of the per-layer table (:data:`HEADERS`), the path quoted with ``quote``."""
    name = fmt.layer_name(row.path, quote) + (f" (call {row.call_index})" if row.call_index else "")
    kind = row.kind + (f", with {row.folded} below" if row.folded else "")
    return [name, row.type, kind, _cell(row.params, "", False), _cell(row.flops, "FLOPs", True), _shapes(row)]


def comparison_card(comparison: Comparison | None, headline: str = DEFAULT_HEADLINE) -> str:
    """Markdown of what changed since the baseline (``""`` without a comparison: ``compare_with="off"``)."""
    if comparison is None:
        return ""
    if comparison.pending:
        return f"**Deltas {comparison.since}**: the baseline is being analysed…"
    if not comparison.ready:
        return f"No delta against {comparison.label}: {comparison.note}."
    shown = method(headline)
    if comparison.unchanged(shown.flops, shown.macs):
        return f"**No change {comparison.since}**."
    parts = [f"**Changes {comparison.since}**: {summary_text(comparison, headline, macs=True)}"]
    rows = comparison.layer_rows(shown.flops)
    if rows:
        table = ["| " + " | ".join(HEADERS) + " |", "| --- | --- | --- | --- | --- | --- |"]
        table += ["| " + " | ".join(row_cells(row)) + " |" for row in rows[:MAX_ROWS]]
        if len(rows) > MAX_ROWS:
            table.append(f"| … {len(rows) - MAX_ROWS} more | | | | | |")
        parts.append("\n".join(table) + f"\n\nFLOPs of the {shown.title}; **Compare with {comparison.label}** "
                                       "shows every change.")
    mismatches = (comparison.diff or {}).get("mismatches") or []
    if mismatches:
        named = ", ".join(f"{m['field']} {m['before']} → {m['after']}" for m in mismatches)
        parts.append(f"The two reports were written by different versions ({named}): numbers may differ for "
                     "that reason alone.")
    return "\n\n".join(parts)


def layer_table(comparison: Comparison, headline: str = DEFAULT_HEADLINE) -> dict[str, object]:
    """Every row of the per-layer table, as plain text cells, for the full diff page
    (``{"headers": [...], "rows": [[...], ...], "note": "..."}``): the hover's table without its
    :data:`MAX_ROWS` cut."""
    shown = method(headline)
    return {"headers": list(HEADERS), "rows": [row_cells(row, quote="") for row in comparison.layer_rows(shown.flops)],
            "note": f"FLOPs of the {shown.title}."}

"""The hover's training plan: one compact row per policy (largest batch, the peak there and its
largest category), from the target's last plan (:mod:`torchscan_lsp.session.planning`). Markdown,
built from the state alone (no I/O); the full plan -- fits, FLOPs, communication -- is in
``scan --plan``, the JSON and the HTML report."""

from __future__ import annotations

from torchscan_lsp.session.plan_summary import plan_summary
from torchscan_lsp.session.planning import plan_report
from torchscan_lsp.session.state import TargetState

__all__ = ["plan_card"]


def plan_card(state: TargetState) -> str:
    """Markdown of ``state``'s plan; ``""`` without one (a note while the first one runs)."""
    report = plan_report(state)
    if report is None:
        return "**Training plan**: planning…" if state.planning else ""
    summary = plan_summary(report)
    marks = []
    if state.plan_hash is not None and state.analysed_hash is not None and state.plan_hash != state.analysed_hash:
        marks.append("stale: planned before the last change")
    if state.planning:
        marks.append("updating…")
    heading = f"**Training plan**: budget {summary.budget}, held against the {summary.compared}" + (
        f" ({'; '.join(marks)})" if marks else "")
    sequence = any(row.sequence is not None for row in summary.rows)
    header = "| policy | max batch |" + (" max length at batch 1 |" if sequence else "") + " peak | largest |"
    rows = [header, "| --- | --- |" + (" --- |" if sequence else "") + " --- | --- |"]
    for row in summary.rows:
        rows.append(f"| {row.policy} | {row.batch} |" + (f" {row.sequence or '—'} |" if sequence else "")
                    + f" {row.peak} | {row.largest} |")
    parts = [heading, "\n".join(rows)]
    parts += [f"_{row.policy}_: {row.reason}" for row in summary.rows if row.reason]
    parts += summary.notes
    parts.append("_Methods: " + "; ".join(f"`{method}`" for method in summary.methods) + "._")
    return "\n\n".join(parts)

"""``scan``'s training plan: the table of policies, then each policy's fits, FLOPs and communication
(:func:`~torchscan_lsp.session.plan_summary.plan_summary`, the rows the hover shows too)."""

from __future__ import annotations

from typing import Any

from torchscan_lsp.session.plan_summary import plan_summary

__all__ = ["plan_lines"]


def plan_lines(report: dict[str, Any]) -> list[str]:
    """A ``plan_training`` report as text."""
    summary = plan_summary(report)
    sequence = any(row.sequence is not None for row in summary.rows)
    # a sharded policy's FLOPs are one rank's, at its own batch: the column says per device
    columns = ["policy", "max batch", *(["max length at batch 1"] if sequence else []), "peak", "largest",
               "FLOPs/step per device"]
    cells = [[row.policy, row.batch, *([row.sequence or "—"] if sequence else []), row.peak, row.largest, row.flops]
             for row in summary.rows]
    widths = [max(len(column), *(len(r[i]) for r in cells)) for i, column in enumerate(columns)]

    def line(values: list[str]) -> str:
        return "  " + "  ".join(v.ljust(w) if i in (0, len(values) - 3, len(values) - 2) else v.rjust(w)
                                for i, (v, w) in enumerate(zip(values, widths))).rstrip()

    lines = [f"Training plan: budget {summary.budget}, held against the {summary.compared}", line(columns)]
    lines += [line(r) for r in cells]
    for row in summary.rows:
        details = ([f"why: {row.reason}"] if row.reason else []) + row.fits
        if row.global_batch:
            details.append(f"global batch {row.global_batch}")
        if row.communication:
            details.append(f"communication per step and rank: {row.communication}")
        if details:
            lines.append(f"  {row.policy}:")
            lines += [f"    {detail}" for detail in details]
    lines += [f"  {note}" for note in summary.notes]
    lines.append("  Methods: " + "; ".join(summary.methods))
    return lines

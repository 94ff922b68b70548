"""A training plan (``plan_training``'s report), read once for every front end.

:func:`plan_summary` turns the report into the rows a hover card, ``scan`` and the HTML page show,
one per policy: its largest batch (and sequence length), the peak there and its largest category,
the training FLOPs per step, the status and the method; a policy that does not fit even at batch 1
shows its smallest peak, one the model cannot run or whose estimate failed shows why. Only the
wording differs between front ends; the numbers and their order come from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from torchscan_lsp.contract import format as fmt

__all__ = ["PlanRow", "PlanSummary", "axis_text", "plan_summary"]

_LIMITS = {"ceiling": "the search's ceiling", "estimates": "the estimates ran out", "model": "the model's limit"}


@dataclass
class PlanRow:
    """One policy, every number formatted.

    Attributes:
        policy: the policy's name (``bfloat16-mixed · adamw · checkpointed · fsdp×8``).
        batch, sequence: the largest batch and sequence length (``"37"``, ``"≥ 65,536"``,
            ``"none fits"``, ``"—"``), :func:`axis_text`.
        peak: the peak at that size (``"79.2 GiB in the backward"``), or at batch 1 when none fits.
        largest: its largest category (``"activations 61.0 GiB"``).
        flops: the training FLOPs per step at that size.
        status: the policy's status; ``reason`` why it has no number or only a bound.
        global_batch: for a sharded policy, the batch over every rank (``"37 × 8 = 296"``).
        communication: bytes per step of each collective (``"all-gather 1.2 GiB, reduce-scatter 2.5 GiB"``).
        fits: the fitted curves in words, and their errors on a size they were not fitted on.
    """

    policy: str
    batch: str
    sequence: str | None
    peak: str
    largest: str
    flops: str
    status: str
    reason: str | None = None
    global_batch: str | None = None
    communication: str | None = None
    fits: list[str] = field(default_factory=list)


@dataclass
class PlanSummary:
    """What a front end shows of a plan.

    Attributes:
        budget: ``"24.0 GiB per device (RTX-4090, from train_memory)"``.
        compared: what is held against it (``CUDA allocated peak (derived)``).
        rows: one :class:`PlanRow` per policy, in the report's order.
        notes: one sentence each: nothing fits, how many estimates it took and what confirms the
            answers.
        methods: the distinct method labels of the rows.
    """

    budget: str
    compared: str
    rows: list[PlanRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)


def axis_text(record: Mapping[str, Any] | None) -> str:
    """The largest size of an axis record: the number, ``≥ N`` for a bound, ``none fits``."""
    if not record:
        return "—"
    metric = record.get("largest") or {}
    if metric.get("status") == "unavailable":
        return "?"
    if record.get("limit") == "does_not_fit":
        return "none fits"
    value = f"{metric.get('known_value'):,}"
    return value if metric.get("status") == "complete" else fmt.LOWER_BOUND + value


def _category(entry: Mapping[str, Any] | None) -> str:
    if not entry:
        return "—"
    return f"{str(entry['category']).replace('_', ' ')} {fmt.byte_size(entry['bytes'])}"


def _communication(sharding: Mapping[str, Any] | None) -> str | None:
    volume = (sharding or {}).get("communication") or {}
    parts = [f"{name.removesuffix('_bytes').replace('_', '-')} {fmt.byte_size(size)}"
             for name, size in volume.items() if size]
    return ", ".join(parts) or None


def _fits(record: Mapping[str, Any] | None, axis: str) -> list[str]:
    fit = (record or {}).get("fit") or {}
    lines = [f"{axis}: {text}" for text in fit.get("texts") or []]
    for name, check in (fit.get("held_out") or {}).items():
        lines.append(f"{axis}: the {name} fit at {check['size']:,} (not fitted on): {100.0 * check['relative_error']:+.2f} %")
    return lines


def _row(policy: Mapping[str, Any], sequence: bool) -> PlanRow:
    name = policy["policy"]["name"]
    batch = policy.get("batch")
    if policy.get("status") in ("unavailable", "not_applicable") and not batch:
        return PlanRow(name, "—", "—" if sequence else None, "—", "—", "—", policy["status"], policy.get("reason"))
    point = (batch or {}).get("at_largest") or (batch or {}).get("smallest") or {}
    peak = fmt.byte_size(point["peak_bytes"]) if point else "—"
    if point and point.get("peak_phase"):
        peak += f" in the {point['peak_phase'].replace('_', ' ')}"
    if batch and batch.get("limit") == "does_not_fit":
        peak += " at batch 1"
    reason = policy.get("reason") or (batch or {}).get("reason")
    if batch and batch.get("limit") in _LIMITS and not reason:
        reason = f"a lower bound: {_LIMITS[batch['limit']]}"
    sharding = policy.get("sharding") or None
    largest = ((batch or {}).get("largest") or {}).get("known_value")
    global_batch = (f"{largest} × {sharding['ranks']} = {largest * sharding['ranks']:,}"
                    if sharding and largest else None)
    return PlanRow(name, axis_text(batch), axis_text(policy.get("sequence")) if sequence else None,
                   peak, _category((batch or {}).get("largest_category")),
                   fmt.metric_text((batch or {}).get("training_flops"), "FLOPs"), str(policy.get("status")), reason,
                   global_batch, _communication(sharding),
                   _fits(batch, "batch") + _fits(policy.get("sequence"), "sequence"))


def plan_summary(report: Mapping[str, Any]) -> PlanSummary:
    """The rows of ``report`` (a ``plan_training`` report) for a front end."""
    budget = report.get("budget") or {}
    where = {"plan": "from the plan's memory", "train_memory": "from train_memory",
             "default": "the default: set train_memory"}.get(budget.get("source"), "")
    device, written = budget.get("device"), str(budget.get("text") or "")
    # the name as written first ("H100-80GB"), with the table's name when it is another
    named = ("" if not device else f"{device}, " if written.lower() in ("", str(device).lower())
             else f"{written} = {device}, ")
    summary = PlanSummary(f"{fmt.byte_size(budget.get('bytes', 0))} per device ({named}{where})",
                          str(report.get("compared", "")))
    sequence = bool((report.get("options") or {}).get("sequence"))
    summary.rows = [_row(policy, sequence) for policy in report.get("policies") or []]
    summary.methods = list(dict.fromkeys(str(p.get("method")) for p in report.get("policies") or [] if p.get("method")))
    summary.notes = [str(d.get("message")) for d in report.get("diagnostics") or []]
    count = int(report.get("estimates", 0) or 0)
    note = f"{count:,} estimate{'' if count == 1 else 's'} on fake tensors in {report.get('elapsed_s', 0):.1f} s"
    confirmed = _confirmation(report.get("policies") or [])
    summary.notes.append(f"{note}; {confirmed}." if confirmed else f"{note}.")
    return summary


def _confirmation(policies: list[Mapping[str, Any]]) -> str | None:
    """What confirms the answers: an answer the budget bounds is confirmed by the estimate at it
    (which fits) and the one above it (which does not); a lower bound or the model's limit is not,
    and its row says why. ``None`` when no answer is confirmed (nothing fits, every answer a bound)."""
    answers = [record for policy in policies for record in (policy.get("batch"), policy.get("sequence"))
               if record and record.get("fits")]
    confirmed = [record for record in answers if record.get("limit") == "budget"
                 and (record.get("largest") or {}).get("status") == "complete"]
    if not confirmed:
        return None
    if len(confirmed) == len(answers):
        return "each answer confirmed by the estimates at it and one above it"
    return (f"the answers the budget bounds ({len(confirmed)} of {len(answers)}) confirmed by the estimates at them "
            "and one above them; the others say why")

"""A target's training-step report (``measurements["train"]``), read once for every front end.

:func:`training_summary` turns the engine's ``analyse_training_step`` report into the rows a hover
card, ``scan`` and ``check`` show: the parameters it trains (``trainable 88 of 300 parameters``:
a frozen backbone or LoRA's base weights get no gradient and no optimizer state), the step's FLOPs by phase, the peak memory by category from both
methods side by side (the estimate's categories first, then those only the measurement names), the
peak and its phase, the derived CUDA figures, the budget and whether the two methods agree. Only the
wording differs between front ends; the numbers and their order come from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.session.state import TargetState

__all__ = ["TrainingSummary", "training_report", "training_failure", "training_summary"]

FLOP_ROWS = (("forward", "forward_flops"), ("backward", "backward_flops"), ("training", "training_flops"))


def training_report(state: TargetState) -> dict | None:
    """The target's last training-step report, or ``None`` (never ran, or failed)."""
    report = state.measurements.get("train")
    return report if isinstance(report, dict) and report.get("kind") == "training_step" else None


def training_failure(state: TargetState) -> dict | None:
    """Why the target's last training measurement failed (``type``, ``message``, ``file``, ``line``)."""
    report = state.measurements.get("train")
    error = report.get("error") if isinstance(report, dict) else None
    return error if isinstance(error, dict) else None


@dataclass
class TrainingSummary:
    """What a front end shows of a training report; every number already formatted.

    Attributes:
        setup: the step in words (``adamw, batch 32, bfloat16 on cuda``).
        trainable: ``trainable 88 of 300 parameters`` (elements; a lower bound behind ``≥``), or
            ``""`` when no method ran the step.
        flops: ``(phase, text, status)`` for forward, backward and their sum.
        categories: ``(category, estimated text, measured text)``; ``—`` where a method has no
            such category.
        peaks: ``(method, text)``: each method's peak, with the phase (estimated) or the reason it
            is unavailable.
        notes: one sentence each: the derived CUDA figures, the budget, the agreement.
        over_budget: whether the estimate exceeds the budget.
    """

    setup: str
    trainable: str = ""
    flops: list[tuple[str, str, str]] = field(default_factory=list)
    categories: list[tuple[str, str, str]] = field(default_factory=list)
    peaks: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    over_budget: bool = False


def _setup(options: Mapping[str, Any], estimated: Mapping[str, Any]) -> str:
    parts = [str(options.get("optimizer", "?"))]
    if options.get("batch"):
        parts.append(f"batch {options['batch']}")
    if options.get("dtype"):
        parts.append(str(options["dtype"]))
    if options.get("autocast"):
        parts.append(f"autocast {options['autocast']}")
    if "foreach" in estimated:
        parts.append("foreach" if estimated["foreach"] else "for-loop")
    return ", ".join(parts) + f" on {options.get('device', '?')}"


def _trainable(parameters: Mapping[str, Any] | None) -> str:
    if not isinstance(parameters, Mapping) or not parameters.get("parameters"):
        return ""
    return (f"trainable {fmt.metric_text(parameters.get('trainable_parameters'), '')} of "
            f"{fmt.metric_text(parameters['parameters'], '')} parameters")


def _peak_text(method: Mapping[str, Any], phase: str | None) -> str:
    if (method.get("peak") or {}).get("status") != "complete":
        return f"unavailable: {method.get('reason', 'not run')}"
    text = fmt.byte_size(method["peak"]["value"])
    return text + (f" in the {phase.replace('_', ' ')}" if phase else "")


def _categories(estimated: Mapping[str, Any], measured: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    ours = estimated.get("by_category") if (estimated.get("peak") or {}).get("status") == "complete" else None
    theirs = measured.get("by_category") if (measured.get("peak") or {}).get("status") == "complete" else None
    names = list(ours or {}) + [name for name in theirs or {} if name not in (ours or {})]
    rows = []
    for name in names:
        left = (ours or {}).get(name)
        right = (theirs or {}).get(name)
        if not left and not right:
            continue  # nothing of it at either peak: no row
        rows.append((name.replace("_", " "), fmt.byte_size(left) if left is not None else "—",
                     fmt.byte_size(right) if right is not None else "—"))
    return rows


def _notes(memory: Mapping[str, Any]) -> list[str]:
    notes = []
    estimated = memory.get("estimated") or {}
    cuda = estimated.get("cuda")
    if isinstance(cuda, dict) and (estimated.get("peak") or {}).get("status") == "complete":
        # the derivation keeps the step's optimizer implementation: a CPU step's for-loop update
        # holds fewer temporaries than the foreach one PyTorch picks on CUDA (which a plan uses)
        loop = (" with this step's for-loop optimizer (PyTorch's default on CUDA, foreach, holds more "
                "temporaries while it updates: set train device \"cuda\", or see the plan)"
                if estimated.get("foreach") is False else "")
        notes.append(f"On a CUDA GPU (derived from the caching allocator's rules, not measured){loop}: "
                     f"{fmt.byte_size(cuda['allocated_peak_bytes'])} allocated, "
                     f"at least {fmt.byte_size(cuda['reserved_if_packed_bytes'])} reserved.")
    budget = memory.get("budget")
    if isinstance(budget, dict) and budget.get("fits") is not None:
        headroom = budget["headroom_bytes"]
        verdict = (f"fits, {fmt.byte_size(headroom)} to spare" if budget["fits"]
                   else f"over by {fmt.byte_size(-headroom)}")
        notes.append(f"Budget {fmt.byte_size(budget['bytes'])} ({budget['compared']}): {verdict}.")
    comparison = memory.get("comparison")
    if isinstance(comparison, dict):
        difference = comparison["difference_bytes"]
        relative = 100.0 * comparison["relative_difference"]
        if comparison["agree"]:
            notes.append(f"The two methods agree: measured − estimated = {difference:,} B ({relative:+.2f} %).")
        else:
            # the sign says which side is short: a measured peak above the estimate holds buffers
            # kernels allocate that fake tensors never see; one below it, memory the real step freed sooner
            why = ("kernels allocate buffers the estimate cannot see" if difference > 0
                   else "the real step needed less than the estimate, which errs on the safe side")
            notes.append(f"The two methods differ by {fmt.byte_size(abs(difference))} ({relative:+.1f} % of the "
                         f"measured peak): {why} (docs/measurement.md).")
    return notes


def training_summary(report: Mapping[str, Any]) -> TrainingSummary:
    """The rows of ``report`` (an ``analyse_training_step`` report) for a front end."""
    memory = report.get("memory") or {}
    estimated, measured = memory.get("estimated") or {}, memory.get("measured") or {}
    summary = TrainingSummary(_setup(report.get("options") or {}, estimated), _trainable(report.get("parameters")))
    totals = (report.get("flops") or {}).get("totals") or {}
    for label, key in FLOP_ROWS:
        metric = totals.get(key)
        if metric:
            summary.flops.append((label, fmt.metric_text(metric, "FLOPs"), str(metric.get("status"))))
    summary.categories = _categories(estimated, measured)
    summary.peaks = [("estimated", _peak_text(estimated, estimated.get("peak_phase"))),
                     ("measured", _peak_text(measured, None))]
    summary.notes = _notes(memory)
    budget = memory.get("budget")
    summary.over_budget = isinstance(budget, dict) and budget.get("fits") is False
    return summary


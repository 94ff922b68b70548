"""A target's results held against its ``budget`` and ``max_increase`` (docs/annotations.md, "Budgets").

Each limit gives at most one finding on the target line, in the words every front end shows:

* a number over its limit — complete, or a lower bound already over it — is a **warning**
  (code :data:`EXCEEDED`) naming the metric, its value, the limit, by how much, and the layers
  that contribute most (the largest leaf calls; the largest per-layer latencies once measured);
* a lower bound under its limit is an **information** that the budget cannot be confirmed, and
  why (what was not counted);
* a metric that was not measured (``peak_memory`` without ``measure=["memory"]``, ``latency``
  without ``measure=["latency"]``) or a growth limit without a baseline is an **information**
  saying how to get the number;
* ``train_memory`` is the training step's memory budget (``train_memory``): its warning is the
  training report's own (``training_memory_over_budget``), so only an estimate that did not run is
  said here.

The counts are those the hints show: the parameters and the headline method's FLOPs and MACs
(``torchscan.headline``), with the method named.
"""

from __future__ import annotations

from typing import Any, Mapping

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.contract.budget import Amount, parse_budget, parse_max_increase
from torchscan_lsp.contract.metrics import is_lower_bound, metric_result, metric_value
from torchscan_lsp.session.deltas import Change, Comparison
from torchscan_lsp.session.findings import Finding
from torchscan_lsp.session.headline import Method, method
from torchscan_lsp.session.measurements import model_latency, model_memory
from torchscan_lsp.session.state import TargetState

__all__ = ["EXCEEDED", "INCREASE_EXCEEDED", "OVER_BUDGET_CODES", "UNKNOWN_BASELINE", "budget_findings"]

EXCEEDED = "budget-exceeded"
INCREASE_EXCEEDED = "max-increase-exceeded"
UNKNOWN_BASELINE = "baseline-unknown"
"""A ``max_increase`` whose ``compare_with`` names no commit of the repository."""
OVER_BUDGET_CODES = frozenset({EXCEEDED, INCREASE_EXCEEDED, UNKNOWN_BASELINE, "training_memory_over_budget"})
"""Diagnostic codes of a limit that is broken, or that can never be checked (a misspelt
``compare_with``): ``check`` exits 1 on any of them."""

_TOP = 3
_HOW = {"peak_memory": 'peak memory was not measured: add measure=["memory"] to the target, or run Measure memory',
        "latency": 'latency was not measured: add measure=["latency"] to the target, or run Measure latency'}


def _text(value: float, key: str) -> str:
    unit = {"params": "params", "flops": "FLOPs", "macs": "MACs", "peak_memory": "bytes", "latency": "seconds",
            "train_memory": "bytes"}[key]
    if unit == "bytes":
        return fmt.byte_size(value)
    if unit == "seconds":
        return fmt.duration(value)
    return fmt.params(value) if unit == "params" else fmt.number(value, unit)


def _metric(state: TargetState, key: str, shown: Method) -> tuple[Mapping[str, Any] | None, str]:
    """The metric ``key`` limits, and how it was obtained (for the message)."""
    totals = state.view.totals
    if key == "params":
        return totals.get("parameters"), ""
    if key in ("flops", "macs"):
        return totals.get(shown.flops if key == "flops" else shown.macs), f" ({shown.title})"
    if key == "latency":
        return model_latency(state), " (measured)"
    memory = model_memory(state)
    if memory is None:
        return None, ""
    return metric_result(status="complete", value=memory["delta_bytes"], unit="bytes", scope="forward",
                         method=str(memory.get("metric", "measured"))), " (measured, above the baseline)"


def _contributors(state: TargetState, key: str, shown: Method) -> str:
    """``"; most: `layer4` 2.31 GFLOPs, `layer3` 1.16 GFLOPs"``: the largest leaf calls (by path,
    over their calls) for a count, the slowest calls once per-layer latency was measured."""
    view = state.view
    sizes: dict[str, float] = {}
    if key == "latency":
        report = state.measurements.get("layer_latency")
        for record in (report or {}).get("layers") or [] if isinstance(report, dict) else []:
            value = metric_value((record.get("metrics") or {}).get("latency"))
            if isinstance(value, (int, float)) and record.get("path"):
                sizes[record["path"]] = sizes.get(record["path"], 0) + value
    elif key in ("params", "flops", "macs"):
        parents = {layer.get("parent") for layer in view.layers}
        for index, layer in enumerate(view.layers):
            if index in parents or not layer.get("path"):
                continue  # a leaf call holds the work; a container's is its children's
            if key == "params":
                stats = layer.get("parameters") or {}
                value = (stats.get("trainable", 0) + stats.get("frozen", 0)) if layer["path"] not in sizes else 0
            else:
                value = metric_value((layer.get("metrics") or {}).get(shown.flops if key == "flops" else shown.macs))
            if isinstance(value, (int, float)) and value > 0:
                sizes[layer["path"]] = sizes.get(layer["path"], 0) + value
    top = sorted(sizes.items(), key=lambda item: -item[1])[:_TOP]
    return ("; most: " + ", ".join(f"{fmt.layer_name(path, '`')} {_text(size, key)}" for path, size in top)) if top else ""


def _budget(state: TargetState, amount: Amount, shown: Method) -> Finding | None:
    key, name = amount.key, state.key.name
    limit = _text(amount.value, key)
    metric, how = _metric(state, key, shown)
    value = metric_value(metric)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        reason = _HOW.get(key) or f"{key} is not counted"
        return Finding(state.line, "information", "budget-unchecked",
                       f"{name}: the {key} budget of {limit} cannot be checked: {reason}")
    lower = is_lower_bound(metric)
    shown_value = (fmt.LOWER_BOUND if lower else "") + _text(value, key)
    if value > amount.value:
        over = value - amount.value
        bound = ", counting only what was counted (the rest would add to it)" if lower else ""
        return Finding(state.line, "warning", EXCEEDED,
                       f"{name}: {key} budget exceeded: {shown_value}{how} is over the limit of {limit} by "
                       f"{_text(over, key)} ({100 * over / amount.value:.0f} %){bound}{_contributors(state, key, shown)}")
    if lower:
        return Finding(state.line, "information", "budget-unconfirmed",
                       f"{name}: the {key} budget of {limit} cannot be confirmed: {shown_value}{how} is a lower bound "
                       "(some work has no formula; the warnings say where)")
    return None


def _training(state: TargetState, amount: Amount) -> Finding | None:
    report = state.measurements.get("train")
    budget = ((report or {}).get("memory") or {}).get("budget") if isinstance(report, dict) else None
    if isinstance(budget, dict) and budget.get("fits") is not None:
        return None  # fits, or the training report's own warning says by how much it does not
    return Finding(state.line, "information", "budget-unchecked",
                   f"{state.key.name}: the train_memory budget of {_text(amount.value, 'train_memory')} cannot be "
                   "checked: the training step was not estimated (its diagnostic says why)")


def _increase(state: TargetState, amount: Amount, shown: Method, comparison: Comparison | None) -> Finding | None:
    key, name = amount.key, state.key.name
    allowed = amount.text if amount.relative else _text(amount.value, key)
    if comparison is None or comparison.pending:
        return None if comparison is not None else Finding(
            state.line, "information", "budget-unchecked",
            f"{name}: the {key} max_increase of {allowed} cannot be checked: compare_with is off")
    if not comparison.ready and comparison.unknown_ref:  # a gate that can never run: fail, do not pass
        return Finding(state.line, "warning", UNKNOWN_BASELINE,
                       f"{name}: the {key} max_increase of {allowed} cannot be checked: {comparison.note}; "
                       "is compare_with misspelt?")
    if not comparison.ready:
        return Finding(state.line, "information", "budget-unchecked",
                       f"{name}: the {key} max_increase of {allowed} cannot be checked: no baseline ({comparison.note})")
    total = {"params": "parameters", "flops": shown.flops, "macs": shown.macs}[key]
    change: Change = comparison.total(total)
    if change.delta is None or change.known:
        return Finding(state.line, "information", "budget-unconfirmed",
                       f"{name}: the {key} max_increase of {allowed} cannot be confirmed {comparison.since}: "
                       + ("a side is a lower bound" if change.known else f"{key} is not counted"))
    limit = amount.value * change.before if amount.relative else amount.value
    if change.delta <= limit:
        return None
    share = f" ({fmt.relative_change(change.before, change.after)})" if change.before else ""
    return Finding(state.line, "warning", INCREASE_EXCEEDED,
                   f"{name}: max_increase exceeded: {key} grew by {_text(change.delta, key)}{share}, "
                   f"{_text(change.before, key)} → {_text(change.after, key)} {comparison.since}, more than the "
                   f"{allowed} allowed{_grew(comparison, key, shown)}")


def _grew(comparison: Comparison, key: str, shown: Method) -> str:
    """``"; grew most: `conv` +194 kFLOPs (changed), `head` +1.02 kFLOPs (added)"``."""
    grown = []
    for row in comparison.layer_rows(shown.flops):
        change = row.params if key == "params" else row.flops
        size = change.delta if change.delta is not None else (change.after or 0) - (change.before or 0)
        if size > 0:
            unit = "params" if key == "params" else "FLOPs"
            grown.append((size, f"{fmt.layer_name(row.path, '`')} {fmt.change(size, unit, full=False)} ({row.kind})"))
    grown.sort(key=lambda item: -item[0])
    return ("; grew most: " + ", ".join(text for _, text in grown[:_TOP])) if grown else ""


def budget_findings(state: TargetState, options: Mapping[str, Any], headline: str) -> list[Finding]:
    """The findings of ``state``'s good result against the ``budget`` and ``max_increase`` of its
    ``options`` (the merged options it runs with), for the ``headline`` method's counts. Options
    that do not parse (reported where they are written) give none."""
    if state.view is None:
        return []
    shown = method(headline)
    try:
        budget, increase = parse_budget(options.get("budget")), parse_max_increase(options.get("max_increase"))
    except (TypeError, ValueError):
        return []
    found = [_training(state, amount) if key == "train_memory" else _budget(state, amount, shown)
             for key, amount in budget.items()]
    found += [_increase(state, amount, shown, state.comparison) for amount in increase.values()]
    return [finding for finding in found if finding is not None]

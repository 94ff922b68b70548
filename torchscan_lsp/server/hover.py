"""Hover cards: a target's totals (both counting methods), top modules, what changed since its
baseline (:mod:`.comparison_card`) and measurements (the training step's FLOPs and peak memory by
category among them, the roofline and MFU, and the training plan's table); a module line's type,
paths, parameters, inputs and output, work by both methods with a note on where they differ and
why, direct children, receptive field (where one applies) or token dependencies, and its roofline;
a line's operators.
Markdown, built from the target states alone (no I/O)."""

from __future__ import annotations

from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.contract.metrics import metric_value
from torchscan_lsp.contract.report import DIAGNOSTIC_PYTHON_WARNING
from torchscan_lsp.server import labels
from torchscan_lsp.server.comparison_card import comparison_card
from torchscan_lsp.server.features import Editor
from torchscan_lsp.server.messages import (ESTIMATE_RUNNING_NOTE, NEVER_CALLED_NOTE, STALE_NOTE, error_message, traceback_block,
                                           untrusted_message)
from torchscan_lsp.server.roofline_card import module_roofline, target_roofline
from torchscan_lsp.server.plan_card import plan_card
from torchscan_lsp.server.work_tables import children_table, methods_table, top_modules
from torchscan_lsp.session.findings import receptive_field_applies
from torchscan_lsp.session.headline import DEFAULT_HEADLINE
from torchscan_lsp.session.measurements import model_latency, model_memory
from torchscan_lsp.session.results import ResultView, outermost
from torchscan_lsp.session.state import TargetState
from torchscan_lsp.session.training import TrainingSummary, training_failure, training_report, training_summary

MAX_PATHS = 8
MAX_WARNINGS = 3
"""Python warnings a target's hover quotes before it says how many more."""


def parameters_text(totals: dict) -> str:
    """``"Parameters: 368 (368 trainable, 0 frozen, 1.44 KiB); buffers: 0 elements"`` from a report's
    totals (a partial total behind ``≥``; a total the report lacks is left out)."""
    detail = [f"{fmt.metric_text(totals[name], unit)}{word}" for name, unit, word in (
        ("trainable_parameters", "", " trainable"), ("frozen_parameters", "", " frozen"), ("parameter_bytes", "bytes", ""))
        if totals.get(name)]
    text = f"Parameters: {fmt.metric_text(totals.get('parameters'), '')}" + (f" ({', '.join(detail)})" if detail else "")
    if totals.get("buffer_elements"):
        text += f"; buffers: {fmt.metric_text(totals['buffer_elements'], '')} elements"
    return text


def target_card(state: TargetState, client: str | None = None, headline: str = DEFAULT_HEADLINE) -> str:
    """The hover card of a target line (``client``: the editor's name, see :func:`untrusted_message`;
    ``headline``: the method the label shows)."""
    parts = [f"### torchscan: `{state.key.name}` — {state.state_word()}"]
    if state.untrusted:
        parts.append(untrusted_message(client))
    if state.error is not None:
        parts.append(f"**Failed**: {error_message(state, frames=False)}")
        parts.append(traceback_block(state))
    if state.view is not None:
        if state.stale or state.error is not None:
            parts.append(STALE_NOTE)
        view = state.view
        comparison = state.comparison if not (state.stale or state.error is not None) else None
        parts.append(labels.totals_label(view.totals, headline, comparison))
        parts.append(parameters_text(dict(view.totals)))
        parts.append(methods_table(view, [""], dict(view.totals), headline))
        parts.append(top_modules(view, headline))
        parts.append(comparison_card(comparison, headline))
        if view.report.get("inputs"):
            parts.append("Inputs: " + labels.inputs_text(view.report["inputs"]))
        parts.append(_python_warnings(view))
    memory = model_memory(state)
    if memory is not None:
        parts.append(f"Peak memory: {fmt.byte_size(memory['delta_bytes'])} above the baseline "
                     f"(peak {fmt.byte_size(memory.get('peak_bytes', 0))}, {memory.get('metric', '')} on {memory.get('device')})")
    latency = model_latency(state)
    if latency is not None:
        parts.append(f"Latency: {fmt.metric_text(latency, 'seconds')} per call{_model_spread(state)} "
                     f"({latency.get('status')}, {latency.get('method')})")
    training = training_report(state)
    if state.training_running:
        parts.append(ESTIMATE_RUNNING_NOTE)
    elif training is not None:
        parts.append(training_card(training_summary(training)))
    parts.append(target_roofline(state.measurements))
    failed = training_failure(state)
    if failed is not None:
        parts.append(f"**Training step failed**: {failed.get('type')}: {failed.get('message')}")
    parts.append(plan_card(state))
    return "\n\n".join(p for p in parts if p)


def _python_warnings(view: ResultView) -> str:
    """The Python warnings the analysis caught while the model ran (kept off every log): detail,
    since nothing is missing from a count because of them; ``""`` without any."""
    caught = [str(d.get("message", "")) for d in view.report.get("diagnostics") or []
              if d.get("code") == DIAGNOSTIC_PYTHON_WARNING]
    if not caught:
        return ""
    more = f" and {len(caught) - MAX_WARNINGS} more" if len(caught) > MAX_WARNINGS else ""
    return f"Python warnings while it ran ({len(caught)}): " + "; ".join(caught[:MAX_WARNINGS]) + more


def _model_spread(state: TargetState) -> str:
    """``", IQR 12.0 µs"``: the spread of the model latency shown, when the report has one."""
    for kind, name in (("latency", "latency_iqr"), ("layer_latency", "model_latency_iqr")):
        report = state.measurements.get(kind)
        spread = report.get("totals", {}).get(name) if isinstance(report, dict) else None
        if metric_value(spread) is not None:
            return f", IQR {fmt.metric_text(spread, 'seconds')}"
    return ""


def training_card(summary: TrainingSummary) -> str:
    """Markdown of a training step: FLOPs by phase, then the peak memory by category from both
    methods side by side (estimated on fake tensors, measured on a real step)."""
    rows = [f"**Training step** ({summary.setup})" + (f": {summary.trainable}" if summary.trainable else ""), "",
            "| FLOPs | value | status |", "| --- | --- | --- |"]
    rows += [f"| {phase} | {text} | {status} |" for phase, text, status in summary.flops]
    table = ["| memory at the peak | estimated | measured |", "| --- | --- | --- |"]
    table += [f"| {name} | {left} | {right} |" for name, left, right in summary.categories]
    peaks = "; ".join(f"{method} {text}" for method, text in summary.peaks)
    return "\n".join(rows) + "\n\n" + "\n".join(table) + f"\n\nPeak: {peaks}." + "".join(
        f"\n\n{note}" for note in summary.notes)


def _rf_text(layer: dict, spatial: bool) -> str:
    """The token dependencies of an attention call, or, in a model where a receptive field applies
    (``spatial``), the call's receptive field; ``""`` otherwise."""
    metrics = layer.get("metrics", {})
    record = layer.get("token_dependencies") or metrics.get("token_dependencies")
    relation = record.get("relation") if isinstance(record, dict) else record
    if relation:
        return f"token dependencies: {relation}"
    rf = metrics.get("receptive_field")
    if not rf or not spatial:
        return ""
    if rf.get("status") != "complete":
        return "receptive field: unavailable"
    stride = metric_value(metrics.get("effective_stride"))
    padding = metric_value(metrics.get("effective_padding"))
    return f"receptive field: {rf.get('value')} (stride {stride}, padding {padding})"


def _merged(operators: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Source-map operator entries of several lines, one per operator (calls and FLOPs summed; FLOPs
    unknown when one line's are)."""
    merged: dict[str, dict[str, Any]] = {}
    for op in operators:
        into = merged.setdefault(op.get("operator"), {**op, "calls": 0, "flops": 0})
        into["calls"] += op.get("calls") or 0
        into["flops"] = None if into["flops"] is None or op.get("flops") is None else into["flops"] + op["flops"]
    return list(merged.values())


def _flops_text(operators: list[dict[str, Any]]) -> str:
    """The FLOPs of source-map operator entries summed: ``"9.22 kFLOPs"``, ``"≥ 9.22 kFLOPs"`` when an
    operator that needs a formula has none."""
    total = sum(op.get("flops") or 0 for op in operators)
    uncounted = any(op.get("flops") is None and not op.get("ignored") for op in operators)
    return ("≥ " if uncounted else "") + fmt.number(total, "FLOPs")


def module_card(view: ResultView, paths: list[str], headline: str = DEFAULT_HEADLINE) -> str:
    """The hover card of a line that built the modules at ``paths`` (the outermost of what it built:
    :meth:`ResultView.line_modules`), or of a ``class`` line with these instances."""
    layers = [view.by_key[k] for k in view.by_key if k[0] in paths]
    summary = view.module_summary(paths)
    title_types = " / ".join(view.types_of(paths))
    parts = [f"### {title_types}" + (f" ×{len(paths)}" if len(paths) > 1 else "")]
    parts.append("Paths: " + ", ".join(f"{fmt.layer_name(p, '`')}" for p in paths[:MAX_PATHS]) + (" …" if len(paths) > MAX_PATHS else ""))
    parts.append(
        f"Parameters: {summary['parameters']:,} ({summary['trainable']:,} trainable, {summary['frozen']:,} frozen, "
        f"{fmt.byte_size(summary['parameter_bytes'])}); buffers: {summary['buffer_elements']:,} elements"
        + (f"; {summary['shared_elements']:,} parameters shared with "
           f"{', '.join(f'`{p}`' for p in summary['shared_with'])} (counted there)" if summary.get("shared_elements") else "")
    )
    first = layers[0] if layers else {}  # a container never called itself has no call of its own
    if layers:
        parts.append(f"Input: {labels.inputs_text(first.get('input'))} → output: {labels.shape(first.get('output'))}"
                     + (f" (first of {len(layers)} calls)" if len(layers) > 1 else ""))
        if any(layer.get("direct") for layer in layers):
            parts.append("Called through `.forward(...)`, which runs no module hook: its calls were found by their "
                         "frames on the stack, and its own work is counted in them")
    elif not summary["ran"]:  # built, never called: no work to show
        parts.append(NEVER_CALLED_NOTE)
    else:
        parts.append("Never called itself: the numbers are its children's")
    if summary["ran"]:
        parts.append(methods_table(view, paths, summary, headline))
    if len(paths) == 1:
        parts.append(children_table(view, paths[0], headline))
    sites = view.call_sites(paths)
    operators = _merged([op for site in sites for op in (view.line(*site).operators if view.line(*site) else [])])
    if operators:
        where = ", ".join(f"{file}:{line}" for file, line in sites[:4])
        parts.append(operators_card(view, operators, f"Operators dispatched from its call lines ({where})"))
    rf = _rf_text(first, receptive_field_applies(view))
    if rf:
        parts.append(rf.capitalize())
    return "\n\n".join(part for part in parts if part)


def _latency_row(record: dict) -> str:
    metrics = record.get("metrics", {})
    name = f"{fmt.layer_name(record.get('path'), '`')}" + (f" (call {record['call_index']})" if record.get("call_index") else "")
    if metric_value(metrics.get("latency")) is None:
        return f"| {name} | not timed | | | {record.get('reason', '')} |"
    share = metric_value(metrics.get("latency_share"))
    note = "" if record.get("stable", True) else f"unstable: spread {record.get('relative_spread', 0):.0%} of the median"
    return (f"| {name} | {fmt.metric_text(metrics['latency'], 'seconds')} | {fmt.metric_text(metrics.get('latency_iqr'), 'seconds')} "
            f"| {'?' if share is None else f'{share:.1%}'} | {note} |")


def layer_latency_card(measurements: dict, paths: list[str]) -> str:
    """Markdown of the per-layer latency of the calls under ``paths`` from the last "Measure latency"
    (``measurements["layer_latency"]``): median, spread (IQR) and share of the model's latency of each
    call, unstable ones flagged; ``""`` without a measurement."""
    report = measurements.get("layer_latency")
    if not isinstance(report, dict) or not report.get("layers"):
        return ""
    prefixes = tuple(p + "." for p in paths if p)
    records = [r for r in report["layers"] if "" in paths or r.get("path") in paths or r.get("path", "").startswith(prefixes)]
    if not records:
        return ""
    totals = report.get("totals", {})
    model = totals.get("model_latency")
    head = "**Latency** (each call replayed alone"
    if metric_value(model) is not None:
        head += f"; model {fmt.metric_text(model, 'seconds')}, IQR {fmt.metric_text(totals.get('model_latency_iqr'), 'seconds')}"
    rows = [head + ")", "", "| call | median | IQR | share of model | |", "| --- | --- | --- | --- | --- |"]
    rows += [_latency_row(record) for record in records[:MAX_PATHS]]
    if len(records) > MAX_PATHS:
        rows.append(f"| … {len(records) - MAX_PATHS} more | | | | |")
    consistency = report.get("consistency") or {}
    if consistency.get("within_tolerance") is False:
        rows.append(f"\nThe layers sum to {consistency['layer_sum_over_model']:.2f}× the model's latency: "
                    "read them as relative to one another, not as exact parts of it.")
    return "\n".join(rows)


def operators_card(view: ResultView, operators: list[dict[str, Any]], title: str = "Operators on this line") -> str:
    """Markdown table of source-map operator entries: operator FLOPs, counted by PyTorch's
    ``FlopCounterMode`` (a method of its own, never merged with the module formulas). An operator
    without FLOPs is "ignored" (with the report's reason: views, allocations, ...) or "not counted"."""
    ignored = (view.report.get("operator_flops") or {}).get("ignored_operators") or {}
    rows = ["| operator | calls | FLOPs |", "| --- | --- | --- |"]
    for op in sorted(operators, key=lambda o: -(o.get("flops") or 0))[:12]:
        if op.get("flops") is not None:
            flops = fmt.number(op["flops"], "FLOPs")
        elif op.get("operator") in ignored:
            flops = f"ignored: {ignored[op['operator']].get('reason', '')}".rstrip(": ")
        else:
            flops = "not counted"
        rows.append(f"| {op.get('operator')} | {op.get('calls')} | {flops} |")
    return f"**{title}** (torch.utils.flop_counter.FlopCounterMode)\n\n" + "\n".join(rows)


def build_hover(rel: str, line: int, states: list[TargetState], current: list[str] | None = None,
                client: str | None = None, path: str | None = None, headline: str = DEFAULT_HEADLINE) -> str | None:
    """Markdown for a hover on 1-based ``line`` of workspace-relative ``rel``, or ``None``.

    ``current`` is the document's lines now: each result's lines are mapped onto them, so a hover
    follows unsaved edits and says nothing on a line that changed. ``None`` takes the lines as
    analysed. ``client`` is the editor's name (see :func:`untrusted_message`). ``path`` is the
    document's absolute path, by which a result names a library file (:meth:`TargetState.name_for`).
    ``headline`` is the method labels show (``torchscan.headline``).
    """
    for state in states:
        if state.key.file == state.name_for(rel, path) and state.line == line:
            return target_card(state, client, headline)
    for state in states:
        view = state.view
        info = state.line_info(state.name_for(rel, path), line, current)
        if info is None:
            continue
        parts = [STALE_NOTE] if state.stale or state.error is not None else []
        if info.defined:
            built = view.line_modules(info.defined)
            parts.append(module_card(view, built, headline))
            parts.append(layer_latency_card(state.measurements, built))
            parts.append(module_roofline(state.measurements, built))
        elif info.instances:
            parts.append(module_card(view, info.instances, headline))
        if info.called:
            calls = outermost(info.called)
            outputs = ", ".join(f"{fmt.layer_name(p, '`')} → {labels.shape(view.by_key[(p, i)].get('output'))}" for p, i in calls[:4])
            parts.append(f"Module calls on this line: {len(calls)}" + (" (first 4)" if len(calls) > 4 else "") + f": {outputs}")
            called = list(dict.fromkeys(p for p, _ in calls))
            if not info.defined and len(called) == 1 and view.library_module(called[0]):
                parts.append(module_card(view, called, headline))  # a library model: its children
        if info.output is not None:
            parts.append(labels.result_text(info.output))
        if info.parameters:
            parts.append("Parameters assigned on this line:\n" + "\n".join(
                f"- {labels.parameter_text(entry)}" for entry in info.parameters[:12]))
        if info.operators:
            parts.append(operators_card(view, info.operators))
        if info.under:
            runs = (info.output or {}).get("runs") or 1
            parts.append(operators_card(view, info.under, "Operators under the functions this line called, outside "
                                        f"module calls: {_flops_text(info.under)}" + (f" over its {runs} runs" if runs > 1 else "")))
        parts = [part for part in parts if part]
        if len(parts) > (1 if parts and parts[0] == STALE_NOTE else 0):
            parts.append(f"_target `{state.key.name}` in `{state.key.file}`_")
            return "\n\n".join(parts)
    return None


def register(server: LanguageServer) -> None:
    """Register ``textDocument/hover`` (answered from the store, on the event loop)."""

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: Editor, params: types.HoverParams) -> types.Hover | None:
        document = ls.document(params.text_document.uri)
        if document is None:
            return None
        lines = ls.lines(document)
        text = build_hover(document.rel, params.position.line + 1, ls.states_for(document), lines.lines, ls.client.name,
                           document.path, ls.session.settings.headline)
        if text is None:
            return None
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text),
                           range=lines.statement(params.position.line + 1))

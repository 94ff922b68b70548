"""The HTML of a training step (``analyse_training_step``): its FLOPs by phase and module, and its
peak memory by category, estimated and measured side by side, each category drawn as a bar of its
share of that method's peak."""

from __future__ import annotations

from typing import Any, Mapping

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.engine.reporting.html.page import (context_section, diagnostics_section, escape, key_values, metric_cell,
    num, plain, status_badge, table, totals_table, value_cell)

__all__ = ["render_training", "training_section"]

_METHODS = ("estimated", "measured")
_MODULE_ROWS = 20


def _bar(part: int, peak: int) -> str:
    width = max(0.0, min(100.0, 100.0 * part / peak)) if peak > 0 else 0.0
    return (f'<span class="share">{width:.1f}%</span>'
            f'<div class="bar"><span style="width:{width:.2f}%"></span></div>')


def _complete(method: Mapping[str, Any]) -> bool:
    return (method.get("peak") or {}).get("status") == "complete"


def _categories(memory: Mapping[str, Any]) -> str:
    methods = {name: memory.get(name) or {} for name in _METHODS}
    names: list[str] = []
    for method in methods.values():
        if _complete(method):
            names += [name for name in method.get("by_category") or {} if name not in names]
    rows = []
    for name in names:
        row = [f"<code>{escape(name)}</code>"]
        for method in methods.values():
            size = (method.get("by_category") or {}).get(name) if _complete(method) else None
            row += ([num(value_cell(size, "bytes")), _bar(size, method["peak"]["value"])] if isinstance(size, int)
                    else [num("—"), ""])
        rows.append(row)
    rows.append(["<b>peak</b>"] + [cell for method in methods.values() for cell in (
        (num(metric_cell(method["peak"], "bytes")), escape((method.get("peak_phase") or "").replace("_", " ")))
        if _complete(method) else (num("—"), escape(method.get("reason", "not run"))))])
    return table(["category", "estimated", "share of its peak", "measured", "share of its peak"], rows, "categories")


def _method_notes(memory: Mapping[str, Any]) -> str:
    pairs = [(f"{name} method", f"<code>{escape((memory.get(name) or {}).get('method', ''))}</code>") for name in _METHODS]
    cuda = (memory.get("estimated") or {}).get("cuda")
    if isinstance(cuda, Mapping):
        pairs += [("CUDA allocated peak (derived)", value_cell(cuda.get("allocated_peak_bytes"), "bytes")),
                  ("CUDA reserved, packed (derived)", value_cell(cuda.get("reserved_if_packed_bytes"), "bytes")),
                  ("CUDA note", escape(cuda.get("note", "")))]
    comparison = memory.get("comparison")
    if isinstance(comparison, Mapping):
        pairs += [("measured − estimated", value_cell(comparison.get("difference_bytes"), "bytes")),
                  ("agree (within 1 %)", plain(comparison.get("agree")))]
    budget = memory.get("budget")
    if isinstance(budget, Mapping):
        pairs += [("budget", value_cell(budget.get("bytes"), "bytes")), ("fits", plain(budget.get("fits")))]
    return key_values(pairs)


def _modules(flops: Mapping[str, Any]) -> str:
    records = [(path, record) for path, record in (flops.get("by_module") or {}).items() if path]
    records.sort(key=lambda item: -((item[1].get("training_flops") or {}).get("known_value") or 0))
    rows = [[f"<code>{escape(path)}</code>"] + [num(metric_cell(record.get(key), "FLOPs"))
            for key in ("forward_flops", "backward_flops", "training_flops")]
            + [status_badge((record.get("training_flops") or {}).get("status"))] for path, record in records[:_MODULE_ROWS]]
    shown = f" (the {_MODULE_ROWS} largest of {len(records)})" if len(records) > _MODULE_ROWS else ""
    return f"<h3>Modules{escape(shown)}</h3>" + table(["module", "forward", "backward", "training", "status"], rows)


def training_section(report: Mapping[str, Any]) -> str:
    """The training step as a section of a page: parameters (trainable and frozen), FLOPs, memory by
    category, notes, diagnostics."""
    options = report.get("options") or {}
    flops = report.get("flops") or {}
    memory = report.get("memory") or {}
    setup = ", ".join(f"{key} {value}" for key, value in options.items() if value not in (None, {}, ""))
    body = ['<section id="training"><h2>Training step</h2>', f"<p>{escape(setup)}</p>"]
    parameters = report.get("parameters")
    if isinstance(parameters, Mapping) and parameters.get("parameters"):
        # only the trainable parameters get gradients and optimizer state
        body.append(f"<p>Trainable parameters: {escape(fmt.metric_text(parameters.get('trainable_parameters'), ''))} "
                    f"of {escape(fmt.metric_text(parameters['parameters'], ''))}</p>")
    body += ["<h3>FLOPs</h3>", totals_table(flops.get("totals") or {}) if flops else "<p>Not counted.</p>"]
    if flops:
        body.append(_modules(flops))
    body += ["<h3>Peak memory by category</h3>", _categories(memory), _method_notes(memory),
             diagnostics_section(report.get("diagnostics"), "Training diagnostics"), "</section>"]
    return "".join(body)


def render_training(report: dict[str, Any]) -> tuple[str, str, str]:
    """Title, escaped subtitle and body of a training report's page."""
    estimated = (report.get("memory") or {}).get("estimated") or {}
    subtitle = escape(f"{(report.get('options') or {}).get('device', '?')} · estimated peak "
                      f"{fmt.metric_text(estimated.get('peak'), 'bytes')}")
    return "Training step", subtitle, training_section(report) + context_section(report.get("context"))

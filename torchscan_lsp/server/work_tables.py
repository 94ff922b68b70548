"""The hover's tables of work: both counting methods side by side, a module's direct children, and
the top modules of a target. Markdown, built from a result alone (no I/O).

Every number goes through :mod:`torchscan_lsp.contract.format` (``≥`` before a lower bound, ``?``
for a number not measured), and both methods are always named: the dispatched operators
(``operator_flops``, ``operator_macs``) and the module formulas (``module_flops``, ``macs``,
``dmas``), the headline's first (docs/metrics.md, "Module FLOPs and operator FLOPs").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.contract.metrics import metric_value
from torchscan_lsp.server import labels
from torchscan_lsp.server.messages import NEVER_CALLED
from torchscan_lsp.session.gaps import difference_note
from torchscan_lsp.session.headline import DEFAULT_HEADLINE, method, other
from torchscan_lsp.session.results import ResultView

__all__ = ["methods_table", "children_table", "top_modules", "MAX_ROWS"]

MAX_ROWS = 12
"""Rows of a children table before it says how many more."""

TOP_MODULES = 5


def _methods_of(metrics: Mapping[str, Any], names: tuple[str, ...], fallback: str) -> str:
    found = dict.fromkeys(str((metrics.get(name) or {}).get("method") or "") for name in names)
    return ", ".join(f"`{m}`" for m in found if m) or f"`{fallback}`"


def methods_table(view: ResultView, roots: list[str], metrics: Mapping[str, Any], headline: str = DEFAULT_HEADLINE) -> str:
    """Both methods' FLOPs, MACs and DMAs in ``metrics`` (the totals, or a module summary of the
    modules at ``roots``) in one narrow table, the headline's first and in bold; their method labels
    on one line below it (long, so not a column: a hover must fit beside the code); then one line
    on where they differ and why (:func:`~torchscan_lsp.session.gaps.difference_note`)."""
    rows = ["| | FLOPs | MACs | DMAs |", "| --- | --- | --- | --- |"]
    labels_line = []
    for shown in (method(headline), other(headline)):
        dmas = fmt.metric_text(metrics.get(shown.dmas), "DMAs") if shown.dmas else "—"
        title = f"**{shown.title}** (shown)" if shown is method(headline) else shown.title
        rows.append(f"| {title} | {fmt.metric_text(metrics.get(shown.flops), 'FLOPs')} "
                    f"| {fmt.metric_text(metrics.get(shown.macs), 'MACs')} | {dmas} |")
        labels_line.append(f"{shown.title}: {_methods_of(metrics, shown.metrics, shown.title)}")
    note = difference_note(view, roots, metrics, headline)
    text = "\n".join(rows) + "\n\n_Methods: " + "; ".join(labels_line) + "._"
    return text + (f"\n\n{note}" if note else "")


def _output(view: ResultView, path: str, ran: bool) -> str:
    call = view.by_key.get((path, 0))
    return labels.shape(call.get("output")) if call is not None else "never called itself" if ran else NEVER_CALLED


def children_table(view: ResultView, path: str, headline: str = DEFAULT_HEADLINE) -> str:
    """The direct children of module ``path``: name, type, parameters, FLOPs of the ``headline``
    method (over every call of each) and the output of its first call; ``""`` without children."""
    children = view.children(path)
    if not children:
        return ""
    rows = [f"**Children** ({len(children)})", "", "| child | type | params | FLOPs | output |", "| --- | --- | --- | --- | --- |"]
    flops = method(headline).flops
    for child in children[:MAX_ROWS]:
        summary = view.module_summary([child])
        work = fmt.metric_text(summary[flops], "FLOPs") if summary["ran"] else "—"
        rows.append(f"| `{child}` | {' / '.join(view.types_of([child]))} | {labels.params_text(summary)} "
                    f"| {work} | {_output(view, child, summary['ran'])} |")
    if len(children) > MAX_ROWS:
        rows.append(f"| … {len(children) - MAX_ROWS} more | | | | |")
    return "\n".join(rows)


def top_modules(view: ResultView, headline: str = DEFAULT_HEADLINE, count: int = TOP_MODULES) -> str:
    """Markdown table of the ``count`` metric-leaf module calls with the most FLOPs of the
    ``headline`` method (a leaf's dispatched operators are its own work)."""
    flops = method(headline).flops
    leaves = [layer for layer in view.layers if "module_flops" in layer.get("metrics", {}) and flops in layer["metrics"]]
    leaves.sort(key=lambda layer: -(metric_value(layer["metrics"][flops]) or 0))
    if not leaves:
        return ""
    rows = ["| module | type | FLOPs | output |", "| --- | --- | --- | --- |"]
    for layer in leaves[:count]:
        name = fmt.layer_name(layer["path"], "`")
        if layer.get("call_index"):
            name += f" (call {layer['call_index']})"
        rows.append(f"| {name} | {layer['type']} | {fmt.metric_text(layer['metrics'][flops], 'FLOPs')} "
                    f"| {labels.shape(layer.get('output'))} |")
    return f"**Top modules by FLOPs** ({method(headline).title})\n\n" + "\n".join(rows)

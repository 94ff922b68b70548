"""Why a count is a lower bound, and why the two counting methods differ: the words hovers and
diagnostics share.

A report diagnostic concerns one kind of number (:func:`concern`): the dispatched operators' counts
(an operator without a FLOP formula), the module formulas' (a module without a formula, work in a
container's own ``forward``, a formula that failed), the parameter totals (packed or lazy weights),
or the receptive field, which is no count at all. :func:`reasons` says, in a few words each, what
made one method's count over a subtree partial; :func:`difference_note` says in one line where the
two methods differ and why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.contract.metrics import is_lower_bound, metric_value
from torchscan_lsp.contract.report import DIAGNOSTIC_NOT_APPLICABLE, DIAGNOSTIC_PYTHON_WARNING, in_subtree, outermost_layers
from torchscan_lsp.session.headline import MODULES, OPERATORS, Method, method, other
from torchscan_lsp.session.results import LISTED_OPERATOR, ResultView

__all__ = ["ADVISORY_METRICS", "PARAMETER_CODES", "concern", "named_operators", "known_text", "reasons",
           "difference_note"]

ADVISORY_METRICS = frozenset({"receptive_field", "effective_stride", "effective_padding", "token_dependencies"})
"""Report metrics that describe the model rather than count its cost: nothing is missing from the
parameter, FLOP, MAC or DMA counts when they are not derived."""

PARAMETER_CODES = frozenset({"packed_parameters", "uninitialized_parameters"})
"""Diagnostics that make the parameter totals partial."""

MAX_NAMES = 3
"""Operators, types or paths a phrase names before it says how many more."""


_UNSUPPORTED = "Module type not supported: "

_MODULE_PHRASES = {
    "module_metric_warning": "part of {n} (the formula gave a lower bound)",
    "module_metric_error": "{n} whose formula failed",
    "missing_metric_tensor": "{n} without an input or output tensor",
    "irregular_tensor": "{n} on nested tensors",
    "unsupported_script_module": "{n} of a ScriptModule",
    "module_call_failed": "{n} that raised",
}


def concern(diagnostic: Mapping[str, Any]) -> str | None:
    """Which count a report diagnostic makes incomplete: ``"operators"``, ``"modules"``,
    ``"parameters"`` or ``"receptive_field"``; ``None`` when nothing is missing (a metric that does
    not apply: ``metric_not_applicable``; a Python warning the job raised: ``python_warning``)."""
    if diagnostic.get("code") in (DIAGNOSTIC_NOT_APPLICABLE, DIAGNOSTIC_PYTHON_WARNING):
        return None
    if diagnostic.get("metric") in ADVISORY_METRICS or diagnostic.get("code") == "token_dependencies_unknown":
        return "receptive_field"
    if diagnostic.get("operator") or diagnostic.get("code") == "uncounted_operator":
        return "operators"
    if diagnostic.get("code") in PARAMETER_CODES:
        return "parameters"
    return "modules"


def named_operators(names: Iterable[str], limit: int = MAX_NAMES) -> str:
    """``"aten.add, aten.bmm and 2 more"``: at most ``limit`` names, each whole."""
    names = list(dict.fromkeys(names))
    text = ", ".join(names[:limit])
    return text + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _calls(count: int) -> str:
    return f"{count} call" + ("s" if count != 1 else "")


def known_text(metrics: Mapping[str, Any], shown: Method) -> str:
    """The MACs and FLOPs of ``shown`` in ``metrics`` (totals, or a module summary) as a label
    reads them: ``"≥ 576 MACs · ≥ 1.15 kFLOPs"``."""
    return fmt.SEPARATOR.join([fmt.metric_text(metrics.get(shown.macs), "MACs"),
                               fmt.metric_text(metrics.get(shown.flops), "FLOPs")])


def _outermost(view: ResultView, roots: tuple[str, ...]) -> list[dict]:
    return outermost_layers(view.layers, view.subtree(roots))  # type: ignore[return-value]


def _operator_reasons(view: ResultView, roots: tuple[str, ...]) -> list[str]:
    flops: dict[str, int] = {}
    macs: dict[str, int] = {}
    for layer in _outermost(view, roots):
        uncounted = layer.get("uncounted_operators") or {}
        for into, kind in ((flops, "flops"), (macs, "macs")):
            for name, calls in (uncounted.get(kind) or {}).items():
                into[name] = into.get(name, 0) + int(calls)
    out = []
    if flops:
        out.append(f"{named_operators(flops)} ({_calls(sum(flops.values()))}), without a FLOP formula")
    macs_only = {name: calls for name, calls in macs.items() if name not in flops}
    if macs_only:
        out.append(f"the MACs of {named_operators(macs_only)} ({_calls(sum(macs_only.values()))}), without a MAC formula")
    return out


def _container_operators(view: ResultView, diagnostics: list[Mapping[str, Any]]) -> list[str]:
    names: dict[str, None] = {}
    for diagnostic in diagnostics:
        listed = [name for name, _ in LISTED_OPERATOR.findall(str(diagnostic.get("message", "")))]
        names.update(dict.fromkeys(view.own_operators(str(diagnostic["path"])) or listed))
    return list(names)


def _module_reasons(view: ResultView, roots: tuple[str, ...], shown: Method) -> list[str]:
    paths = {layer["path"] for layer in view.subtree(roots)}
    found = [d for d in view.report.get("diagnostics") or []
             if concern(d) == "modules" and d.get("metric") in shown.metrics
             and d.get("path") is not None and (d["path"] in paths or in_subtree(str(d["path"]), roots))]
    out = []
    work = [d for d in found if d.get("code") == "container_work"]
    if work:
        paths = list(dict.fromkeys(d["path"] for d in work))
        out.append(f"work in the own forward of {len(paths)} module call{'s' if len(paths) != 1 else ''} "
                   f"({named_operators(_container_operators(view, work))})")
    types: dict[str, set[str]] = {}
    for d in found:
        if d.get("code") == "unsupported_module_metric":
            types.setdefault(str(d.get("message", "")).removeprefix(_UNSUPPORTED), set()).add(d["path"])
    if types:
        out.append("modules without a formula: " + ", ".join(f"{name} ×{len(paths)}" if len(paths) > 1 else name
                                                  for name, paths in list(types.items())[:MAX_NAMES])
                   + (f" and {len(types) - MAX_NAMES} more types" if len(types) > MAX_NAMES else ""))
    for code, phrase in _MODULE_PHRASES.items():
        paths = {d["path"] for d in found if d.get("code") == code}
        if paths:
            out.append(phrase.format(n=_calls(len(paths))))
    return out


def reasons(view: ResultView, roots: Iterable[str], shown: Method) -> list[str]:
    """What ``shown``'s count over the modules at ``roots`` (``[""]``: the whole model) misses, each
    in a few words (``"aten.linalg_qr (1 call), without a FLOP formula"``, ``"work in the own
    forward of 6 module calls (aten.add)"``, ``"modules without a formula: examples.gpt.LayerNorm
    ×5"``); empty when it misses nothing."""
    roots = tuple(roots)
    if shown.name == "operators":
        return _operator_reasons(view, roots)
    return _module_reasons(view, roots, shown)


def _differ(first: Mapping[str, Any] | None, second: Mapping[str, Any] | None) -> bool:
    return (first or {}).get("status") != (second or {}).get("status") or metric_value(first) != metric_value(second)


def difference_note(view: ResultView, roots: Iterable[str], metrics: Mapping[str, Any], headline: str) -> str:
    """One line on where the two methods' counts in ``metrics`` (a module summary, or the totals)
    differ and why; ``""`` when they agree.

    ``"Module formulas miss work in the own forward of 8 module calls (aten.add, …); modules
    without a formula: examples.gpt.LayerNorm ×5: the dispatched operators count it."``
    """
    roots = tuple(roots)
    shown, beside = method(headline), other(headline)
    if not any(_differ(metrics.get(a), metrics.get(b)) for a, b in ((shown.flops, beside.flops), (shown.macs, beside.macs))):
        return ""
    notes = []
    for counted, against in ((beside, shown), (shown, beside)):
        if any(is_lower_bound(metrics.get(name)) for name in (counted.flops, counted.macs)):
            why = reasons(view, roots, counted)
            tail = f": the {against.title} count it" if not any(
                is_lower_bound(metrics.get(name)) for name in (against.flops, against.macs)) else ""
            if why:
                notes.append(f"{counted.title.capitalize()} miss " + "; ".join(why) + tail + ".")
    apart = []
    for unit, (modules, operators) in (("FLOPs", (MODULES.flops, OPERATORS.flops)), ("MACs", (MODULES.macs, OPERATORS.macs))):
        first, second = metrics.get(modules) or {}, metrics.get(operators) or {}
        if first.get("status") == second.get("status") == "complete" and first.get("value") != second.get("value"):
            delta = first["value"] - second["value"]
            apart.append(f"{fmt.number(abs(delta), unit)} {'more' if delta > 0 else 'fewer'}")
    if apart:
        notes.append(f"The module formulas count {' and '.join(apart)} than the dispatched operators: a formula "
                     "follows the layer's definition, the operators what PyTorch's kernels ran (docs/metrics.md).")
    return " ".join(notes)

"""What the editor warns about in a result: its report diagnostics, for the numbers it shows, folded
by line and cause.

The rules (docs/server.md, "Diagnostics"):

* a **warning** only where a number the editor shows is a lower bound: the headline method's counts
  (``torchscan.headline``; for the dispatched operators, an operator without a FLOP formula; for the
  module formulas, a module without a formula, work in a container's own ``forward``, a formula that
  failed) or the parameters (packed or lazy weights), each saying how much is known;
* the other method's gaps are detail in the hover, never a diagnostic;
* one diagnostic per line and cause, with the number of layers it stands for (``×12 layers``), and
  a line is told only about the operators that ran on it;
* receptive-field notes (information) only when asked for (``torchscan.receptiveFieldNotes``) and
  on a model where a receptive field applies (one with a spatial kernel);
* one information on the target line when a total it shows is a lower bound, with the causes.

Errors (analyses that failed) are not here: they are no part of a result.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.contract.messages import is_library
from torchscan_lsp.contract.metrics import is_lower_bound, metric_value
from torchscan_lsp.session.gaps import MAX_NAMES, PARAMETER_CODES, concern, known_text, named_operators, reasons
from torchscan_lsp.session.headline import MODULES, OPERATORS, Method, method
from torchscan_lsp.session.results import LISTED_OPERATOR, ResultView, Site
from torchscan_lsp.session.state import TargetState

__all__ = ["Finding", "receptive_field_applies", "result_findings", "every_finding", "page_findings"]

_QUOTED = re.compile(r"'[^']*'")
_OBSERVED = re.compile(r"observed (\d+) time")


@dataclass(frozen=True)
class Finding:
    """One diagnostic to show.

    Attributes:
        line: 1-based line of the document now (the result's line mapped onto the current text).
        severity: ``"warning"`` or ``"information"`` (``"error"`` for an engine error).
        code: the report diagnostic's code, or ``"partial-totals"`` for the target line's note.
        message: the sentence shown.
    """

    line: int
    severity: str
    code: str
    message: str


def receptive_field_applies(view: ResultView) -> bool:
    """Whether a receptive field means something for this model: one of its calls has a spatial
    kernel (a convolution or pooling whose own field is wider than one position)."""
    for layer in view.layers:
        local = (layer.get("metrics") or {}).get("local_receptive_field")
        if isinstance(metric_value(local), (int, float)) and metric_value(local) > 1:
            return True
    return False


def _names(paths: list[str]) -> str:
    """```a`, `b`, `c` and 9 more``: the first few layer paths, each whole."""
    more = f" and {len(paths) - MAX_NAMES} more" if len(paths) > MAX_NAMES else ""
    return ", ".join(f"`{p}`" if p else fmt.ROOT_MODULE for p in paths[:MAX_NAMES]) + more


def _layers(paths: list[str]) -> str:
    """```mix``` for one layer, ``×12 layers: `a`, `b`, `c` and 9 more`` for several: a repeated
    cause said once, with its count."""
    return _names(paths) if len(paths) == 1 else f"×{len(paths)} layers: {_names(paths)}"


_WORDS = {"module_flops": "FLOPs", "macs": "MACs", "dmas": "DMAs"}


def _metrics_words(diagnostics: list[Mapping[str, Any]], shown: Method) -> str:
    """``"FLOPs and MACs"``: the shown metrics these diagnostics make partial."""
    found = {str(d.get("metric")) for d in diagnostics}
    return " and ".join(_WORDS[name] for name in shown.metrics if name in found and name in _WORDS)


class _Folder:
    """Groups one result's diagnostics by current line and cause, then words each group."""

    def __init__(self, state: TargetState, headline: str, notes: bool) -> None:
        self.state, self.view = state, state.view
        self.shown = method(headline)
        self.notes = notes and receptive_field_applies(state.view)
        totals = self.view.totals
        self.known = f"{state.key.name}: {known_text(totals, self.shown)} known"
        self.groups: dict[tuple, list[tuple[dict, Site | None]]] = {}

    def cause(self, diagnostic: dict) -> tuple | None:
        """The group key of a diagnostic (``None``: nothing shown depends on it)."""
        code = diagnostic.get("code")
        if diagnostic.get("severity") == "error":
            return ("error", code, diagnostic.get("message"))
        kind = concern(diagnostic)
        if kind == "receptive_field":
            return ("receptive_field", code, _QUOTED.sub("…", str(diagnostic.get("message", "")))) if self.notes else None
        if kind == "parameters":
            return ("parameters", code, diagnostic.get("message"))
        if kind == "operators":
            return ("operator", diagnostic.get("operator")) if self.shown is OPERATORS else None
        if kind == "modules" and self.shown is MODULES and diagnostic.get("metric") in ("module_flops", "macs"):
            return ("container_work",) if code == "container_work" else ("module", code, diagnostic.get("message"))
        return None

    def add(self, line: int, diagnostic: dict, site: Site | None) -> None:
        key = self.cause(diagnostic)
        if key is not None:
            self.groups.setdefault((line, *key), []).append((diagnostic, site))

    def findings(self) -> list[Finding]:
        out = []
        for (line, kind, *rest), members in self.groups.items():
            diagnostics = [d for d, _ in members]
            site = next((s for _, s in members if s is not None), None)
            first = diagnostics[0]
            paths = list(dict.fromkeys(str(d["path"]) for d in diagnostics if d.get("path") is not None))
            if kind == "error":
                out.append(Finding(line, "error", str(first.get("code")), str(first.get("message", ""))))
            elif kind == "operator":
                out.append(Finding(line, "warning", "uncounted_operator", self.operator(first, site)))
            elif kind == "container_work":
                out.append(Finding(line, "warning", "container_work", self.container_work(diagnostics, site, paths)))
            elif kind == "receptive_field":
                out.append(Finding(line, "information", str(first.get("code")),
                                   f"{rest[1]}{f' ({_layers(paths)})' if paths else ''}: receptive field not derived"))
            elif kind == "parameters":
                out.append(Finding(line, "warning", str(first.get("code")), f"{first.get('message', '')} ({self.known})"))
            else:
                out.append(Finding(line, "warning", str(first.get("code")),
                                   f"{first.get('message', '')}{f' ({_layers(paths)})' if paths else ''}: its module "
                                   f"{_metrics_words(diagnostics, self.shown)} are not counted, so the counts shown are "
                                   f"lower bounds ({self.known})"))
        return out

    def operator(self, diagnostic: dict, site: Site | None) -> str:
        """An operator without a FLOP formula, on a line that ran it (``site``) or the target line."""
        name = diagnostic["operator"]
        calls = self.view.operator_calls(site, name) if site is not None else {}
        count = sum(calls.values()) or int((_OBSERVED.search(str(diagnostic.get("message", ""))) or [0, 0])[1])
        where = (f", in {_names(list(calls))}" if len(calls) == 1 else f", {_layers(list(calls))}") if calls else ""
        return (f"{name} has no FLOP formula ({count} call{'s' if count != 1 else ''}{where}): the FLOPs and MACs "
                f"shown for the modules that ran it are lower bounds ({self.known})")

    def container_work(self, diagnostics: list[dict], site: Site | None, paths: list[str]) -> str:
        """Work in containers' own ``forward``: only the operators that ran on this line."""
        operators: dict[str, int] = {}
        for path in paths:
            found = self.view.container_operators(path, site) if site is not None else {}
            if not found:  # no source map for it (the target line): the engine's own list
                message = next(str(d.get("message", "")) for d in diagnostics if d.get("path") == path)
                found = {op: int(calls) for op, calls in LISTED_OPERATOR.findall(message)}
            for name, calls in found.items():
                operators[name] = operators.get(name, 0) + calls
        named = named_operators(op + (f" ×{calls}" if calls > 1 else "") for op, calls in operators.items())
        fold = f" (×{len(paths)} layers)" if len(paths) > 1 else ""
        return (f"{named} in the own forward of {_names(paths)}{fold}: no module formula counts it, so the module "
                f"{_metrics_words(diagnostics, self.shown)} shown are lower bounds ({self.known})")


def _target_note(state: TargetState, shown: Method) -> Finding | None:
    """The information on the target line when a total it shows is a lower bound."""
    view = state.view
    totals = view.totals
    if not any(is_lower_bound(totals.get(name)) for name in ("parameters", shown.macs, shown.flops)):
        return None
    causes = reasons(view, [""], shown)
    causes += [str(d.get("message", "")).rstrip(".") for d in view.report.get("diagnostics") or []
               if d.get("code") in PARAMETER_CODES]
    sites = sorted({f"{file}:{line}" for d in view.report.get("diagnostics") or []
                    if concern(d) == "operators" and shown is OPERATORS
                    for file, line in view.operator_sites(str(d.get("operator"))) if not is_library(file)})
    label = fmt.SEPARATOR.join([fmt.metric_text(totals.get("parameters"), "params"), known_text(totals, shown)])
    text = f"{state.key.name}: the totals shown are lower bounds ({label})"
    if causes:
        text += ": the " + shown.title + " miss " + "; ".join(causes)
    if sites:
        text += f" (ran at {', '.join(sites[:MAX_NAMES])}{' …' if len(sites) > MAX_NAMES else ''})"
    return Finding(state.line, "information", "partial-totals", text)


def result_findings(state: TargetState, name: str, current: list[str] | None, *, headline: str,
                    receptive_field_notes: bool = False) -> list[Finding]:
    """The findings of ``state``'s good result for the file it names ``name`` (workspace-relative,
    or absolute for a library file), placed on the lines of ``current`` (the document's lines now;
    ``None``: as analysed). Report diagnostics with no workspace line go on the target line."""
    view = state.view
    if view is None:
        return []
    folder = _Folder(state, headline, receptive_field_notes)
    moved = state.line_map(name, current)
    for line, info in sorted(view.lines_in(name).items()):
        now = moved.to_current(line)
        if now is not None:
            for diagnostic in info.diagnostics:
                folder.add(now, diagnostic, (name, line))
    own = name == state.key.file
    if own:
        for diagnostic in view.unattributed_diagnostics():
            folder.add(state.line, diagnostic, None)
    out = folder.findings() + _unregistered(state, name, moved)
    note = _target_note(state, method(headline)) if own else None
    return out + ([note] if note is not None else [])


def _unregistered(state: TargetState, name: str, moved: Any) -> list[Finding]:
    """A warning on each line of ``name`` that built modules a plain list, tuple or dict holds
    (the source map's ``unregistered``): PyTorch registers none of them, so the parameter counts
    shown leave them out while the FLOPs of their calls are in."""
    out = []
    for entry in (state.view.result.get("source_map") or {}).get("unregistered") or ():  # type: ignore[union-attr]
        site = entry.get("defined_at") or {}
        now = moved.to_current(int(site["line"])) if site.get("file") == name and site.get("line") else None
        if now is None:
            continue
        holder = f"`{entry['path']}.{entry['attribute']}`" if entry["path"] else f"`{entry['attribute']}`"
        wrapper = "nn.ModuleDict" if entry.get("container") == "dict" else "nn.ModuleList"
        out.append(Finding(now, "warning", "unregistered-modules", (
            f"{holder} holds {entry['modules']} module{'s' if entry['modules'] != 1 else ''} in a plain "
            f"{entry.get('container', 'list')}, which PyTorch does not register: they are in no parameters(), "
            f"state_dict(), .to() or optimizer, and their {fmt.params(entry['parameters'])} are in no parameter "
            f"count here (their calls' FLOPs are); hold them in an {wrapper}")))
    return out


def every_finding(state: TargetState, headline: str, *, receptive_field_notes: bool = False) -> list[tuple[str, Finding]]:
    """Every finding of ``state``'s good result, as ``(file, finding)``: the target's own file
    first, then each other file the result names (workspace-relative, or a library file's absolute
    path), at the lines as analysed."""
    if state.view is None:
        return []
    own = state.key.file
    files = [own, *sorted(name for name in state.view.files if name != own)]
    return [(name, found) for name in files
            for found in result_findings(state, name, None, headline=headline, receptive_field_notes=receptive_field_notes)]


def page_findings(state: TargetState, headline: str, *, receptive_field_notes: bool = False) -> list[dict[str, Any]]:
    """What the HTML report shows as its diagnostics: :func:`every_finding`, each as ``{"file",
    "line", "severity", "code", "message"}`` (JSON, for the worker that renders the page), in file
    and line order: the diagnostics the editor shows for the result, and no other."""
    found = every_finding(state, headline, receptive_field_notes=receptive_field_notes)
    order = {name: index for index, name in enumerate(dict.fromkeys(name for name, _ in found))}
    return [{"file": name, "line": f.line, "severity": f.severity, "code": f.code, "message": f.message}
            for name, f in sorted(found, key=lambda entry: (order[entry[0]], entry[1].line))]

"""Diagnostics of one file, from its target scan and from every target state that touches it.

- target problems (syntax errors, bad pragmas) where the scan found them;
- an information diagnostic on each target while the workspace is not trusted;
- an error where a failing analysis raised (the innermost workspace frame), and on the target line;
- a warning on each line whose module or operator work was not counted;
- an information diagnostic for a receptive field (or token dependencies) that could not be
  derived: it concerns no cost count, so it must not read as a problem to fix;
- an information diagnostic on the target line when its totals are partial (lower bounds);
- on the target line, each measurement of the latest job that failed: an error when it was asked
  for, a warning for the training estimate that runs unasked;
- a warning on the target line for its training step: over the memory budget (naming the largest
  categories), a memory method that failed, backward work not counted.

One builder serves pulled diagnostics, pushed diagnostics and the ``check`` command.
"""

from __future__ import annotations

from typing import Any, Iterable

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from torchscan_lsp.server.features import Editor
from torchscan_lsp.server.messages import error_message, untrusted_message
from torchscan_lsp.server.positions import Lines
from torchscan_lsp.session.state import TargetState
from torchscan_lsp.session.measurements import measurement_failures
from torchscan_lsp.session.training import training_report

SOURCE = "torchscan"


_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
    "info": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}


def _diagnostic(range_: types.Range, message: str, severity: types.DiagnosticSeverity, code: str) -> types.Diagnostic:
    return types.Diagnostic(range=range_, message=message, severity=severity, source=SOURCE, code=code)


def problem_diagnostics(lines: Lines, problems: Iterable[Any]) -> list[types.Diagnostic]:
    """Diagnostics for target problems (``line`` 1-based, ``column``/``end_column`` 0-based)."""
    return [
        _diagnostic(lines.span(p.line, p.column or 0, getattr(p, "end_column", None)), p.message,
                    _SEVERITY.get(str(p.severity).lower(), types.DiagnosticSeverity.Error), "target-problem")
        for p in problems
    ]


def _error_diagnostics(rel: str, lines: Lines, state: TargetState) -> list[types.Diagnostic]:
    error = (state.error or {}).get("error") or {}
    message = error_message(state)
    kind = f"analysis-{error.get('kind') or 'crash'}"
    out = []
    # the line that raised, where it is now (nothing there when that line changed since)
    at_error = (state.line_map(rel, lines.lines, error=True).to_current(int(error["line"]))
                if error.get("file") == rel and error.get("line") else None)
    if at_error is not None:
        out.append(_diagnostic(lines.statement(at_error), message, types.DiagnosticSeverity.Error, kind))
    if state.key.file == rel and not _on_the_target(state, at_error):
        # a wrong return value raised nothing: its location is the target itself
        raised = error.get("kind") != "result" and error.get("file") and error.get("line")
        where = f" (raised at {error['file']}:{error['line']})" if raised else ""
        out.append(_diagnostic(lines.statement(state.line), message + where, types.DiagnosticSeverity.Error, kind))
    return out


def _on_the_target(state: TargetState, line: int | None) -> bool:
    """Whether the current ``line`` is the target's own: its ``def``/``class`` line or its pragma or
    decorator (where an options error stands), so that one diagnostic there says it all."""
    if line is None:
        return False
    first = int(getattr(state.target, "annotation_line", None) or state.line)
    return min(first, state.line) <= line <= state.line


MAX_NAMED_PATHS = 3


def _uncounted_message(diagnostics: list[dict]) -> str:
    """One message for report diagnostics that share an operator, or a code and message.

    An operator: ``"aten.mean: not counted in operator FLOPs: <message>"``. Module diagnostics:
    ``"<message>: <metrics> not counted for `a`, `b` and 3 more modules"`` (``not derived`` for a
    receptive field, which is no count).
    """
    first = diagnostics[0]
    if first.get("operator"):
        return f"{first['operator']}: not counted in operator FLOPs: {first.get('message', '')}"
    metrics = ", ".join(dict.fromkeys(d.get("metric", "?") for d in diagnostics))
    paths = [f"`{p or '(root)'}`" for p in dict.fromkeys(d.get("path") for d in diagnostics)]
    named = ", ".join(paths[:MAX_NAMED_PATHS])
    if len(paths) > MAX_NAMED_PATHS:
        named += f" and {len(paths) - MAX_NAMED_PATHS} more modules"
    verb = "not derived" if all(_advisory(d) for d in diagnostics) else "not counted"
    return f"{first.get('message', '')}: {metrics} {verb} for {named}"


ADVISORY_METRICS = frozenset({"receptive_field", "effective_stride", "effective_padding", "token_dependencies"})
"""Report metrics that describe the model rather than count its cost: their diagnostics are
information, since nothing is missing from the parameter, FLOP, MAC or DMA counts."""


def _advisory(diagnostic: dict) -> bool:
    return diagnostic.get("metric") in ADVISORY_METRICS


def _severity(group: list[dict]) -> types.DiagnosticSeverity:
    """Error for an engine error, information for receptive-field notes, else a warning."""
    if group[0].get("severity") == "error":
        return types.DiagnosticSeverity.Error
    if all(_advisory(d) for d in group):
        return types.DiagnosticSeverity.Information
    return types.DiagnosticSeverity.Warning


def _group(diagnostics: Iterable[dict]) -> list[list[dict]]:
    """Report diagnostics grouped by operator, or by code and message (one group per cause); a
    receptive-field note never shares a group with a cost diagnostic (their severities differ)."""
    groups: dict[tuple, list[dict]] = {}
    for d in diagnostics:
        key = ("operator", d["operator"]) if d.get("operator") else ("module", d.get("code"), d.get("message"), _advisory(d))
        groups.setdefault(key, []).append(d)
    return list(groups.values())


def _report_diagnostics(rel: str, lines: Lines, state: TargetState) -> list[types.Diagnostic]:
    view = state.view
    out: list[types.Diagnostic] = []
    sited = [(lines.statement(line), info.diagnostics) for line, info in sorted(state.lines_in(rel, lines.lines).items())]
    if state.key.file == rel:
        sited.append((lines.statement(state.line), view.unattributed_diagnostics()))
    for range_, found in sited:
        for group in _group(found):
            out.append(_diagnostic(range_, _uncounted_message(group), _severity(group), group[0].get("code", "uncounted")))
    if state.key.file != rel:
        return out
    partial = [name for name, metric in view.totals.items() if (metric or {}).get("status") == "partial"]
    if partial:
        out.append(_diagnostic(
            lines.statement(state.line),
            f"{state.key.name}: partial totals ({', '.join(partial)}) are lower bounds: some work was not counted; "
            "the warnings name it",
            types.DiagnosticSeverity.Information, "partial-totals"))
    return out


def _measurement_failure_diagnostics(lines: Lines, state: TargetState) -> list[types.Diagnostic]:
    """Each measurement of the latest job that failed, on the target's line: an error when it was
    asked for (a code lens, ``measure=[...]``, ``scan --train``), a warning for the training
    estimate that runs unasked (:func:`~torchscan_lsp.session.measurements.measurement_failures`)."""
    out = []
    for failure in measurement_failures(state.measurements):
        file, line = failure.error.get("file"), failure.error.get("line")
        elsewhere = file and line and not (file == state.key.file and _on_the_target(state, int(line)))
        raised = f" (raised at {file}:{line})" if elsewhere else ""
        out.append(_diagnostic(lines.statement(state.line), failure.message(state.key.name) + raised,
                               _SEVERITY[failure.severity], f"{failure.kind}-failed"))
    return out


def _training_diagnostics(lines: Lines, state: TargetState) -> list[types.Diagnostic]:
    """Warnings of the target's training step on its line: an estimate over the memory budget
    (naming the largest categories), a memory method that failed, work its FLOPs did not count."""
    range_ = lines.statement(state.line)
    report = training_report(state)
    out = []
    for group in _group((report or {}).get("diagnostics") or ()):
        first = group[0]
        message = (f"training step: {_uncounted_message(group)} ({', '.join(dict.fromkeys(d['metric'] for d in group))})"
                   if first.get("operator") else f"{state.key.name}: {first.get('message')}")
        out.append(_diagnostic(range_, message, types.DiagnosticSeverity.Warning, first.get("code", "training")))
    return out


def config_diagnostics(rel: str, lines: Lines, error: Any, states: list[TargetState]) -> list[types.Diagnostic]:
    """Diagnostics for a broken ``[tool.torchscan-lsp]`` table on each target of ``rel``, one per
    problem of the table (``error.problems``, each ``.message`` and ``.line``; else ``error.message``
    and ``error.line``): their analyses run without the workspace defaults."""
    out = []
    for problem in getattr(error, "problems", None) or [error]:
        where = f"pyproject.toml:{problem.line}" if getattr(problem, "line", None) else "pyproject.toml"
        message = f"{where}: {problem.message}; the workspace defaults are not applied"
        out += [_diagnostic(lines.statement(s.line), f"{s.key.name}: {message}", types.DiagnosticSeverity.Error,
                            "workspace-config") for s in states if s.key.file == rel]
    return out


def build_diagnostics(rel: str, lines: Lines, problems: Iterable[Any], states: list[TargetState],
                      config_error: Any = None, client: str | None = None) -> list[types.Diagnostic]:
    """All diagnostics of workspace-relative file ``rel``; duplicates (same range and message) once.

    ``config_error`` is the workspace's ``[tool.torchscan-lsp]`` error, if any; ``client`` the
    editor's name, which words the untrusted-workspace advice (:func:`untrusted_message`).
    """
    out = problem_diagnostics(lines, problems)
    if config_error is not None:
        out.extend(config_diagnostics(rel, lines, config_error, states))
    for state in states:
        if state.untrusted and state.key.file == rel:
            out.append(_diagnostic(lines.statement(state.line), f"{state.key.name}: {untrusted_message(client)}",
                                   types.DiagnosticSeverity.Information, "untrusted"))
            continue
        if state.error is not None:
            out.extend(_error_diagnostics(rel, lines, state))
        if state.view is not None and state.error is None:
            out.extend(_report_diagnostics(rel, lines, state))
            if state.key.file == rel:
                out.extend(_measurement_failure_diagnostics(lines, state))
                out.extend(_training_diagnostics(lines, state))
    unique: dict[tuple, types.Diagnostic] = {}
    for d in out:
        unique.setdefault((d.range.start.line, d.range.start.character, d.message), d)
    return list(unique.values())


def register_pull(server: LanguageServer) -> None:
    """Offer pulled diagnostics (``textDocument/diagnostic``), served from the same builder."""

    @server.feature(types.TEXT_DOCUMENT_DIAGNOSTIC,
                    types.DiagnosticOptions(identifier=SOURCE, inter_file_dependencies=True, workspace_diagnostics=False))
    def pull(ls: Editor, params: types.DocumentDiagnosticParams) -> types.FullDocumentDiagnosticReport:
        document = ls.document(params.text_document.uri)
        items = [] if document is None else ls.diagnostics_for(document)
        return types.FullDocumentDiagnosticReport(items=items)

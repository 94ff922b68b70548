"""Diagnostics of one file, from its target scan and from every target state that touches it.

- target problems (syntax errors, bad pragmas) where the scan found them;
- an information diagnostic on each target while the workspace is not trusted;
- an error where a failing analysis raised (the innermost workspace frame), and on the target line;
- a result's findings (:mod:`torchscan_lsp.session.findings`): a warning only where a number shown
  is a lower bound, one per line and cause; receptive-field notes when asked for; an information
  on the target line when a total shown is a lower bound;
- on the target line, each measurement of the latest job that failed: an error when it was asked
  for, a warning for the training estimate that runs unasked;
- a warning on the target line for its training step: over the memory budget (naming the largest
  categories), a memory method that failed, backward work not counted;
- on the target line, each limit of its ``budget`` and ``max_increase`` that is exceeded (a
  warning), or that cannot be confirmed or checked (an information): :mod:`torchscan_lsp.session.budgets`.

One builder serves pulled diagnostics, pushed diagnostics and the ``check`` command.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from torchscan_lsp.server.features import Editor
from torchscan_lsp.server.messages import error_message, untrusted_message
from torchscan_lsp.server.positions import Lines
from torchscan_lsp.session.budgets import budget_findings
from torchscan_lsp.session.findings import result_findings
from torchscan_lsp.session.headline import DEFAULT_HEADLINE
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


def _error_diagnostics(rel: str, lines: Lines, state: TargetState, explained: set[int],
                       defaults_dropped: bool = False) -> list[types.Diagnostic]:
    error = (state.error or {}).get("error") or {}
    message = error_message(state, defaults_dropped=defaults_dropped)
    kind = f"analysis-{error.get('kind') or 'crash'}"
    out = []
    # the line that raised, where it is now (nothing there when that line changed since), unless an
    # error read from the source already stands there (a bare decorator raises when imported)
    at_error = (state.line_map(rel, lines.lines, error=True).to_current(int(error["line"]))
                if error.get("file") == rel and error.get("line") else None)
    if at_error is not None and at_error not in explained:
        # a module that fails to import fails every target of it: the line that raised says so once
        shown = message.removeprefix(f"{state.key.name}: ") if error.get("kind") == "import" else message
        out.append(_diagnostic(lines.statement(at_error), shown, types.DiagnosticSeverity.Error, kind))
    if state.key.file == rel and not _on_the_target(state, at_error):
        # a wrong return value raised nothing: it was returned there
        verb = "returned" if error.get("kind") == "result" else "raised"
        where = f" ({verb} at {error['file']}:{error['line']})" if error.get("file") and error.get("line") else ""
        out.append(_diagnostic(lines.statement(state.line), message + where, types.DiagnosticSeverity.Error, kind))
    return out


def _on_the_target(state: TargetState, line: int | None) -> bool:
    """Whether the current ``line`` is the target's own: its ``def``/``class`` line or its pragma or
    decorator (where an options error stands), so that one diagnostic there says it all."""
    if line is None:
        return False
    first = int(getattr(state.target, "annotation_line", None) or state.line)
    return min(first, state.line) <= line <= state.line


def _report_diagnostics(rel: str, lines: Lines, state: TargetState, path: str | None, headline: str,
                        receptive_field_notes: bool) -> list[types.Diagnostic]:
    """The folded findings of ``state``'s result for this file (:mod:`torchscan_lsp.session.findings`)."""
    found = result_findings(state, state.name_for(rel, path), lines.lines, headline=headline,
                            receptive_field_notes=receptive_field_notes)
    return [_diagnostic(lines.statement(f.line), f.message, _SEVERITY[f.severity], f.code) for f in found]


def _measurement_failure_diagnostics(lines: Lines, state: TargetState) -> list[types.Diagnostic]:
    """Each measurement of the latest job that failed, on the target's line: an error when it was
    asked for (a code lens, ``measure=[...]``, ``scan --train``), a warning for the training
    estimate that runs unasked (:func:`~torchscan_lsp.session.measurements.measurement_failures`);
    an option's error (a plan's ``sequence`` its factory's inputs contradict) on the annotation
    that holds the option."""
    out = []
    for failure in measurement_failures(state.measurements):
        file, line = failure.error.get("file"), failure.error.get("line")
        on_target = bool(file and line and file == state.key.file and _on_the_target(state, int(line)))
        raised = f" (raised at {file}:{line})" if file and line and not on_target else ""
        where = int(line) if on_target and failure.error.get("kind") == "options" else state.line
        out.append(_diagnostic(lines.statement(where), failure.message(state.key.name) + raised,
                               _SEVERITY[failure.severity], f"{failure.kind}-failed"))
    return out


def _training_diagnostics(lines: Lines, state: TargetState) -> list[types.Diagnostic]:
    """Warnings of the target's training step on its line: an estimate over the memory budget
    (naming the largest categories), a memory method that failed, work its FLOPs did not count."""
    range_ = lines.statement(state.line)
    report = training_report(state)
    groups: dict[tuple, list[dict]] = {}   # one warning per cause: an operator, or a code and message
    for d in (report or {}).get("diagnostics") or ():
        key = ("operator", d["operator"]) if d.get("operator") else ("other", d.get("code"), d.get("message"))
        groups.setdefault(key, []).append(d)
    out = []
    for group in groups.values():
        first = group[0]
        message = (f"training step: {first['operator']}: not counted in operator FLOPs: {first.get('message', '')} "
                   f"({', '.join(dict.fromkeys(d['metric'] for d in group))})"
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
                      config_error: Any = None, client: str | None = None, *, path: str | None = None,
                      headline: str = DEFAULT_HEADLINE, receptive_field_notes: bool = False,
                      options: Callable[[TargetState], Mapping[str, Any]] | None = None,
                      defaults_dropped: bool = False) -> list[types.Diagnostic]:
    """All diagnostics of workspace-relative file ``rel`` (absolute ``path``, by which a result names
    a library file); duplicates (same range and message) once. ``defaults_dropped``: the workspace's
    table has errors said elsewhere (``check`` prints them once, at the table's lines), so the
    targets ran without its defaults.

    ``config_error`` is the workspace's ``[tool.torchscan-lsp]`` error, if any; ``client`` the
    editor's name, which words the untrusted-workspace advice (:func:`untrusted_message`);
    ``headline`` and ``receptive_field_notes`` the settings that say which numbers are shown and
    whether receptive-field notes were asked for; ``options`` gives the options a target runs with
    (:meth:`~torchscan_lsp.session.controller.Session.target_options`), whose budgets are checked
    (none without it).
    """
    out = problem_diagnostics(lines, problems)
    explained = {d.range.start.line + 1 for d in out if d.severity == types.DiagnosticSeverity.Error}
    if config_error is not None:
        out.extend(config_diagnostics(rel, lines, config_error, states))
    for state in states:
        if state.untrusted and state.key.file == rel:
            out.append(_diagnostic(lines.statement(state.line), f"{state.key.name}: {untrusted_message(client)}",
                                   types.DiagnosticSeverity.Information, "untrusted"))
            continue
        if state.error is not None:
            out.extend(_error_diagnostics(rel, lines, state, explained, config_error is not None or defaults_dropped))
        if state.view is not None and state.error is None:
            out.extend(_report_diagnostics(rel, lines, state, path, headline, receptive_field_notes))
            if state.key.file == rel:
                out.extend(_measurement_failure_diagnostics(lines, state))
                out.extend(_training_diagnostics(lines, state))
                if options is not None:
                    out.extend(_diagnostic(lines.statement(f.line), f.message, _SEVERITY[f.severity], f.code)
                               for f in budget_findings(state, options(state), headline))
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

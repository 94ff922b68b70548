"""``torchscan-lsp check PATH...``: the editor's inlay hints and diagnostics, printed as text.

Each line reads ``file:line:col: severity: message`` (1-based line and column), severity one of
``error``, ``warning``, ``info``, ``hint`` (an inlay hint's label). The targets in the given files
(folders are searched for ``*.py``, by the rules of :mod:`torchscan_lsp.session.workspace`) are
analysed in worker processes through the language server's own session, and the same builders
turn the results into text; files the models touched are reported too. The exit status is 1 when
any error was reported (a file named without targets is one, as for ``scan``), 0 otherwise, and 2
for a usage error (:mod:`.arguments`: a path that does not exist, a limit that is not a positive
number). This command does not import torch itself.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import re
from pathlib import Path

from torchscan_lsp.cli.arguments import NO_TARGET, add_paths, add_workspace_arguments
from torchscan_lsp.cli.check_formats import FORMATS
from torchscan_lsp.cli.places import Places
from torchscan_lsp.session.settings import HEADLINES
from torchscan_lsp.session.workspace import SourceFile, find_root, python_files


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``check`` subcommand to ``subparsers``."""
    parser = subparsers.add_parser(
        "check",
        help="print the editor's hints and diagnostics for files, as text",
        description="Analyse the annotated models in each PATH (folders are searched for *.py) in "
        "worker processes, as the language server does, and print its inlay hints and diagnostics "
        "as 'FILE:LINE:COL: SEVERITY: MESSAGE' lines. Exit status 1 when any error was reported (a "
        "file without targets is one), 2 for a usage error (a path that does not exist, a limit that is "
        "not a positive number).",
    )
    add_paths(parser, "Python files or folders to check")
    add_workspace_arguments(parser)
    parser.add_argument("--no-hints", action="store_true", help="print diagnostics only")
    parser.add_argument("--headline", choices=HEADLINES,
                        help="the counting method the hints show and warn about: the dispatched operators "
                        "(default) or the module formulas (the setting torchscan.headline)")
    parser.add_argument("--format", choices=FORMATS, default="text", dest="output",
                        help="text (default): FILE:LINE:COL: SEVERITY: MESSAGE lines; github: workflow commands "
                        "(::warning file=...,line=...::...) that GitHub Actions shows on the lines; sarif: one "
                        "SARIF 2.1.0 log for code scanning (hints are left out of both)")
    parser.add_argument("--compare-with", metavar="REF", type=_baseline,
                        help="compare every target with the same target at git REF (HEAD, main, origin/main, a "
                        "commit): the hints carry the deltas, and each target's diff table follows (the setting "
                        "torchscan.compareWith; without it, only targets with a max_increase are compared)")
    parser.set_defaults(run=run)
    return parser


def _baseline(text: str) -> str:
    """A ``--compare-with`` value, checked as the setting ``torchscan.compareWith`` is."""
    from torchscan_lsp.session.settings import Settings, merge

    _, problems = merge(Settings(), {"compareWith": text})
    if problems:
        raise argparse.ArgumentTypeError(problems[0].replace("setting torchscan.compareWith must be", "must be"))
    return text


def _display(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


async def check(files: list[SourceFile], root: Path, *, python: str | None, timeout: float | None, hints: bool,
                memory_mb: float | None = None, headline: str | None = None,
                paths: list[Path] | None = None, output: str = "text",
                compare_with: str | None = None) -> tuple[list[str], int]:
    """Analyse ``files`` (:func:`~torchscan_lsp.session.workspace.python_files` of ``paths``) under
    ``root``; returns the output lines in the ``output`` format (:mod:`.check_formats`) and the
    number of failures: errors (a file named without targets, or paths without any, is one, as for
    ``scan``) and exceeded budgets. With ``compare_with`` every target is compared with that git ref
    (or ``"save"``...), its hints carry the deltas and the text output ends with each target's diff
    table; without it only targets with a ``max_increase`` are compared, with the
    ``[tool.torchscan-lsp]`` ``compare_with`` (default ``HEAD``)."""
    from torchscan_lsp.cli.check_formats import github_lines, sarif_text, text_lines
    from torchscan_lsp.cli.check_tables import comparison_tables
    from torchscan_lsp.cli.session import command_session, time_alone

    session, problems = command_session(str(root), python=python, timeout=timeout, memory_mb=memory_mb,
                                        headline=headline, compare_with=compare_with, auto_plan=False)
    documents, unreadable = session.open_files(files, str(root))
    time_alone(session)
    if compare_with is None and not any(session.target_options(s).get("max_increase")
                                        for s in session.store.targets.values()):
        session.settings = dataclasses.replace(session.settings, compareWith="off")  # no baseline to run
    for document in documents:
        session.analyse(document)
    await session.scheduler.wait_idle()
    session.shutdown()

    entries, errors, exceeded = _entries(session, documents, files, root, unreadable, hints)
    notes = [f"torchscan-lsp: {problem}" for problem in problems]
    tail = comparison_tables(session, _display, headline=session.settings.headline) if compare_with is not None else []
    if not session.store.targets and not errors:  # as scan says it: nothing under the paths to analyse
        tail.append(f"{', '.join(_display(p) for p in paths or [f.path for f in files])}: error: {NO_TARGET}")
        errors += 1
    if output == "sarif":
        return [sarif_text(entries, root)], errors + exceeded
    return notes + (github_lines if output == "github" else text_lines)(entries) + tail, errors + exceeded


def _entries(session, documents, files, root: Path, unreadable, hints: bool) -> tuple[list, int, int]:
    """The output entries of every reported file, the number of errors and of exceeded budgets."""
    from lsprotocol import types

    from torchscan_lsp.cli.check_formats import Entry
    from torchscan_lsp.contract.messages import is_library
    from torchscan_lsp.server.diagnostics import build_diagnostics
    from torchscan_lsp.server.inlay_hints import build_inlay_hints
    from torchscan_lsp.server.positions import Lines
    from torchscan_lsp.session.budgets import OVER_BUDGET_CODES

    # by root and workspace-relative name: files under two roots (a path outside the command's
    # root has its own) may share a name
    reported = {(d.root, d.rel): d for d in documents}
    for state in list(session.store.targets.values()):
        # the workspace's files; a library file the model ran through gets hints where an editor opens it
        owner = state.key.root
        for rel in sorted(name for name in state.files if (owner, name) not in reported and not is_library(name)):
            path = Path(owner, rel)
            if path.is_file():
                reported[owner, rel] = session.open(str(path), owner, path.read_text(encoding="utf-8", errors="replace"))

    severity = {types.DiagnosticSeverity.Error: "error", types.DiagnosticSeverity.Warning: "warning",
                types.DiagnosticSeverity.Information: "info", types.DiagnosticSeverity.Hint: "hint"}
    entries = [Entry(_display(path), _rel(path, root), 1, 1, "error", problem, "unreadable")
               for path, problem in unreadable]
    errors, exceeded = len(unreadable), 0
    for workspace in dict.fromkeys([str(root), *(d.root for d in reported.values())]):
        broken = session.workspace_config(workspace).error  # said once, at its lines, not again on every target
        table = Path(workspace, "pyproject.toml")
        for problem in getattr(broken, "problems", None) or ([broken] if broken is not None else []):
            entries.append(Entry(_display(table), _rel(table, root), problem.line or 1, 1, "error",
                                 f"{problem.message}; the workspace defaults are not applied", "workspace-config"))
            errors += 1
    explicit = {str(f.path) for f in files if f.explicit}
    settings = session.settings
    places = Places(session)
    for (_, rel), document in reported.items():
        lines = Lines(document.text, len)
        states = session.store.states_for_file(document.root, rel)
        found = []
        if document.path in explicit and not session.store.states_in(document.root, rel) \
                and not any(str(getattr(p, "severity", "error")) == "error" for p in document.problems):
            # a file named without targets fails the check, as it fails scan, unless others named
            # with it have targets: `check $(git diff --name-only)` names helper modules too
            alone = not session.store.targets
            found.append((0, 0, "error" if alone else "info", NO_TARGET, "no-target"))
            errors += alone
        for d in build_diagnostics(rel, lines, document.problems, states, None, path=document.path,
                                   headline=settings.headline, receptive_field_notes=settings.receptiveFieldNotes,
                                   options=session.target_options,
                                   defaults_dropped=session.workspace_config(document.root).error is not None):
            errors += d.severity == types.DiagnosticSeverity.Error
            exceeded += d.code in OVER_BUDGET_CODES
            found.append((d.range.start.line, d.range.start.character, severity[d.severity],
                          _relocate(_one_line(d.message), Path(document.root)), str(d.code)))
        if hints:
            for h in build_inlay_hints(rel, lines, states, settings.inlayHints, path=document.path,
                                       headline=settings.headline):
                found.append((h.position.line, h.position.character, "hint", h.label, "hint"))
        name, named = _display(Path(document.path)), _rel(Path(document.path), root)  # named: SARIF's, GitHub's
        for line, col, sev, message, code in sorted(found, key=lambda entry: entry[:3]):  # ties: as built
            cell, line_in = places.cell(document.path, line + 1)
            entries.append(Entry(name, named, line_in, col + 1, sev, places.message(document.path, rel, message),
                                 code, cell))
    return entries, errors, exceeded


def _rel(path: Path, root: Path) -> str:
    """``path`` relative to the command's ``root`` (SARIF's ``%SRCROOT%``), with ``/`` separators;
    its absolute path when it lies outside."""
    try:
        return Path(path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return Path(path).as_posix()


def _one_line(message: str) -> str:
    """``message`` on one line, as every line of ``check`` is one diagnostic: an exception's text
    over several lines (``Failed to import ...:\n<the cause>``) joined with spaces."""
    return _BREAK.sub(" ", message)


_BREAK = re.compile(r"\s*\n\s*")


def _relocate(message: str, root: Path) -> str:
    """``message`` with the workspace-relative ``(raised at FILE:LINE)`` (or ``returned at``) the
    editor shows made relative to the current folder, like the ``FILE:LINE:COL`` that starts each line."""
    return _RAISED_AT.sub(lambda m: f"({m[1]} at {_display(root / m[2])}:{m[3]})", message)


_RAISED_AT = re.compile(r"\((raised|returned) at (.+?):(\d+)\)")


def run(args: argparse.Namespace) -> int:
    """Run ``check``; returns 1 if any error was reported or a budget exceeded, else 0 (argparse
    exits with 2 for a usage error)."""
    paths = list(args.paths)
    root = Path(args.root).resolve() if args.root else find_root(paths)
    lines, errors = asyncio.run(check(python_files(paths), root, python=args.python, timeout=args.timeout,
                                      hints=not args.no_hints and args.output == "text",
                                      memory_mb=args.memory_limit_mb, headline=args.headline, paths=paths,
                                      output=args.output, compare_with=args.compare_with))
    for line in lines:
        print(line)
    return 1 if errors else 0

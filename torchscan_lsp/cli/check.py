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
import os
import re
from pathlib import Path

from torchscan_lsp.cli.arguments import NO_TARGET, add_paths, add_workspace_arguments
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
    parser.set_defaults(run=run)
    return parser


def _display(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


async def check(files: list[SourceFile], root: Path, *, python: str | None, timeout: float | None, hints: bool,
                memory_mb: float | None = None, headline: str | None = None,
                paths: list[Path] | None = None) -> tuple[list[str], int]:
    """Analyse ``files`` (:func:`~torchscan_lsp.session.workspace.python_files` of ``paths``) under
    ``root``; returns the output lines and the number of errors (a file named without targets, or
    paths without any, is one, as for ``scan``)."""
    from lsprotocol import types

    from torchscan_lsp.cli.session import command_session, time_alone
    from torchscan_lsp.server.diagnostics import build_diagnostics
    from torchscan_lsp.server.inlay_hints import build_inlay_hints
    from torchscan_lsp.server.positions import Lines
    from torchscan_lsp.contract.messages import is_library

    session, problems = command_session(str(root), python=python, timeout=timeout, memory_mb=memory_mb,
                                        headline=headline, auto_plan=False)
    documents, unreadable = session.open_files(files, str(root))
    time_alone(session)
    for document in documents:
        session.analyse(document)
    await session.scheduler.wait_idle()
    session.shutdown()

    reported = {d.rel: d for d in documents}
    for state in list(session.store.targets.values()):
        # the workspace's files; a library file the model ran through gets hints where an editor opens it
        for rel in sorted(name for name in state.files - set(reported) if not is_library(name)):
            path = root / rel
            if path.is_file():
                reported[rel] = session.open(str(path), str(root), path.read_text(encoding="utf-8", errors="replace"))

    severity = {types.DiagnosticSeverity.Error: "error", types.DiagnosticSeverity.Warning: "warning",
                types.DiagnosticSeverity.Information: "info", types.DiagnosticSeverity.Hint: "hint"}
    out: list[str] = [f"torchscan-lsp: {problem}" for problem in problems]
    out += [f"{_display(path)}:1:1: error: {problem}" for path, problem in unreadable]
    errors = len(unreadable)
    broken = session.config_error(str(root))  # said once, at its lines, not again on every target
    for problem in getattr(broken, "problems", None) or ([broken] if broken is not None else []):
        out.append(f"{_display(root / 'pyproject.toml')}:{problem.line or 1}:1: error: {problem.message}; "
                   "the workspace defaults are not applied")
        errors += 1
    explicit = {str(f.path) for f in files if f.explicit}
    for rel, document in reported.items():
        lines = Lines(document.text, len)
        states = session.store.states_for_file(document.root, rel)
        entries = []
        if document.path in explicit and not session.store.states_in(document.root, rel) \
                and not any(str(getattr(p, "severity", "error")) == "error" for p in document.problems):
            entries.append((0, 0, "error", NO_TARGET))  # a file named without targets, as for scan
            errors += 1
        settings = session.settings
        for d in build_diagnostics(rel, lines, document.problems, states, None, path=document.path,
                                   headline=settings.headline, receptive_field_notes=settings.receptiveFieldNotes):
            errors += d.severity == types.DiagnosticSeverity.Error
            entries.append((d.range.start.line, d.range.start.character, severity[d.severity], d.message))
        if hints:
            for h in build_inlay_hints(rel, lines, states, settings.inlayHints, path=document.path,
                                       headline=settings.headline):
                entries.append((h.position.line, h.position.character, "hint", h.label))
        name = _display(Path(document.path))
        out += [f"{name}:{line + 1}:{col + 1}: {sev}: {_relocate(message, root)}"
                for line, col, sev, message in sorted(entries, key=lambda entry: entry[:3])]  # ties: as built
    if not session.store.targets and not errors:  # as scan says it: nothing under the paths to analyse
        out.append(f"{', '.join(_display(p) for p in paths or [f.path for f in files])}: error: {NO_TARGET}")
        errors += 1
    return out, errors


def _relocate(message: str, root: Path) -> str:
    """``message`` with the workspace-relative ``(raised at FILE:LINE)`` (or ``returned at``) the
    editor shows made relative to the current folder, like the ``FILE:LINE:COL`` that starts each line."""
    return _RAISED_AT.sub(lambda m: f"({m[1]} at {_display(root / m[2])}:{m[3]})", message)


_RAISED_AT = re.compile(r"\((raised|returned) at (.+?):(\d+)\)")


def run(args: argparse.Namespace) -> int:
    """Run ``check``; returns 1 if any error was reported, else 0 (argparse exits with 2 for a
    usage error)."""
    paths = list(args.paths)
    root = Path(args.root).resolve() if args.root else find_root(paths)
    lines, errors = asyncio.run(check(python_files(paths), root, python=args.python, timeout=args.timeout,
                                      hints=not args.no_hints, memory_mb=args.memory_limit_mb,
                                      headline=args.headline, paths=paths))
    for line in lines:
        print(line)
    return 1 if errors else 0

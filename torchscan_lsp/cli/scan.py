"""``torchscan-lsp scan PATH...``: the editor's analysis, in a terminal.

Finds the annotated targets in each file (or in the ``.py`` files under each directory that mention
``torchscan``), runs each one in a worker process through the language server's own session
(:class:`torchscan_lsp.session.Session`: the same roots, options, worker and limits; a fresh child
forked from a warm parent, under a time and a memory limit), and prints its summary table, or all
results as one JSON array.

Every problem is one line on stderr, ``FILE:LINE: error: MESSAGE`` (or ``warning``), and any error
makes the exit status 1; a usage error (a path that does not exist, a limit that is not a positive
number) exits with 2, as for ``check`` (:mod:`.arguments`). Tracebacks of the user's code are summarised to
the innermost line of the workspace; tracebacks of ours are never shown. A target that hangs, uses
too much memory or kills its process ends as such an error too; what the model printed goes to
stderr, so stdout holds only the tables or the JSON.

This module never imports the user's code, and imports torch only to print the tables.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from torchscan_lsp.cli.arguments import NO_TARGET, add_paths, add_workspace_arguments, no_target_message
from torchscan_lsp.cli.scan_output import (
    STOPPED_KINDS,
    Output,
    display,
    print_table,
    report_failure,
    report_measurement_problems,
    write_html,
)
from torchscan_lsp.cli.places import Places
from torchscan_lsp.cli.session import command_session, time_alone
from torchscan_lsp.contract.messages import failure
from torchscan_lsp.session.budgets import budget_findings
from torchscan_lsp.session.controller import Session
from torchscan_lsp.session.state import Document, TargetState
from torchscan_lsp.session.workspace import find_root, python_files


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``scan`` and its arguments."""
    parser = subparsers.add_parser(
        "scan",
        help="analyse the annotated models in Python files and print their summaries",
        description=(
            "Find the models annotated with '# torchscan: input_shape=...' (or "
            "@torchscan_lsp.target(...)) in each PATH, run each once, and print its summary table "
            "or JSON report."
        ),
    )
    add_paths(parser, "Python files or folders")
    parser.add_argument("--target", metavar="NAME",
                        help="only the target with this name (other targets' problems are not reported)")
    parser.add_argument(
        "--format", choices=("table", "json"), default="table", help="output format (default: table)"
    )
    add_workspace_arguments(parser)
    parser.add_argument("--latency", action="store_true", help="also measure the model's latency")
    parser.add_argument("--memory", action="store_true", help="also measure peak memory")
    parser.add_argument(
        "--layer-latency", action="store_true", help="also measure each leaf module's latency"
    )
    parser.add_argument(
        "--train", action="store_true",
        help="also analyse one training step: its FLOPs, and its peak memory estimated (fake tensors) and measured",
    )
    parser.add_argument(
        "--roofline", nargs="?", const="local", metavar="DEVICE", type=_roofline_device,
        help="also draw each target's roofline: per layer its FLOPs, bytes, intensity, the time the device allows "
        "and the bound, with --layer-latency how close each layer came, with --train the step's MFU; DEVICE is a "
        "device of docs/devices.md (H100-SXM, A100-80GB, ...) or 'local', this machine with its ceilings measured "
        "once (the default; a target's own roofline option wins)",
    )
    parser.add_argument(
        "--plan", action="store_true",
        help="also plan the training: per policy (precision, optimizer, checkpointing, sharding) the largest batch "
        "(and sequence) whose estimated step fits the memory budget (train_memory or the plan's memory)",
    )
    parser.add_argument(
        "--receptive-field-notes", action="store_true",
        help="also list where a convolutional model's receptive field could not be derived (the "
        "editor's torchscan.receptiveFieldNotes; off by default)",
    )
    parser.add_argument(
        "--html",
        metavar="OUT.html",
        help="also write an offline HTML report (one target: OUT.html; several: OUT.<target>.html, "
        "OUT.<file>.<target>.html where two files have a target of the same name)",
    )
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the scan; returns the exit status."""
    out = Output(sys.stderr)
    try:
        return asyncio.run(_scan(args, out, sys.stdout))
    except KeyboardInterrupt:
        print("torchscan-lsp: error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # stdout's reader stopped reading (``scan ... | head``): no error of ours, and the output
        # still buffered must not fail again when the interpreter flushes it at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # what a shell reports for a program ended by SIGPIPE
    except Exception as error:  # noqa: BLE001 - never a traceback of ours
        print(f"torchscan-lsp: error: internal error: {type(error).__name__}: {error}", file=sys.stderr)
        return 2


def _roofline_device(text: str) -> str:
    """``--roofline DEVICE``: checked as the ``roofline`` option is (a usage error names the closest device)."""
    from torchscan_lsp.session.settings import roofline_setting

    try:
        return roofline_setting(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("setting torchscan.roofline: ")) from None


def _measurements(args: argparse.Namespace) -> list[str]:
    flags = (("latency", args.latency), ("memory", args.memory), ("layer_latency", args.layer_latency),
             ("train", args.train), ("roofline", args.roofline is not None))
    return [name for name, flag in flags if flag]


def _targets(session: Session, documents: list[Document], explicit: set[str], wanted: str | None,
             out: Output) -> list[TargetState]:
    """The target states to analyse, in file and line order; each file's problems reported (with
    ``wanted``, only those that concern it: :func:`_concerns`), and a file named on the command line
    (``explicit``) without the target asked for."""
    states = []
    for document in documents:
        shown = display(Path(document.path))
        problems = [p for p in document.problems if _concerns(p, wanted)]
        for problem in problems:
            out.problem(shown, problem.line, problem.message, problem.severity)
        found = session.store.states_in(document.root, document.rel)
        chosen = [s for s in found if wanted is None or s.key.name == wanted]
        errors = [p for p in problems if str(getattr(p, "severity", "error")) == "error"]
        if not chosen and document.path in explicit and not errors:
            out.problem(shown, 1, no_target_message([s.key.name for s in found], wanted))
        states += chosen
    return states


def _concerns(problem: Any, wanted: str | None) -> bool:
    """Whether a file's ``problem`` counts when only the target ``wanted`` is scanned (``None``:
    every target): the problems of that target, and the errors of the whole file (a syntax error
    hides every target), but not another target's, nor a stray pragma's warning."""
    if wanted is None:
        return True
    concerned = getattr(problem, "target", None)
    if concerned is not None:
        return concerned == wanted
    return str(getattr(problem, "severity", "error")) == "error"


async def _scan(args: argparse.Namespace, out: Output, stdout: TextIO) -> int:
    paths = list(args.paths)
    root = Path(args.root).resolve() if args.root else find_root(paths)
    session, problems = command_session(str(root), python=args.python, timeout=args.timeout,
                                        memory_mb=args.memory_limit_mb, roofline=args.roofline,
                                        compare_with="off")  # (check compares)
    out.places = Places(session)
    files = python_files(paths)
    documents, unreadable = session.open_files(files, str(root))  # each under its root, not always ``root``
    broken = _broken_roots(session, [str(root), *(d.root for d in documents)], out)
    for problem in problems:
        out.problem("torchscan-lsp", None, problem, "warning")
    for path, problem in unreadable:
        out.problem(display(path), 1 if problem.startswith("cannot decode") else None, problem)
    # the files of a root whose table is broken are not analysed; those of other roots are, each
    # file as when it is scanned alone
    documents = [d for d in documents if d.root not in broken]
    states = _targets(session, documents, {str(f.path) for f in files if f.explicit}, args.target, out)
    if not states:
        if not out.failed:
            message = f"no target named '{args.target}' found" if args.target else NO_TARGET
            out.problem(", ".join(display(p) for p in paths), None, message)
        if args.html:
            write_html(Path(args.html), session, [], out)  # says that no report was written
        if args.format == "json":
            print("[]", file=stdout)  # stdout stays one JSON array
        return 1

    measure = _measurements(args)
    time_alone(session, measure)
    session.plans.every = args.plan
    by_file = {(d.root, d.rel): d for d in documents}
    for state in states:
        session.analyse(by_file[state.key.root, state.key.file], [state.key.name], measure=measure)
    results = await _show_in_order(session, states, out, stdout, tables=args.format == "table",
                                   receptive_field_notes=args.receptive_field_notes)
    if args.html:
        write_html(Path(args.html), session, [(s, e) for s, e in zip(states, results) if e.get("ok")], out,
                   receptive_field_notes=args.receptive_field_notes)
    if args.format == "json":
        json.dump(results, stdout, indent=2, allow_nan=False, default=str)
        stdout.write("\n")
    return 1 if out.failed else 0


def _broken_roots(session: Session, roots: list[str], out: Output) -> set[str]:
    """The ``roots`` (each once) whose ``[tool.torchscan-lsp]`` table is broken, each of its
    problems reported at its line."""
    broken = set()
    for root in dict.fromkeys(roots):
        config_error = session.workspace_config(root).error
        if config_error is not None:
            broken.add(root)
            for problem in config_error.problems:
                out.problem(display(config_error.path), problem.line, problem.message)
    return broken


async def _show_in_order(session: Session, states: list[TargetState], out: Output, stdout: TextIO, *,
                         tables: bool, receptive_field_notes: bool = False) -> list[dict[str, Any]]:
    """Wait for each target's job in order and show its result as soon as it and the ones before it
    are done. With ``tables``, the table module (whose package imports torch) is imported meanwhile,
    overlapping the warm worker's start."""
    printer = asyncio.ensure_future(asyncio.to_thread(importlib.import_module, "torchscan_lsp.engine.reporting.table")) \
        if tables else None
    results: list[dict[str, Any]] = []
    try:
        for state in states:
            await session.finished(state)
            await session.plans.finished(state)  # asked for (--plan), or by the target's plan options
            if printer is not None:
                await printer
            if state.error is None and state.view is None:  # its job never ran (it was cancelled)
                result: dict[str, Any] = dict(failure(state.key.name, "cancelled", "the analysis did not run"))
            else:
                result = dict(state.error if state.error is not None else state.view.result)
                if state.error is None and "plan" in state.measurements:
                    result["measurements"] = {**(result.get("measurements") or {}), "plan": state.measurements["plan"]}
            # What the model printed goes to stderr: stdout carries only the tables or the JSON.
            # A job stopped or killed ends its output with the stack dump that located the error.
            tail = result.pop("log_tail", "")
            if tail and (result.get("error") or {}).get("kind") not in STOPPED_KINDS:
                sys.stderr.write(tail if tail.endswith("\n") else tail + "\n")
                sys.stderr.flush()
            shown = display(Path(state.key.root, state.key.file))
            results.append({"file": shown, **result})
            if not result.get("ok"):
                report_failure(out, Path(state.key.root), shown, state.target, result)
                continue
            report_measurement_problems(out, Path(state.key.root), shown, state.target, result)
            # an exceeded budget is said as check says it, without check's exit status: scan reports
            for found in budget_findings(state, session.target_options(state), session.settings.headline):
                out.problem(shown, found.line, found.message, "warning" if found.severity == "warning" else "info")
            if tables:
                print_table(stdout, shown, state, result, headline=session.settings.headline,
                            receptive_field_notes=receptive_field_notes, places=out.places)
                stdout.flush()
    finally:
        session.shutdown()
    return results

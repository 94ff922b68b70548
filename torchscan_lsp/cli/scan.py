"""``torchscan-lsp scan PATH...``: the editor's analysis, in a terminal.

Finds the annotated targets in each file (or in the ``.py`` files under each directory), runs each
one in a worker process through :func:`torchscan_lsp.worker.client.run` — the path the editor's
analyses take: a fresh child forked from a warm parent, under a time and a memory limit — and prints
its summary table, or all results as one JSON array.

Every problem is one line on stderr, ``FILE:LINE: error: MESSAGE`` (or ``warning``), and any error
makes the exit status 1; a usage error exits with 2. Tracebacks of the user's code are summarised to
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

from torchscan_lsp.contract import format as fmt
from torchscan_lsp.contract.metrics import metric_value
from torchscan_lsp.targets import (
    Target,
    WorkspaceConfigError,
    find_targets,
    load_workspace_defaults,
    merge_options,
)

_SKIPPED_DIRS = {"site-packages", "dist-packages", "node_modules", "__pycache__", "build", "dist"}
_ERROR_KINDS = {
    "import": "cannot import the module",
    "factory": "{target} failed",
    "forward": "the forward pass of {target} failed",
    "options": "{target}",
    "timeout": "{target} timed out",
    "memory": "{target} ran out of memory",
    "crash": "{target} crashed",
    "cancelled": "{target} was cancelled",
    "strict": "{target} (strict)",
}
_STOPPED_KINDS = {"timeout", "memory", "crash", "cancelled"}
DEFAULT_TIMEOUT_S = 60.0
"""Wall-clock limit of one target's analysis, as in the editor (``torchscan.timeoutSeconds``)."""
DEFAULT_MEMORY_MB = 8192.0
"""Memory limit of one target's analysis, as in the editor (``torchscan.memoryLimitMb``)."""
MAX_PARALLEL_JOBS = 4
"""Targets analysed at once (timing measurements always run one at a time)."""


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
    parser.add_argument("paths", nargs="+", metavar="PATH", help="Python files or directories")
    parser.add_argument("--target", metavar="NAME", help="only the target with this name")
    parser.add_argument(
        "--format", choices=("table", "json"), default="table", help="output format (default: table)"
    )
    parser.add_argument(
        "--root",
        metavar="DIR",
        help="workspace root (default: the nearest directory above the first PATH that holds "
        "pyproject.toml or .git, else the current directory)",
    )
    parser.add_argument("--latency", action="store_true", help="also measure the model's latency")
    parser.add_argument("--memory", action="store_true", help="also measure peak memory")
    parser.add_argument(
        "--layer-latency", action="store_true", help="also measure each leaf module's latency"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="wall-clock limit of each target's analysis (default: the [tool.torchscan-lsp] "
        f"timeout, else {DEFAULT_TIMEOUT_S:g}); a target's own timeout option wins",
    )
    parser.add_argument(
        "--memory-limit-mb",
        type=float,
        metavar="MIB",
        help=f"memory limit of each target's analysis in MiB (default: {DEFAULT_MEMORY_MB:g})",
    )
    parser.add_argument(
        "--html",
        metavar="OUT.html",
        help="also write an offline HTML report (one target: OUT.html; several: OUT.<target>.html)",
    )
    parser.set_defaults(run=run)
    return parser


class _Output:
    """Collects problems (to stderr, one line each) and tracks whether any was an error."""

    def __init__(self, err: TextIO):
        self.err = err
        self.failed = False

    def problem(self, file: str, line: int | None, message: str, severity: str = "error") -> None:
        if severity == "error":
            self.failed = True
        where = f"{file}:{line}" if line else file
        text = " ".join(str(message).split())
        print(f"{where}: {severity}: {text}", file=self.err, flush=True)


def run(args: argparse.Namespace) -> int:
    """Run the scan; returns the exit status."""
    out = _Output(sys.stderr)
    try:
        return _scan(args, out, sys.stdout)
    except KeyboardInterrupt:
        print("torchscan-lsp: error: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - never a traceback of ours
        print(f"torchscan-lsp: error: internal error: {type(error).__name__}: {error}", file=sys.stderr)
        return 2


def find_root(paths: list[Path]) -> Path:
    """The workspace root for ``paths``: the nearest ``pyproject.toml``/``.git`` directory above the
    first one, else the current directory when it contains them all, else the first one's folder."""
    cwd = Path.cwd().resolve()
    first = paths[0].resolve() if paths else cwd
    start = first if first.is_dir() else first.parent
    for directory in (start, *start.parents):
        if (directory / "pyproject.toml").is_file() or (directory / ".git").exists():
            return directory
    if all(_is_under(p.resolve(), cwd) for p in paths):
        return cwd
    return start


def _is_under(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def _display(path: Path) -> str:
    """``path`` relative to the current directory when it lies below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _python_files(directory: Path) -> list[Path]:
    found = []
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(
            d for d in dirnames if not d.startswith(".") and d not in _SKIPPED_DIRS
        )
        for name in sorted(filenames):
            if name.endswith(".py"):
                found.append(Path(dirpath) / name)
    return found


def _scan(args: argparse.Namespace, out: _Output, stdout: TextIO) -> int:
    paths = [Path(p) for p in args.paths]
    root = Path(args.root).resolve() if args.root else find_root(paths)
    try:
        defaults = load_workspace_defaults(root)
    except WorkspaceConfigError as error:
        out.problem(_display(error.path), error.line, error.message)
        return 1

    measure = [
        name
        for name, flag in (
            ("latency", args.latency),
            ("memory", args.memory),
            ("layer_latency", args.layer_latency),
        )
        if flag
    ]

    # Files to scan: explicit files always; under directories only those that mention torchscan.
    files: list[tuple[Path, bool]] = []
    for path in paths:
        if path.is_dir():
            files.extend((f, False) for f in _python_files(path))
        else:
            files.append((path, True))

    jobs: list[tuple[Path, str, Target]] = []
    for path, explicit in files:
        shown = _display(path)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            out.problem(shown, None, "no such file")
            continue
        except OSError as error:
            out.problem(shown, None, f"cannot read: {error.strerror or error}")
            continue
        try:
            import importlib.util

            source = importlib.util.decode_source(raw)
        except (SyntaxError, UnicodeDecodeError) as error:
            out.problem(shown, 1, f"cannot decode the file: {error}")
            continue
        if not explicit and "torchscan" not in source:
            continue
        scan = find_targets(source, str(path))
        for problem in scan.problems:
            out.problem(shown, problem.line, problem.message, problem.severity)
        targets = scan.targets
        if args.target:
            targets = [t for t in targets if t.name == args.target]
        if not targets and explicit and not scan.errors:
            if args.target and scan.targets:
                names = ", ".join(t.name for t in scan.targets)
                out.problem(shown, 1, f"no target named '{args.target}' (targets here: {names})")
            else:
                out.problem(
                    shown, 1,
                    "no annotated model found; put '# torchscan: input_shape=(...)' on the line "
                    "above a zero-argument model factory or nn.Module class",
                )
        jobs.extend((path, source, t) for t in targets)

    if not jobs:
        if not out.failed:
            where = ", ".join(_display(p) for p in paths)
            wanted = f"target named '{args.target}'" if args.target else "annotated model"
            out.problem(where, None, f"no {wanted} found")
        if args.format == "json":
            print("[]", file=stdout)
        return 1

    limits = _Limits(args, defaults)
    results: list[dict[str, Any]] = []

    def show(path: Path, target: Target, result: dict[str, Any]) -> None:
        shown = _display(path)
        result = cli_messages(result, limits.flags)
        results.append({"file": shown, **result})
        if not result.get("ok"):
            _report_failure(out, root, shown, target, result)
        elif args.format == "table":
            _print_table(stdout, shown, target, result)
            stdout.flush()

    asyncio.run(_run_jobs(root, defaults, jobs, measure, limits, show, tables=args.format == "table"))

    if args.html:
        _write_html(Path(args.html), [e for e in results if e.get("ok")], out)

    if args.format == "json":
        json.dump(results, stdout, indent=2, allow_nan=False, default=str)
        stdout.write("\n")
    return 1 if out.failed else 0


class _Limits:
    """The time and memory limits of each job: ``--timeout``/``--memory-limit-mb``, else the
    workspace's ``timeout`` default, else the editor's defaults; a target's own ``timeout`` wins."""

    def __init__(self, args: argparse.Namespace, defaults: dict[str, Any]):
        self.timeout_s = args.timeout or defaults.get("timeout") or DEFAULT_TIMEOUT_S
        self.memory_mb = args.memory_limit_mb or DEFAULT_MEMORY_MB
        self.flags = {"timeout": "--timeout", "memory": "--memory-limit-mb"}

    def for_target(self, target: Target) -> float:
        """The time limit of ``target``'s job, in seconds."""
        return float(target.options.get("timeout") or self.timeout_s)


async def _run_jobs(
    root: Path, defaults: dict[str, Any], jobs: list[tuple[Path, str, Target]], measure: list[str],
    limits: _Limits, show: Any, *, tables: bool = False,
) -> None:
    """Run each target in its own worker process (forked from a warm parent when possible) and
    call ``show(path, target, result)`` for each, in the order of ``jobs``, as soon as it and the
    ones before it are done.

    Several run at once, except when timing is measured: parallel jobs would slow each other down.
    With ``tables``, the table module (whose package imports torch) is imported meanwhile.
    """
    from torchscan_lsp.worker import client, pool

    timing = {"latency", "layer_latency"}
    timed = bool(timing & set(measure)) or any(timing & set(t.options.get("measure") or ()) for _, _, t in jobs)
    gate = asyncio.Semaphore(1 if timed else min(MAX_PARALLEL_JOBS, os.cpu_count() or 1))

    async def one(path: Path, source: str, target: Target) -> dict[str, Any]:
        options = merge_options(defaults, target.options)
        options.pop("timeout", None)  # a limit of the job, not an analysis option
        job = {
            "workspace_root": str(root),
            "file": str(path.resolve()),
            "target": target.name,
            "options": options,
            "source_text": source,
            "measure": measure,
        }
        async with gate:
            return await client.run(
                job, python=sys.executable, timeout_s=limits.for_target(target), memory_mb=limits.memory_mb
            )

    tasks = [asyncio.ensure_future(one(*job)) for job in jobs]
    # Importing torch here takes about as long as the warm worker's start: overlap the two.
    printer = (
        asyncio.ensure_future(asyncio.to_thread(importlib.import_module, "torchscan_lsp.engine.table"))
        if tables else None
    )
    try:
        for (path, _, target), task in zip(jobs, tasks):
            result = await task
            if printer is not None:
                await printer
            # What the model printed goes to stderr: stdout carries only the tables or the JSON.
            # A job stopped or killed ends its output with the stack dump that located the error.
            tail = result.pop("log_tail", "")
            if tail and (result.get("error") or {}).get("kind") not in _STOPPED_KINDS:
                sys.stderr.write(tail if tail.endswith("\n") else tail + "\n")
                sys.stderr.flush()
            show(path, target, result)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        pool.shutdown()


def cli_messages(result: dict[str, Any], flags: dict[str, str]) -> dict[str, Any]:
    """``result`` with the advice of a timeout or memory failure naming the command-line flag
    (``flags``: error kind to flag, e.g. ``{"timeout": "--timeout"}``) instead of the editor
    setting, which a terminal user has no way to change."""
    error = result.get("error")
    if not isinstance(error, dict) or error.get("kind") not in flags:
        return result
    message = str(error.get("message") or "")
    for setting in ("torchscan.timeoutSeconds", "torchscan.memoryLimitMb"):
        message = message.replace(setting, flags[error["kind"]])
    return {**result, "error": {**error, "message": message}}


def _report_failure(
    out: _Output, root: Path, shown: str, target: Target, result: dict[str, Any]
) -> None:
    error = result.get("error") or {}
    file = error.get("file")
    line = error.get("line")
    if file:
        where = _display(root / file)
    else:
        where, line = shown, line or target.line
    kind = error.get("kind", "crash")
    detail = error.get("message") or ""
    if kind in ("options", "result"):  # the message says it all, naming the target
        message = detail
    else:
        lead = _ERROR_KINDS.get(kind, "{target}").format(target=f"'{target.name}'")
        type_name = error.get("type") if kind != "strict" else None
        message = f"{lead}: {type_name}: {detail}" if type_name else f"{lead}: {detail}"
    out.problem(where, line, message)


def _write_html(path: Path, results: list[dict[str, Any]], out: _Output) -> None:
    """Render each successful result (with its measurements attached) as an offline HTML file.

    One result goes to ``path`` itself; several go to ``<stem>.<target>.html`` beside it, so no
    report overwrites another. Write errors are reported like any other problem (exit status 1).
    """
    from torchscan_lsp.engine.html import render_report

    for entry in results:
        target_path = path if len(results) == 1 else path.with_name(f"{path.stem}.{entry['target']}{path.suffix}")
        measurements = entry.get("measurements") or {}
        attached = {
            name: report
            for name, report in measurements.items()
            if name in ("latency", "memory", "layer_latency") and isinstance(report, dict) and "error" not in report
        }
        try:
            render_report(entry["report"], target_path, title=f"{entry['file']}: {entry['target']}", **attached)
        except (OSError, ValueError) as error:
            out.problem(str(target_path), None, f"cannot write the HTML report: {error}")
            continue
        print(f"wrote {target_path}", file=out.err, flush=True)


def _print_table(stdout: TextIO, shown: str, target: Target, result: dict[str, Any]) -> None:
    from torchscan_lsp.engine.table import format_diagnostics, format_info

    title = f"{shown}:{target.line}: {target.name}"
    print(title, file=stdout)
    report = result["report"]
    print(format_info(report, diagnostics_footer=False), file=stdout)
    for line in format_diagnostics(report.get("diagnostics") or []):
        print(line, file=stdout)
    measurements = result.get("measurements") or {}
    for line in _measurement_lines(measurements):
        print(line, file=stdout)
    print(file=stdout)


def _measurement_lines(measurements: dict[str, Any]) -> list[str]:
    lines = []
    for name, report in measurements.items():
        if not isinstance(report, dict):
            continue
        if "error" in report and isinstance(report["error"], dict):
            err = report["error"]
            lines.append(f"{name}: unavailable ({err.get('type')}: {err.get('message')})")
            continue
        if name == "memory":
            peak = report.get("peak_bytes")
            delta = report.get("delta_bytes")
            if isinstance(peak, int):
                lines.append(
                    f"Peak memory ({report.get('device')}): {fmt.byte_size(peak)}"
                    + (f" (+{fmt.byte_size(delta)} over baseline)" if isinstance(delta, int) else "")
                )
            continue
        totals = report.get("totals") or {}
        for key, label in (
            ("latency", "Latency (median)"),
            ("latency_iqr", "Latency IQR"),
            ("first_call_latency", "First call"),
            ("model_latency", "Model latency"),
            ("layer_latency_sum", "Sum of layer latencies"),
        ):
            metric = totals.get(key)
            if isinstance(metric, dict) and metric_value(metric) is not None:
                lines.append(f"{label}: {fmt.metric_text(metric, 'seconds')}")
    return lines

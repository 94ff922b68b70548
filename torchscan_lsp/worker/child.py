"""The worker process entry point: ``python -m torchscan_lsp.worker``.

Usage::

    python -m torchscan_lsp.worker --job JOB.json --result RESULT.json [--log LOG.txt]
    python -m torchscan_lsp.worker --render-html JOB.json OUT.html --result RESULT.json [--log LOG]

(the rendering job holds ``report``, ``measurements``, ``headline`` and ``findings``).

Before anything of the user's runs, file descriptors 1 and 2 are pointed at the log file (or at
the null device), so nothing the model prints can reach whoever reads this process's stdout. The
result goes to its own file, written atomically (a temporary name, then a rename), so a reader
never sees half a document. An exception that escapes the runner becomes a result of kind
``crash`` carrying the exception's type and message.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from torchscan_lsp.contract.messages import failure, render_arguments
from torchscan_lsp.worker.limits import die_with_parent


def _redirect_output(log_path: str | None) -> None:
    """Point fds 1 and 2 (and ``sys.stdout``/``sys.stderr``) at ``log_path`` or the null device."""
    target = os.open(log_path or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(target, 1)
    os.dup2(target, 2)
    os.close(target)
    sys.stdout = os.fdopen(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)


def _exit_with_parent(poll_s: float = 1.0) -> None:
    """Exit at once when the process that started this one goes away (a killed server must not
    leave a model running with nobody to enforce its time limit)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="torchscan-parent-watch", daemon=True).start()


def write_result(path: str, result: dict[str, Any]) -> None:
    """Write ``result`` as compact JSON to ``path`` atomically (temporary name, then rename):
    compact, because the server's result cache keeps the text as it was read
    (:mod:`.result_text`)."""
    temporary = Path(path).with_suffix(".partial")
    temporary.write_text(json.dumps(result, allow_nan=False, default=str, separators=(",", ":")), encoding="utf-8")
    os.replace(temporary, path)


def _crash(target: Any, error: BaseException) -> dict[str, Any]:
    """A ``crash`` result for an exception that escaped the runner."""
    return dict(failure(target, "crash", f"the worker failed: {type(error).__name__}: {error}",
                        type_name=type(error).__name__))


def run_job_file(job_path: str) -> dict[str, Any]:
    """Run the job stored as JSON at ``job_path``; any exception becomes a ``crash`` result."""
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    root = job.get("workspace_root")
    if root and root not in sys.path:
        sys.path.insert(0, root)
    try:
        from torchscan_lsp.worker.runner import run_job

        return run_job(job)
    except BaseException as error:  # noqa: BLE001 - anything, even SystemExit from the model, is a result
        traceback.print_exc()
        return _crash(job.get("target"), error)


def _render_html(job_path: str, html_path: str) -> dict[str, Any]:
    try:
        from torchscan_lsp import render_report

        job = json.loads(Path(job_path).read_text(encoding="utf-8"))
        render_report(job["report"], html_path, title=job.get("title"), **render_arguments(job))
        return {"ok": True, "target": None, "path": html_path}
    except BaseException as error:  # noqa: BLE001 - reported to the server, never raised
        traceback.print_exc()
        return _crash(None, error)


def main(argv: list[str] | None = None) -> int:
    """Run one job (or one HTML rendering); returns 0 once a result was written, 2 on bad usage."""
    parser = argparse.ArgumentParser(prog="python -m torchscan_lsp.worker")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--job", help="path of the job JSON")
    action.add_argument("--render-html", nargs=2, metavar=("JOB", "HTML"), help="render a report as HTML")
    parser.add_argument("--result", required=True, help="path the result JSON is written to")
    parser.add_argument("--log", help="file that receives stdout and stderr (default: discarded)")
    args = parser.parse_args(argv)
    _redirect_output(args.log)
    _exit_with_parent()
    die_with_parent(os.getppid())
    # A crash or a stop at a limit leaves the Python stack in the log (SIGUSR1: dump it now),
    # from which the server takes the line to report.
    faulthandler.enable()
    faulthandler.register(signal.SIGUSR1, all_threads=False)
    result = run_job_file(args.job) if args.job else _render_html(*args.render_html)
    write_result(args.result, result)
    return 0

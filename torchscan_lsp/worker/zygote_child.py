"""A job's child of the warm parent: what the fork runs, and what the parent keeps of its output.

:func:`run_child` runs the job exactly as ``python -m torchscan_lsp.worker`` does (:mod:`.child`),
in the environment of the server that asked for it when the request carries one (a shared warm
parent serves several servers, :mod:`.shared`); :class:`Child` is the parent's record of it.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

from torchscan_lsp.contract.messages import WarmRequest
from torchscan_lsp.worker import preload
from torchscan_lsp.worker.limits import blame_the_memory_limit, cap_address_space, isolate_forked_child

LOG_KEEP_BYTES = 64 * 1024
"""How much of the end of a child's output is kept in its log file."""


@dataclass
class Child:
    """A running child: its request id, the channel that asked for it, its output pipe and the kept
    end of its output."""

    request_id: Any
    channel: Any
    log_path: str
    output_fd: int
    tail: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    def keep(self, chunk: bytes) -> None:
        """Append ``chunk``, dropping the oldest bytes beyond :data:`LOG_KEEP_BYTES`."""
        self.tail += chunk
        excess = len(self.tail) - LOG_KEEP_BYTES
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess


def _job_folders(request: WarmRequest) -> list[str]:
    """The folders whose files a job imports first: the workspace root and the target's folder."""
    try:
        with open(request["job"], encoding="utf-8") as handle:
            file = json.load(handle).get("file")
    except (OSError, ValueError, KeyError, AttributeError):
        file = None
    return [request.get("cwd") or "", os.path.dirname(file) if isinstance(file, str) else ""]


def run_child(request: WarmRequest, output_fd: int, inherited: list[int], parent: int, report: str) -> None:
    """The forked child: isolate, run the job, write its result and its report of the libraries it
    imported (to ``report``); never returns."""
    status = 70
    before = set(sys.modules)
    try:
        isolate_forked_child(inherited, parent)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.close(output_fd)
        sys.stdout = os.fdopen(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
        faulthandler.enable()
        faulthandler.register(signal.SIGUSR1, all_threads=False)
        if isinstance(request.get("env"), dict):  # the requesting server's, not the first one's
            os.environ.clear()
            os.environ.update(request["env"])
            tempfile.tempdir = None  # found again from this environment's TMPDIR
        os.chdir(request.get("cwd") or "/")
        memory_mb = request.get("memory_mb")
        import torch

        if not torch.cuda.is_available():  # CUDA reserves far more address space than it uses
            cap_address_space(memory_mb)

        from torchscan_lsp.worker.child import run_job_file, write_result

        preload.drop_shadowed(preload.loaded_packages(), _job_folders(request))
        result = run_job_file(request["job"])
        if memory_mb:
            blame_the_memory_limit(result, memory_mb)
        write_result(request["result"], result)
        status = 0
        try:
            preload.write_report(report, before, request.get("cwd"))
        except Exception as error:  # noqa: BLE001 - the job is done; only the learning is lost
            print(f"torchscan: could not report the imported libraries: {error}", file=sys.stderr)
    finally:
        try:
            sys.stdout.flush()
        finally:
            os._exit(status)

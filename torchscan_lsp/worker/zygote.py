"""The warm parent: ``python -m torchscan_lsp.worker.zygote``, one per worker interpreter.

It imports torch and the engine once and runs one small analysis on a single thread on the CPU
(so first-call costs are paid once, while no intra-op thread pool and no CUDA state exist to be
inherited), then forks one fresh child per job. A child starts with torch
already imported and no workspace module loaded, so an edited model file is always imported anew,
and whatever the model does (crash, exit, leak, hang) ends with the child.

Protocol: JSON lines. The server writes requests on stdin::

    {"id": 7, "job": "/tmp/.../job.json", "result": "/tmp/.../result.json",
     "log": "/tmp/.../log.txt", "cwd": "/abs/root", "memory_mb": 8192}

and reads events on stdout: ``{"event": "ready", "pid": P}`` once the imports are done (or
``{"event": "failed", "message": ...}`` and exit status 1), then per request
``{"event": "started", "id": 7, "pid": C}`` and, when the child ended and was reaped,
``{"event": "exited", "id": 7, "pid": C, "status": S}`` (``S`` as in
:func:`os.waitstatus_to_exitcode`: negative for a signal).

**Learned libraries.** What a request ``{"import": [entries], "root": "/abs/root"}`` names (the
import statements of the workspace's annotated files) is imported into this parent before it
forks a job while none runs, so that even the first job finds it loaded. After its job a child
reports the modules it imported from outside the workspace; they, and those of a request
``{"preload": [names], "root": "/abs/root" or null}``, are tried in a probe child and then imported
into this parent (:mod:`.learner`, which sends ``{"event": "preloaded", ...}``), so later children
start with them. A child drops a preloaded
package that a file of its workspace now shadows. When a preloaded file changed on disk (or a
preload did start a thread here after all) this parent can no longer fork fresh children: it sends
``{"event": "retire", "message": ...}`` and answers every later request with
``{"event": "exited", "id": 7, "pid": null, "status": null, "retired": true, "message": ...}``,
while the children it runs finish; the server starts a successor.

A child runs the job exactly as ``python -m torchscan_lsp.worker`` does (:mod:`.child`), in its own
session (so the server can kill its whole process group), with ``SIGKILL`` as its parent-death
signal. Its fds 1 and 2 are a pipe this parent drains; the last :data:`LOG_KEEP_BYTES` bytes are
written to the request's log file when the child ends, so a model printing without end neither
blocks nor fills a disk. The warm parent itself dies with the server (parent-death signal) and,
when its stdin closes, kills every child first.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import selectors
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, TextIO

from torchscan_lsp.contract.messages import WarmRequest
from torchscan_lsp.worker import preload
from torchscan_lsp.worker.learner import Learner
from torchscan_lsp.worker.limits import blame_the_memory_limit, cap_address_space, die_with_parent, isolate_forked_child
from torchscan_lsp.worker.warm_up import import_base, warm_up

LOG_KEEP_BYTES = 64 * 1024
"""How much of the end of a child's output is kept in its log file."""


@dataclass
class _Child:
    """A running child: its request id, its output pipe and the kept end of its output."""

    request_id: Any
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


def _run_child(request: WarmRequest, output_fd: int, inherited: list[int], parent: int, report: str,
               packages: list[str]) -> None:
    """The forked child: isolate, run the job, write its result and its report of the libraries it
    imported (to ``report``); never returns. ``packages``: the parent's learned top-level packages."""
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
        os.chdir(request.get("cwd") or "/")
        memory_mb = request.get("memory_mb")
        import torch

        if not torch.cuda.is_available():  # CUDA reserves far more address space than it uses
            cap_address_space(memory_mb)

        from torchscan_lsp.worker.child import run_job_file, write_result

        preload.drop_shadowed(packages, _job_folders(request))
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


class Zygote:
    """The warm parent's event loop: requests in, children forked, exits reported.

    Args:
        events: where events are written (the private copy of the original stdout).
        scratch: a private folder for the children's reports (see :class:`~.learner.Learner`).
    """

    def __init__(self, events: TextIO, scratch: str) -> None:
        self.events = events
        self.children: dict[int, _Child] = {}
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        self.pending = b""
        self.learner = Learner(scratch, self.send)
        self.retired: str | None = None

    def send(self, **event: Any) -> None:
        """Write one event line."""
        self.events.write(json.dumps(event) + "\n")
        self.events.flush()

    def serve(self) -> int:
        """Run until stdin closes; then kill every child and return 0."""
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # the wake-up fd does the work
        self.selector.register(0, selectors.EVENT_READ, "requests")
        self.selector.register(self.wake_r, selectors.EVENT_READ, "signal")
        while True:
            idle = not self.children and self.learner.importing
            ready = self.selector.select(0 if idle else None)
            if not ready and idle:  # no job runs and nothing waits: preload a little, then look again
                reason = self.learner.import_some(lambda: bool(self.selector.select(0)))
                if reason is not None:
                    self._retire(reason)
                self._learn()
                continue
            for key, _ in ready:
                if key.data == "requests":
                    if not self._read_requests():
                        self._kill_all()
                        return 0
                elif key.data == "signal":
                    while True:
                        try:
                            if not os.read(self.wake_r, 4096):
                                break
                        except BlockingIOError:
                            break
                    self._reap()
                else:
                    self._drain(key.data)

    def _read_requests(self) -> bool:
        chunk = os.read(0, 65536)
        if not chunk:
            return False
        self.pending += chunk
        while b"\n" in self.pending:
            line, self.pending = self.pending.split(b"\n", 1)
            if not line.strip():
                continue
            request = json.loads(line)
            if "import" in request:
                self.learner.import_first(list(request.get("import") or []), request.get("root"))
            elif "preload" in request:
                self.learner.offer(list(request.get("preload") or []), request.get("root"))
                self._learn()
            else:
                self._start(request)
        return True

    def _inherited(self) -> list[int]:
        """This parent's file descriptors, which a forked child closes."""
        fds = [self.wake_r, self.wake_w, self.selector.fileno(), self.events.fileno()]
        return fds + [c.output_fd for c in self.children.values() if c.output_fd >= 0]

    def _learn(self) -> None:
        # Only while no job runs: learning must never take a core from an analysis being waited for.
        if self.retired is None and not self.children:
            self.learner.maybe_probe(self._inherited())

    def _retire(self, reason: str) -> None:
        self.retired = reason
        self.send(event="retire", message=reason)  # the server logs it

    def _start(self, request: WarmRequest) -> None:
        changed = self.learner.stamps.changed() if self.retired is None else None
        if changed is not None:
            self._retire(f"{changed} changed on disk after it was preloaded")
        if self.retired is None and not self.children and self.learner.direct_waiting:
            reason = self.learner.import_direct()  # what the workspace imports, before the job that needs it
            if reason is not None:
                self._retire(reason)
        if self.retired is not None:
            self.send(event="exited", id=request.get("id"), pid=None, status=None, retired=True, message=self.retired)
            return
        read_fd, write_fd = os.pipe()
        inherited = [read_fd, *self._inherited()]
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError as error:  # out of processes or memory: this job fails, the parent lives on
            os.close(read_fd)
            os.close(write_fd)
            self.send(event="exited", id=request.get("id"), pid=None, status=None, message=f"fork failed: {error}")
            return
        if pid == 0:
            _run_child(request, write_fd, inherited, parent, self.learner.report_path(os.getpid()),
                       self.learner.packages())
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        self.children[pid] = _Child(request.get("id"), request.get("log") or os.devnull, read_fd)
        self.selector.register(read_fd, selectors.EVENT_READ, pid)
        self.send(event="started", id=request.get("id"), pid=pid)

    def _drain(self, pid: int) -> None:
        """Read what child ``pid`` wrote so far; stop watching its pipe at end of file."""
        child = self.children.get(pid)
        if child is None or child.output_fd < 0:
            return
        while True:
            try:
                chunk = os.read(child.output_fd, 65536)
            except BlockingIOError:
                return
            if not chunk:
                self.selector.unregister(child.output_fd)
                os.close(child.output_fd)
                child.output_fd = -1
                return
            child.keep(chunk)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.learner.probe_pid:
                self.learner.probe_ended(os.waitstatus_to_exitcode(status))
                self._learn()
                continue
            child = self.children.pop(pid, None)
            if child is None:
                continue
            self._drain_final(pid, child)
            self.send(event="exited", id=child.request_id, pid=pid, status=os.waitstatus_to_exitcode(status))
            self.learner.child_ended(pid)
            self._learn()

    def _drain_final(self, pid: int, child: _Child) -> None:
        """Keep the last output of an ended child and write it to its log file."""
        self.children[pid] = child
        self._drain(pid)
        del self.children[pid]
        if child.output_fd >= 0:  # a process the model started still holds the pipe open
            self.selector.unregister(child.output_fd)
            os.close(child.output_fd)
        header = f"[... {child.dropped} bytes of output dropped ...]\n".encode() if child.dropped else b""
        try:
            with open(child.log_path, "ab") as log:
                log.write(header + bytes(child.tail))
        except OSError:
            pass  # the job's folder is gone: the server stopped waiting for it

    def _kill_all(self) -> None:
        for pid in [*self.children, *([self.learner.probe_pid] if self.learner.probe_pid else [])]:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def main(argv: list[str] | None = None) -> int:
    """Start the warm parent; returns its exit status (1 when the imports failed).

    ``--scratch DIR``: the private folder for the children's reports (the server makes and removes
    it); without it a temporary folder is made here and removed at exit.
    """
    parser = argparse.ArgumentParser(prog="python -m torchscan_lsp.worker.zygote")
    parser.add_argument("--scratch", help="private folder for the children's reports")
    args = parser.parse_args(argv)
    events = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # stray prints (torch's warnings, say) must not corrupt the event channel
    die_with_parent(os.getppid())
    try:
        import_base()
        warm_up()
        import torch

        if torch.cuda.is_initialized():  # children could not use CUDA: "cannot re-initialize in forked subprocess"
            raise RuntimeError("CUDA was initialised while warming up")
    except BaseException as error:  # noqa: BLE001 - reported, then the server falls back to cold starts
        events.write(json.dumps({"event": "failed", "message": f"{type(error).__name__}: {error}"}) + "\n")
        events.flush()
        return 1
    scratch = args.scratch or tempfile.mkdtemp(prefix="torchscan-warm-")
    try:
        zygote = Zygote(events, scratch)
        # Ready without torch._dynamo and the training tools (which import it), seconds to import
        # that no forward job needs: they are preloaded like learned modules once the first job has
        # ended, so the training estimate that follows finds them loaded.
        zygote.learner.offer(["torch._dynamo", "torchscan_lsp.engine.training"], None)
        zygote.send(event="ready", pid=os.getpid())
        return zygote.serve()
    finally:
        if not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

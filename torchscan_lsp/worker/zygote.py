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

A child runs the job exactly as ``python -m torchscan_lsp.worker`` does (:mod:`.child`), in its own
session (so the server can kill its whole process group), with ``SIGKILL`` as its parent-death
signal. Its fds 1 and 2 are a pipe this parent drains; the last :data:`LOG_KEEP_BYTES` bytes are
written to the request's log file when the child ends, so a model printing without end neither
blocks nor fills a disk. The warm parent itself dies with the server (parent-death signal) and,
when its stdin closes, kills every child first.
"""

from __future__ import annotations

import faulthandler
import json
import os
import selectors
import signal
import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

from torchscan_lsp.contract.messages import WarmRequest
from torchscan_lsp.worker.limits import cap_address_space, die_with_parent, is_out_of_memory, memory_message

LOG_KEEP_BYTES = 64 * 1024
"""How much of the end of a child's output is kept in its log file."""


def preload() -> None:
    """Import everything a job needs, so that children start warm.

    torch must import (else :class:`ImportError` and the like propagate); the project's own
    modules are imported best-effort: one that fails here fails again in the job, which reports it
    on the target like any other worker error. Runs no tensor operation: a parent that ran one
    would hand intra-op thread pools, which do not survive a fork, to its children.
    """
    import importlib

    import torch  # noqa: F401 - the point is the import

    # torch._dynamo is imported lazily by the first tensor made under a dispatch mode (seconds):
    # the crawler makes one in every job.
    for name in ("torch._dynamo", "torch.utils.flop_counter", "torchscan_lsp.engine", "torchscan_lsp.engine.inputs", "torchscan_lsp.engine.latency",
                 "torchscan_lsp.engine.memory", "torchscan_lsp.worker.attribution", "torchscan_lsp.worker.runner",
                 "torchscan_lsp.worker.child", "torchscan_lsp.engine.formulas"):
        try:
            importlib.import_module(name)
        except Exception as error:  # noqa: BLE001 - see the docstring
            print(f"torchscan warm worker: could not preload {name}: {error}", file=sys.stderr)


_WARM_UP_MODEL = """
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)) + x)


class Mixer(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.attention = nn.MultiheadAttention(8, 2, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Dropout(0.1), nn.Linear(16, 8))

    def forward(self, x):
        y = self.norm(x)
        x = x + self.attention(y, y, y)[0]
        return x + self.mlp(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 7, 2, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.block = Block()
        self.mixer = Mixer()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        x = self.block(self.stem(x))
        x = self.mixer(x.flatten(2).transpose(1, 2)).transpose(1, 2).reshape(x.shape)
        return self.head(self.pool(x).flatten(1))


def build():
    return Net()
"""


def warm_up() -> None:
    """Run one small analysis on a single thread, so that first-call costs (dispatcher caches,
    lazily imported modules) are paid here once instead of in every child. Failures are ignored:
    the jobs will report them."""
    import tempfile

    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # no intra-op worker threads exist to be lost across a fork
    try:
        with tempfile.TemporaryDirectory(prefix="torchscan-warm-") as root:
            path = os.path.join(root, "torchscan_warm_up.py")
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(_WARM_UP_MODEL)
            from torchscan_lsp.worker.runner import run_job

            result = run_job({"workspace_root": root, "file": path, "target": "build",
                              "options": {"input_shape": [3, 32, 32]}, "measure": []})
        if not result.get("ok"):
            print(f"torchscan warm worker: warm-up failed: {result.get('error')}", file=sys.stderr)
    except Exception as error:  # noqa: BLE001 - see the docstring
        print(f"torchscan warm worker: warm-up failed: {error}", file=sys.stderr)
    finally:
        torch.set_num_threads(threads)


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


def _run_child(request: WarmRequest, output_fd: int, inherited: list[int], parent: int) -> None:
    """The forked child: isolate, run the job, write its result; never returns."""
    status = 70
    try:
        os.setsid()
        die_with_parent(parent)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in inherited:
            os.close(fd)
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

        result = run_job_file(request["job"])
        if memory_mb and is_out_of_memory(result):
            result["error"]["kind"] = "memory"
            result["error"]["message"] = f"{memory_message(memory_mb)}: {result['error'].get('message')}"
        write_result(request["result"], result)
        status = 0
    finally:
        try:
            sys.stdout.flush()
        finally:
            os._exit(status)


class Zygote:
    """The warm parent's event loop: requests in, children forked, exits reported.

    Args:
        events: where events are written (the private copy of the original stdout).
    """

    def __init__(self, events: TextIO) -> None:
        self.events = events
        self.children: dict[int, _Child] = {}
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        self.pending = b""

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
            for key, _ in self.selector.select():
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
            if line.strip():
                self._start(json.loads(line))
        return True

    def _start(self, request: WarmRequest) -> None:
        read_fd, write_fd = os.pipe()
        inherited = [read_fd, self.wake_r, self.wake_w, self.selector.fileno(), self.events.fileno()]
        inherited += [c.output_fd for c in self.children.values() if c.output_fd >= 0]
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError as error:  # out of processes or memory: this job fails, the parent lives on
            os.close(read_fd)
            os.close(write_fd)
            self.send(event="exited", id=request.get("id"), pid=None, status=None, message=f"fork failed: {error}")
            return
        if pid == 0:
            _run_child(request, write_fd, inherited, parent)
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
            child = self.children.pop(pid, None)
            if child is None:
                continue
            self._drain_final(pid, child)
            self.send(event="exited", id=child.request_id, pid=pid, status=os.waitstatus_to_exitcode(status))

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
        for pid in list(self.children):
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def main() -> int:
    """Start the warm parent; returns its exit status (1 when the imports failed)."""
    events = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # stray prints (torch's warnings, say) must not corrupt the event channel
    die_with_parent(os.getppid())
    try:
        preload()
        warm_up()
        import torch

        if torch.cuda.is_initialized():  # children could not use CUDA: "cannot re-initialize in forked subprocess"
            raise RuntimeError("CUDA was initialised while warming up")
    except BaseException as error:  # noqa: BLE001 - reported, then the server falls back to cold starts
        events.write(json.dumps({"event": "failed", "message": f"{type(error).__name__}: {error}"}) + "\n")
        events.flush()
        return 1
    zygote = Zygote(events)
    zygote.send(event="ready", pid=os.getpid())
    return zygote.serve()


if __name__ == "__main__":
    sys.exit(main())

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

**Shared.** With ``--listen PATH`` it serves every server that connects to the Unix socket ``PATH``
(their relays, :mod:`.relay`; :mod:`.shared` says who shares one) instead of its stdin: each
connection is a channel of the protocol above, with ``ready`` sent as it is accepted, the
``started`` and ``exited`` events of a request sent to the channel that made it, ``preloaded`` and
``retire`` to all. A channel that closes has its children killed. It does not die with the process
that started it: once no channel is left it stays ``linger_s`` seconds (the last
``{"linger_s": N}`` request said how long; ``0`` until one does), then exits, unless a connection
is waiting; one that retired stops listening at once and exits when its last channel closes.
"""

from __future__ import annotations

import argparse
import os
import selectors
import shutil
import signal
import sys
import tempfile
import time
from typing import Any

from torchscan_lsp.contract.messages import WarmRequest
from torchscan_lsp.worker.channels import Channel, Listener
from torchscan_lsp.worker.learner import Learner
from torchscan_lsp.worker.limits import die_with_parent
from torchscan_lsp.worker.warm_up import import_base, warm_up
from torchscan_lsp.worker.zygote_child import Child, run_child


class Zygote:
    """The warm parent's event loop: requests in, children forked, exits reported.

    Args:
        scratch: a private folder for the children's reports (see :class:`~.learner.Learner`).
        channel: the one server's channel (an unshared warm parent), or
        listener: the socket new servers connect to (a shared one).
    """

    def __init__(self, scratch: str, channel: Channel | None = None, listener: Listener | None = None) -> None:
        self.children: dict[int, Child] = {}
        self.channels: dict[int, Channel] = {}
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        self.learner = Learner(scratch, self.broadcast)
        self.retired: str | None = None
        self.listener = listener
        self.linger_s = 0.0
        self.alone_since: float | None = time.monotonic()
        if channel is not None:
            self._open(channel)

    def broadcast(self, **event: Any) -> None:
        """Write one event line to every server."""
        for channel in list(self.channels.values()):
            channel.send(event)

    def _open(self, channel: Channel) -> None:
        self.channels[channel.fd] = channel
        self.selector.register(channel.fd, selectors.EVENT_READ, channel)
        self.alone_since = None

    def accept(self) -> None:
        """Take a waiting connection: it gets ``ready`` and what has been preloaded so far."""
        assert self.listener is not None
        try:
            channel = self.listener.accept()
        except OSError:
            return
        self._open(channel)
        channel.send({"event": "ready", "pid": os.getpid()})
        if self.learner.preloaded:
            channel.send({"event": "preloaded", "modules": self.learner.preloaded,
                          "packages": self.learner.packages(), "skipped": {}})
        if self.retired is not None:
            channel.send({"event": "retire", "message": self.retired})

    def serve(self) -> int:
        """Run until the last server left (stdin closed; or, when shared, no connection for
        ``linger_s``); then kill every child and return 0."""
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # the wake-up fd does the work
        self.selector.register(self.wake_r, selectors.EVENT_READ, "signal")
        if self.listener is not None:
            self.selector.register(self.listener.fileno(), selectors.EVENT_READ, "listen")
        while True:
            if self._time_to_leave():
                self._kill_all()
                return 0
            idle = not self.children and self.learner.importing
            ready = self.selector.select(0 if idle else self._wait_s())
            if not ready and idle:  # no job runs and nothing waits: preload a little, then look again
                reason = self.learner.import_some(lambda: bool(self.selector.select(0)))
                if reason is not None:
                    self._retire(reason)
                self._learn()
                continue
            for key, _ in ready:
                if key.data == "listen":
                    self.accept()
                elif key.data == "signal":
                    while True:
                        try:
                            if not os.read(self.wake_r, 4096):
                                break
                        except BlockingIOError:
                            break
                    self._reap()
                elif isinstance(key.data, Channel):
                    self._read_requests(key.data)
                else:
                    self._drain(key.data)

    def _wait_s(self) -> float | None:
        """How long to wait for the next event: until the linger ends when no server is left."""
        if self.alone_since is None or self.children:
            return None
        return max(0.0, self.alone_since + self.linger_s - time.monotonic())

    def _time_to_leave(self) -> bool:
        if self.alone_since is None:
            return False
        if self.listener is None:  # its one server left; the children were killed with it
            return True
        if self.children or (self.retired is None and time.monotonic() < self.alone_since + self.linger_s):
            return False
        return self.listener.leave()

    def _close(self, channel: Channel) -> None:
        """A server left: its children are killed, and without servers the linger starts."""
        self.selector.unregister(channel.fd)
        del self.channels[channel.fd]
        channel.close()
        for pid, child in self.children.items():
            if child.channel is channel:
                _kill_group(pid)
        if not self.channels:
            self.alone_since = time.monotonic()

    def _read_requests(self, channel: Channel) -> None:
        try:
            requests = channel.requests()
        except (OSError, ValueError):
            requests = None
        if requests is None:
            self._close(channel)
            return
        for request in requests:
            if "import" in request:
                self.learner.import_first(list(request.get("import") or []), request.get("root"))
            elif "preload" in request:
                self.learner.offer(list(request.get("preload") or []), request.get("root"))
                self._learn()
            elif "linger_s" in request:
                self.linger_s = max(0.0, float(request["linger_s"]))
            else:
                self._start(request, channel)

    def _inherited(self) -> list[int]:
        """This parent's file descriptors, which a forked child closes."""
        fds = [self.wake_r, self.wake_w, self.selector.fileno(), *self.channels]
        if self.listener is not None and self.listener.fileno() >= 0:
            fds.append(self.listener.fileno())
        return fds + [c.output_fd for c in self.children.values() if c.output_fd >= 0]

    def _learn(self) -> None:
        # Only while no job runs: learning must never take a core from an analysis being waited for.
        if self.retired is None and not self.children:
            self.learner.maybe_probe(self._inherited())

    def _retire(self, reason: str) -> None:
        self.retired = reason
        if self.listener is not None:  # the next server starts a successor
            self.selector.unregister(self.listener.fileno())
            self.listener.stop()
        self.broadcast(event="retire", message=reason)  # the servers log it

    def _start(self, request: WarmRequest, channel: Channel) -> None:
        changed = self.learner.stamps.changed() if self.retired is None else None
        if changed is not None:
            self._retire(f"{changed} changed on disk after it was preloaded")
        if self.retired is None and not self.children and self.learner.direct_waiting:
            reason = self.learner.import_direct()  # what the workspace imports, before the job that needs it
            if reason is not None:
                self._retire(reason)
        if self.retired is not None:
            channel.send({"event": "exited", "id": request.get("id"), "pid": None, "status": None, "retired": True,
                          "message": self.retired})
            return
        read_fd, write_fd = os.pipe()
        inherited = [read_fd, *self._inherited()]
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError as error:  # out of processes or memory: this job fails, the parent lives on
            os.close(read_fd)
            os.close(write_fd)
            channel.send({"event": "exited", "id": request.get("id"), "pid": None, "status": None,
                          "message": f"fork failed: {error}"})
            return
        if pid == 0:
            run_child(request, write_fd, inherited, parent, self.learner.report_path(os.getpid()))
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        self.children[pid] = Child(request.get("id"), channel, request.get("log") or os.devnull, read_fd)
        self.selector.register(read_fd, selectors.EVENT_READ, pid)
        channel.send({"event": "started", "id": request.get("id"), "pid": pid})

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
            child.channel.send({"event": "exited", "id": child.request_id, "pid": pid,
                                "status": os.waitstatus_to_exitcode(status)})
            self.learner.child_ended(pid)
            self._learn()

    def _drain_final(self, pid: int, child: Child) -> None:
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
            _kill_group(pid)


def _kill_group(pid: int) -> None:
    """``SIGKILL`` the process group of child ``pid`` (its own session: the job and what it started)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def main(argv: list[str] | None = None) -> int:
    """Start the warm parent; returns its exit status (1 when the imports failed).

    ``--scratch DIR``: the private folder for the children's reports (the server makes and removes
    it); without it a temporary folder is made here and removed at exit. ``--listen PATH
    --listen-fd FD``: serve the servers that connect to the Unix socket ``PATH``, bound and listening
    on the inherited descriptor ``FD`` (shared, see the module's docstring), instead of stdin and
    stdout.
    """
    parser = argparse.ArgumentParser(prog="python -m torchscan_lsp.worker.zygote")
    parser.add_argument("--scratch", help="private folder for the children's reports")
    parser.add_argument("--listen", metavar="PATH", help="serve the servers connecting to this Unix socket")
    parser.add_argument("--listen-fd", type=int, metavar="FD", help="the socket's listening descriptor, inherited")
    args = parser.parse_args(argv)
    listener = Listener(args.listen, args.listen_fd) if args.listen else None
    if sys.path and sys.path[0] == os.getcwd() == "/":  # `-m` put "/" first: jobs would import /tmp as `tmp`
        del sys.path[0]
    events = None if listener else os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints (torch's warnings, say) must not corrupt the event channel
    if listener is None:
        die_with_parent(os.getppid())
    channel = None if events is None else Channel(0, lambda data: (events.write(data), events.flush()))
    try:
        import_base()
        warm_up()
        import torch

        if torch.cuda.is_initialized():  # children could not use CUDA: "cannot re-initialize in forked subprocess"
            raise RuntimeError("CUDA was initialised while warming up")
    except BaseException as error:  # noqa: BLE001 - reported, then the server falls back to cold starts
        _fail(f"{type(error).__name__}: {error}", channel, listener)
        return 1
    scratch = args.scratch or tempfile.mkdtemp(prefix="torchscan-warm-")
    try:
        zygote = Zygote(scratch, channel, listener)
        # Ready without torch._dynamo and the training tools (which import it), seconds to import
        # that no forward job needs: they are preloaded like learned modules once the first job has
        # ended, so the training estimate that follows finds them loaded.
        zygote.learner.offer(["torch._dynamo", "torchscan_lsp.engine.training"], None)
        # An upgrade rewrites these: a warm parent kept for later servers must not fork an old torch.
        zygote.learner.stamps.add(["torch", "torch.version"])
        if channel is not None:
            channel.send({"event": "ready", "pid": os.getpid()})
        return zygote.serve()
    finally:
        if not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def _fail(message: str, channel: Channel | None, listener: Listener | None) -> None:
    """Say ``failed`` to the one server, or to every relay already waiting on the socket."""
    failed = {"event": "failed", "message": message}
    if channel is not None:
        channel.send(failed)
        return
    assert listener is not None and listener.socket is not None
    listener.socket.setblocking(False)
    while True:
        try:
            waiting = listener.accept()
        except OSError:
            break
        waiting.send(failed)
        waiting.close()
    listener.stop()


if __name__ == "__main__":
    sys.exit(main())

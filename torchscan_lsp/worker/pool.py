"""Warm worker parents, one per interpreter, and the jobs forked from them (server side, no torch).

A :class:`WarmParent` runs ``python -m torchscan_lsp.worker.zygote`` (see :mod:`.zygote` for the
line protocol) and asks it to fork a child per job; a job started this way is a :class:`WarmJob`,
whose exit status arrives from the warm parent (which reaps it). :func:`start_job` is the entry
point: it starts (or restarts) the warm parent of an interpreter on demand and returns ``None``
when a warm start is impossible, in which case the caller starts a cold process instead:

* the platform has no ``fork`` (or is not Linux, where forking after importing torch is the
  well-trodden path), or ``TORCHSCAN_LSP_WARM=0`` is set in the server's environment;
* the warm parent of that interpreter could not start (torch does not import there, say): that
  interpreter then gets cold starts, which report the real error on the target.

A warm parent that dies (killed, or crashed) is restarted by the next job; the jobs it was running
die with it (their parent-death signal) and end as crashes.

What the annotated files of a workspace import (:func:`note_imports`) is sent to the warm parent as
soon as it is ready, before any job, and to every later parent of that interpreter; it imports it
before it forks its next job (see :mod:`.zygote`). A warm parent also learns the libraries its jobs
import from outside the workspace and preloads them (see :mod:`.learner`);
:attr:`WarmParent.preloaded` follows its ``preloaded`` events, every preloaded and skipped module
is logged, and :func:`preloaded_packages` gives the status line. A restarted parent is asked to
preload the same modules again. A parent that retires (a preloaded file changed on disk) takes no
new jobs: the next job starts its successor, which preloads what it had, and the retired one is
closed once its last job has ended.

A warm parent may be shared by servers (:mod:`.shared`): the process started is then a relay to it
(:mod:`.relay`), driven as a warm parent of its own would be; it stays :func:`set_linger`'s seconds
after its last server left (``0`` until told: a command-line scan leaves nothing running).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import shutil
import sys
import tempfile

from torchscan_lsp.contract.messages import ImportRequest, LingerRequest, PreloadRequest, WarmEvent, WarmRequest
from torchscan_lsp.worker import early
from torchscan_lsp.worker.supervisor import kill_group, settle

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 180.0
"""How long a warm parent may take to import torch and warm up before it counts as failed."""


def warm_starts_possible() -> bool:
    """Whether jobs can be forked from warm parents here (Linux with ``fork``, not disabled by
    ``TORCHSCAN_LSP_WARM=0``)."""
    return (hasattr(os, "fork") and sys.platform.startswith("linux")
            and os.environ.get("TORCHSCAN_LSP_WARM", "1") != "0")


class WarmJob:
    """A job process forked by a warm parent.

    Attributes:
        pid: the child's process id (also its process group and session id).
    """

    def __init__(self, pid: int, exited: asyncio.Future) -> None:
        self.pid = pid
        self._exited = exited

    async def wait(self) -> int | None:
        """The child's exit status (negative: killed by that signal), or ``None`` when its warm
        parent died first (the child died with it)."""
        return await asyncio.shield(self._exited)


class Retired(ConnectionError):
    """The warm parent retired (see the module's docstring): start the job on its successor."""


class WarmParent:
    """The warm parent process of one interpreter.

    Args:
        python: the interpreter that runs it and its children.
        preloaded: modules to preload as soon as it is ready (a predecessor's).
        skipped: ``{module: reason}`` a predecessor could not preload (not offered again).
        imports: ``{root: [entries]}``, what the workspaces' import statements name
            (:meth:`import_first`), a predecessor's.

    Attributes:
        preloaded: the modules it has preloaded beyond torch and this package, in import order.
        packages: their top-level packages, sorted.
        skipped: ``{module: reason}`` for the modules it would not or could not preload.
        retired: why it retired, or ``None``.
    """

    def __init__(self, python: str, preloaded: list[str] | None = None, skipped: dict[str, str] | None = None,
                 imports: dict[str | None, list[str]] | None = None) -> None:
        self.python = python
        self.imports: dict[str | None, list[str]] = {root: list(entries) for root, entries in (imports or {}).items()}
        self.preloaded: list[str] = [m for m in preloaded or [] if m not in (skipped or {})]
        self.packages: list[str] = []
        self.skipped: dict[str, str] = dict(skipped or {})
        self.retired: str | None = None
        self._scratch: str | None = None
        self.process: asyncio.subprocess.Process | early.Adopted | None = None
        self.failure: str | None = None
        self._ready: asyncio.Future | None = None
        self._ids = itertools.count(1)
        self._started: dict[int, asyncio.Future] = {}
        self._exited: dict[int, asyncio.Future] = {}
        self._reader: asyncio.Task | None = None
        self._lost = False

    @property
    def alive(self) -> bool:
        """Whether the process runs (it may still be warming up) and its events are being read."""
        return self.process is not None and self.process.returncode is None and not self._lost

    async def ensure_started(self) -> bool:
        """Start the warm parent unless it runs; wait until it is warm. Returns ``False`` when it
        could not start (:attr:`failure` says why), ``True`` when it is ready."""
        if self.failure is not None:
            return False
        if self._ready is None or (self._ready.done() and not self.alive):
            self._ready = asyncio.ensure_future(self._start())
        return await asyncio.shield(self._ready)

    async def _start(self) -> bool:
        self._lost = False
        self._remove_scratch()
        try:
            adopted = await early.adopt(self.python)
            if adopted is not None:  # started with the server, before the event loop ran
                self.process, self._scratch = adopted
            else:
                self._scratch = tempfile.mkdtemp(prefix="torchscan-warm-")
                argv, env = early.command(self.python, self._scratch)
                # cwd "/": nothing of a workspace (a stray torch.py, say) may shadow what it imports.
                self.process = await asyncio.create_subprocess_exec(
                    *argv, cwd="/", env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                    stderr=None, start_new_session=True, limit=1 << 20)
            started = self.process
            # Before "ready": a server that stops while torch imports still leaves the shared one its linger.
            self._write({"linger_s": _linger_s})
            line = await asyncio.wait_for(started.stdout.readline(), READY_TIMEOUT_S)
            event = json.loads(line) if line else {"event": "failed", "message": "it exited while starting"}
        except (OSError, ValueError, asyncio.TimeoutError) as error:
            event = {"event": "failed", "message": f"{type(error).__name__}: {error}"}
        if self.process is None:  # closed while it was starting: the server is stopping
            log.info("warm worker for %s stopped before it was ready", self.python)
            return False
        if event.get("event") != "ready":
            self.failure = str(event.get("message"))
            log.warning("no warm worker for %s (%s); analyses start cold", self.python, self.failure)
            self.close()
            return False
        log.info("warm worker for %s ready (pid %s)", self.python, event.get("pid"))
        self._reader = asyncio.ensure_future(self._read_events(self.process))
        for root, entries in self.imports.items():  # before any job request: the first job finds them
            self._write({"import": [e for e in entries if e not in self.skipped], "root": root})
        if self.preloaded:
            self.preload(self.preloaded, None)
        return True

    def import_first(self, entries: list[str], root: str | None) -> None:
        """Have the warm parent import the preload ``entries`` (what the import statements of the
        workspace at ``root`` name) before its next job: at once when it is ready, else as soon as
        it is; each entry once."""
        known = self.imports.setdefault(root, [])
        seen = set(known)  # a file may import hundreds: no quadratic search on the event loop
        new = [entry for entry in dict.fromkeys(entries) if entry not in seen]
        known += new
        if new and self._ready is not None and self._ready.done() and self.alive:
            self._write({"import": new, "root": root})

    def _write(self, request: ImportRequest | PreloadRequest | LingerRequest) -> None:
        if self.alive and self.process is not None and self.process.stdin is not None:
            self.process.stdin.write((json.dumps(request) + "\n").encode())

    def preload(self, modules: list[str], root: str | None) -> None:
        """Ask the running warm parent to preload ``modules`` (of the workspace at ``root``, which
        it checks they are not from; ``None``: already checked)."""
        self._write({"preload": list(modules), "root": root})

    def _preloaded(self, event: WarmEvent) -> None:
        self.preloaded = list(event.get("modules") or [])
        self.packages = list(event.get("packages") or [])
        for module, reason in (event.get("skipped") or {}).items():
            self.skipped[module] = reason
            if not str(reason).startswith("its package "):
                log.info("warm worker for %s: not preloading %s: %s", self.python, module, reason)
        log.info("warm worker for %s: %d modules preloaded (%s)", self.python, len(self.preloaded),
                 ", ".join(self.packages) or "none")

    def _retire(self, message: str) -> None:
        self.retired = message
        log.info("warm worker for %s retires (%s); the next job starts a fresh one", self.python, message)
        self._close_if_idle()

    def _close_if_idle(self) -> None:
        if self.retired is not None and not self._exited:
            self.close()
            _draining.discard(self)

    async def _read_events(self, process: asyncio.subprocess.Process) -> None:
        expected = False
        try:
            while line := await process.stdout.readline():
                event: WarmEvent = json.loads(line)
                request = event.get("id")
                kind = event.get("event")
                if kind == "started" and request in self._started:
                    self._started.pop(request).set_result(event["pid"])
                elif kind == "exited":
                    started = self._started.pop(request, None)
                    if started is not None and not started.done():  # the fork itself failed, or it retired
                        error = Retired if event.get("retired") else OSError
                        started.set_exception(error(event.get("message") or "fork failed"))
                    exited = self._exited.pop(request, None)
                    if exited is not None and not exited.done():
                        exited.set_result(event.get("status"))
                    self._close_if_idle()
                elif kind == "preloaded":
                    self._preloaded(event)
                elif kind == "retire":
                    self._retire(str(event.get("message")))
        except (ValueError, OSError) as error:
            log.error("warm worker for %s sent garbage: %r", self.python, error)
        except asyncio.CancelledError:  # the event loop is closing
            expected = True
            raise
        finally:
            # The warm parent is gone: its children died with it. Marked before the first await,
            # so that no new request waits for an answer that cannot come.
            self._lost = True
            early.kill(process)
            for started in self._started.values():
                if not started.done():
                    started.set_exception(ConnectionError("the warm worker process died"))
            for exited in self._exited.values():
                if not exited.done():
                    exited.set_result(None)
            self._started.clear()
            self._exited.clear()
            with contextlib.suppress(Exception):
                await process.wait()
            expected = expected or self.process is not process  # or close() was called
            log.log(logging.INFO if expected else logging.WARNING, "warm worker for %s stopped (status %s)",
                    self.python, process.returncode)

    async def fork(self, request: WarmRequest) -> WarmJob:
        """Ask the warm parent to fork a child for ``request`` (see :mod:`.zygote`).

        Raises:
            Retired: the warm parent retired.
            ConnectionError: the warm parent is not running or died.
            OSError: the fork failed.
        """
        if not self.alive or self._reader is None or self._reader.done():
            raise ConnectionError("the warm worker process is not running")
        loop = asyncio.get_running_loop()
        request_id = next(self._ids)
        started, exited = loop.create_future(), loop.create_future()
        self._started[request_id], self._exited[request_id] = started, exited
        self.process.stdin.write((json.dumps({**request, "id": request_id}) + "\n").encode())
        try:
            await self.process.stdin.drain()
            pid = await asyncio.shield(started)
        except asyncio.CancelledError:
            # Cancelled before the child's pid arrived: wait for it, kill the child and let it be
            # reaped, so that it never overlaps a newer job of the same target.
            await settle(started)
            if started.done() and not started.cancelled() and started.exception() is None:
                kill_group(started.result())
                await settle(exited)
            raise
        except Retired:
            raise
        except (ConnectionError, BrokenPipeError) as error:
            raise ConnectionError("the warm worker process died") from error
        return WarmJob(pid, exited)

    def close(self) -> None:
        """Stop the warm parent: closing its stdin makes it kill its children and exit; it is
        killed outright as well, in case it is stuck."""
        process, self.process = self.process, None
        self._remove_scratch()
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(Exception):
            process.stdin.close()
        early.kill(process)


    def _remove_scratch(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None


_parents: dict[str, WarmParent] = {}
_linger_s = 0.0
"""How long a shared warm parent stays after its last server left (:func:`set_linger`)."""
_draining: set[WarmParent] = set()
"""Retired warm parents whose last jobs still run."""


def _current(python: str) -> WarmParent:
    """The warm parent of ``python`` that takes new jobs: its successor when it retired."""
    parent = _parents.get(python)
    if parent is None:
        parent = _parents[python] = WarmParent(python)
    elif parent.retired is not None:
        _draining.add(parent)
        parent._close_if_idle()
        parent = _parents[python] = WarmParent(python, parent.preloaded, parent.skipped, parent.imports)
    return parent


async def start_job(python: str, request: WarmRequest) -> WarmJob | None:
    """Start a job in a child of ``python``'s warm parent (started or restarted on demand).

    ``request`` holds ``job``, ``result`` and ``log`` (paths), ``cwd`` and ``memory_mb``. Returns
    ``None`` when no warm start is possible (see the module's docstring): start it cold then.
    """
    if not warm_starts_possible():
        return None
    for _ in range(2):  # it died or retired just now: one more try, then this job starts cold
        parent = _current(python)
        if not await parent.ensure_started():
            return None
        try:
            return await parent.fork(request)
        except ConnectionError:  # Retired included: _current gives its successor
            continue
        except OSError:
            return None
    return None


async def prewarm(python: str) -> bool:
    """Start ``python``'s warm parent ahead of the first job; returns whether it is ready."""
    if not warm_starts_possible():
        return False
    return await _current(python).ensure_started()


def note_imports(python: str, entries: list[str], root: str | None) -> None:
    """What the import statements of an annotated file of the workspace at ``root`` name (preload
    entries, :func:`torchscan_lsp.targets.imports.imported_names`): ``python``'s warm parent
    imports them before its next job (see :meth:`WarmParent.import_first`)."""
    if warm_starts_possible() and entries:
        _current(python).import_first(entries, root)


def set_linger(seconds: float) -> None:
    """Have shared warm parents (:mod:`.shared`), the running ones and those started later, stay
    ``seconds`` after their last server left (``0``: leave with it); ``TORCHSCAN_LSP_KEEP_WARM_S``
    in the server's environment wins over the caller (the tests' isolation)."""
    global _linger_s
    with contextlib.suppress(ValueError):
        seconds = float(os.environ.get("TORCHSCAN_LSP_KEEP_WARM_S", seconds))
    _linger_s = max(0.0, seconds)
    for parent in _parents.values():
        parent._write({"linger_s": _linger_s})  # a starting one reads it once it is ready


def preloaded_packages(python: str) -> list[str]:
    """Top-level packages the warm parent of ``python`` has preloaded (learned from its jobs)."""
    parent = _parents.get(python)
    return list(parent.packages) if parent is not None else []


def spawn_early() -> None:
    """Start the warm parent of the server's own interpreter at once, before the server imports
    its libraries and before the workspace is trusted (see :mod:`.early`): a later
    :func:`prewarm` or job of that interpreter adopts it, :func:`discard_early` stops it."""
    if warm_starts_possible():
        early.spawn(tempfile.mkdtemp(prefix="torchscan-warm-"))


def discard_early(keep: str | None = None) -> None:
    """Stop the early warm parent unless it is that of interpreter ``keep`` (the workspace is not
    trusted, or runs another interpreter)."""
    for folder in early.discard(keep):
        shutil.rmtree(folder, ignore_errors=True)


def shutdown() -> None:
    """Stop every warm parent (at server exit; they would also stop on their own when the server's
    end of their stdin closes)."""
    for parent in [*_parents.values(), *_draining]:
        parent.close()
    _parents.clear()
    _draining.clear()
    discard_early()

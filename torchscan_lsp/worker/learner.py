"""The warm parent's side of learning libraries: which to try, the probe child, what was preloaded.

What the annotated files of the workspace import (the server's ``import`` requests,
:meth:`Learner.import_first`: the entries of :func:`torchscan_lsp.targets.imports.imported_names`)
is imported into the parent itself, before it forks its next job while none runs, and while it
idles otherwise (:meth:`Learner.import_direct`): an entry that resolves to a workspace file is
refused unimported, one that raises is skipped, and one that started a thread or initialised CUDA
retires the parent (its successor skips it). Further candidates arrive from the reports of ended
jobs (:meth:`Learner.child_ended`) and from the server's ``preload`` requests
(:meth:`Learner.offer`). While no job runs (learning must not take a core from an analysis
someone waits for), one probe child at a time imports a batch
(:func:`.preload.probe`), at the lowest scheduling priority, since a job may start before it ends; when it ends, what it accepted is imported into the parent one module at
a time while no job runs (:meth:`Learner.import_some`: a job that arrives meanwhile is forked at
once and imports the rest itself), and the parent sends one event::

    {"event": "preloaded", "modules": [...every module preloaded so far...],
     "packages": ["transformers", ...], "skipped": {"name": "why", ...new ones...}}

Skipped modules (they raised, resolved to a workspace file, or started a thread or initialised
CUDA in the probe) are never tried again by this parent; the server logs them, one line each.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable

from torchscan_lsp.worker import preload, sites
from torchscan_lsp.worker.limits import isolate_forked_child


class Learner:
    """Learned libraries of one warm parent.

    Args:
        scratch: a private folder for the children's reports and the probe's answer.
        send: writes one event (keyword arguments) to the server.
    """

    def __init__(self, scratch: str, send: Callable[..., None]) -> None:
        self.scratch = scratch
        self.send = send
        self.preloaded: list[str] = []
        self.skipped: dict[str, str] = {}
        self.stamps = preload.Stamps()
        self.probe_pid: int | None = None
        self._queue: list[tuple[str, str | None]] = []
        self._queued: set[str] = set()
        self._pending: list[str] = []
        self._direct: list[tuple[str, str | None]] = []
        self._directed: set[str] = set()
        self._new_skips: dict[str, str] = {}

    def report_path(self, pid: int) -> str:
        """Where the job child ``pid`` writes its report."""
        return os.path.join(self.scratch, f"job-{pid}.json")

    def packages(self) -> list[str]:
        """Top-level packages preloaded so far, beside this project (whose training tools are
        preloaded too, but are no library of the user's)."""
        return [name for name in preload.top_level(self.preloaded) if name != __name__.partition(".")[0]]

    def offer(self, names: list[str], root: str | None) -> None:
        """Queue ``names`` (modules of the workspace at ``root``) unless loaded, queued or skipped."""
        for name in names:
            if (isinstance(name, str) and name not in sys.modules and name not in self.skipped
                    and name not in self._queued and name not in self._pending):
                self._queue.append((name, root))
                self._queued.add(name)

    def import_first(self, entries: list[str], root: str | None) -> None:
        """Queue the preload entries ``entries`` (of the workspace at ``root``) for
        :meth:`import_direct`, each once and unless skipped."""
        for entry in entries:
            if isinstance(entry, str) and entry not in self._directed and entry not in self.skipped:
                self._direct.append((entry, root))
                self._directed.add(entry)

    @property
    def direct_waiting(self) -> bool:
        """Whether entries of :meth:`import_first` wait to be imported."""
        return bool(self._direct)

    def import_direct(self, pause: Callable[[], bool] = lambda: False) -> str | None:
        """Import the queued entries of :meth:`import_first` into this parent, one at a time until
        ``pause()`` says a request or a child's exit waits, then announce them. Returns why this
        parent must retire (an import started a thread or initialised CUDA), else ``None``."""
        while self._direct:
            entry, root = self._direct.pop(0)
            origin = preload.workspace_origin(entry, root)
            if origin is not None:
                self._new_skips[entry] = f"it resolves to the workspace file {origin}"
            else:
                reason = self._import(entry, entry.partition(":")[0])
                if reason is not None:
                    self._direct.clear()
                    return reason
            if self._direct and pause():
                break
        self._announce()
        return None

    def _import(self, entry: str, module: str) -> str | None:
        """Import ``entry`` here and note what it loaded (``module`` joins the preloaded); returns
        why this parent must retire, else ``None``."""
        before = set(sys.modules)
        try:
            error = preload.import_one(entry)
        except preload.Contaminated as contaminated:
            self._new_skips[entry] = contaminated.reason
            self._announce()
            return f"preloading {contaminated}"
        imported = [name for name in list(sys.modules) if name not in before]
        self.stamps.add(imported)
        sites.resolve_module_files(imported)
        if error is not None:
            self._new_skips[entry] = error
        elif module not in self.preloaded:
            self.preloaded.append(module)
        return None

    def child_ended(self, pid: int) -> None:
        """Take the report of the ended job child ``pid``, if it wrote one."""
        report = preload.read_json(self.report_path(pid))
        if report is not None:
            self.offer(list(report.get("modules") or []), report.get("root"))

    def maybe_probe(self, inherited: list[int]) -> None:
        """Fork a probe child for the queued candidates, unless one runs or accepted modules still
        wait to be imported.

        ``inherited``: this parent's file descriptors that the probe must close.
        """
        if self.probe_pid is not None or self._pending or not self._queue:
            return
        batch, self._queue = self._queue, []
        self._queued.clear()
        answer = os.path.join(self.scratch, "probe.json")
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError as error:
            print(f"torchscan warm worker: could not start a probe: {error}", file=sys.stderr)
            return
        if pid == 0:
            _run_probe(batch, answer, inherited, parent)
        self.probe_pid = pid

    @property
    def importing(self) -> bool:
        """Whether entries or accepted modules wait to be imported into this parent
        (:meth:`import_direct`, :meth:`import_some`)."""
        return bool(self._direct or self._pending)

    def probe_ended(self, status: int) -> None:
        """Take the ended probe's answer: what it accepted waits for :meth:`import_some`."""
        self.probe_pid = None
        answer = preload.read_json(os.path.join(self.scratch, "probe.json"))
        if answer is None:
            print(f"torchscan warm worker: the probe ended without an answer (status {status})", file=sys.stderr)
            return
        self._new_skips |= dict(answer.get("failed") or {}) | dict(answer.get("refused") or {})
        self._pending = [name for name in answer.get("accepted") or [] if isinstance(name, str)]
        for name, root in answer.get("rest") or []:
            self.offer([name], root)
        if not self._pending:
            self._announce()

    def import_some(self, pause: Callable[[], bool]) -> str | None:
        """Import waiting modules into this parent, one at a time, until ``pause()`` says a request
        or a child's exit waits (the loop serves it, then calls again) or none is left; then
        announce them. Returns why this parent must retire (an import started a thread or
        initialised CUDA here after all), else ``None``."""
        if self._direct:
            return self.import_direct(pause)
        while self._pending:
            name = self._pending.pop(0)
            reason = self._import(name, name)
            if reason is not None:
                self._pending.clear()
                return reason
            if self._pending and pause():
                return None
        self._announce()
        return None

    def _announce(self) -> None:
        skipped, self._new_skips = self._new_skips, {}
        self.skipped |= skipped
        self.send(event="preloaded", modules=self.preloaded, packages=self.packages(), skipped=skipped)


def _run_probe(candidates: list[tuple[str, str | None]], answer: str, inherited: list[int], parent: int) -> None:
    """The forked probe child: import the ``candidates``, write the answer to ``answer``; never
    returns."""
    status = 70
    try:
        isolate_forked_child(inherited, parent)
        # A job forked while this probe runs gets the core: the probe starts only while no job
        # runs, but a save may come before it ends.
        os.nice(19)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # what a library prints while importing goes nowhere
            os.dup2(null, fd)
        os.close(null)
        result: dict[str, Any] = preload.probe(candidates)
        temporary = answer + ".partial"
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(result, handle)
        os.replace(temporary, answer)
        status = 0
    finally:
        os._exit(status)

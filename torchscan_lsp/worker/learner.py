"""The warm parent's side of learning libraries: which to try, the probe child, what was preloaded.

Candidates arrive from the reports of ended jobs (:meth:`Learner.child_ended`) and from the
server's ``preload`` requests (:meth:`Learner.offer`). While no job runs (learning must not take a
core from an analysis someone waits for), one probe child at a time imports a batch
(:func:`.preload.probe`); when it ends, what it accepted is imported into the parent one module at
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
        self._new_skips: dict[str, str] = {}

    def report_path(self, pid: int) -> str:
        """Where the job child ``pid`` writes its report."""
        return os.path.join(self.scratch, f"job-{pid}.json")

    def packages(self) -> list[str]:
        """Top-level packages preloaded so far."""
        return preload.top_level(self.preloaded)

    def offer(self, names: list[str], root: str | None) -> None:
        """Queue ``names`` (modules of the workspace at ``root``) unless loaded, queued or skipped."""
        for name in names:
            if (isinstance(name, str) and name not in sys.modules and name not in self.skipped
                    and name not in self._queued and name not in self._pending):
                self._queue.append((name, root))
                self._queued.add(name)

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
        """Whether accepted modules wait to be imported into this parent (:meth:`import_some`)."""
        return bool(self._pending)

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
        while self._pending:
            name = self._pending.pop(0)
            before = set(sys.modules)
            try:
                error = preload.import_one(name)
            except preload.Contaminated as contaminated:
                self._pending.clear()
                self._new_skips[name] = contaminated.reason
                self._announce()
                return f"preloading {contaminated}"
            imported = [module for module in list(sys.modules) if module not in before]
            self.stamps.add(imported)
            sites.resolve_module_files(imported)
            if error is not None:
                self._new_skips[name] = error
            elif name not in self.preloaded:
                self.preloaded.append(name)
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

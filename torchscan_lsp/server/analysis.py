"""The analysis controller: from document text to target states, through the worker.

On every change the text is scanned for targets (``ast``, never executed). On open and save (and
while typing, with ``analyzeOnType``) each target gets a job: from the cache when the target's
file, the files its model imported, its options and the interpreter are unchanged, else in a
worker process through the scheduler. Results land in the :class:`~.state.Store`; a listener
(the language server, or nothing for ``check``) hears when a job starts and when states change.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Protocol

from torchscan_lsp.contract.messages import failure
from torchscan_lsp.server.cache import ResultCache, job_key
from torchscan_lsp.server.line_map import LineMap
from torchscan_lsp.server.results import ResultView
from torchscan_lsp.server.scheduler import Scheduler
from torchscan_lsp.server.settings import Settings
from torchscan_lsp.server.state import Document, Store, TargetState, content_hash, relative
from torchscan_lsp.worker import client as worker_client

log = logging.getLogger(__name__)

RunJob = Callable[..., Awaitable[dict]]
"""``async (job, *, python, timeout_s, memory_mb) -> result``: :func:`torchscan_lsp.worker.client.run`."""

_JOB_ONLY_OPTIONS = ("measure", "timeout")


class Listener(Protocol):
    """What the controller tells its owner."""

    def job_started(self, state: TargetState, task: asyncio.Task) -> None:
        """A worker job for ``state`` started running (``task`` may be cancelled to stop it)."""

    def states_changed(self, states: list[TargetState], files: set[tuple[str, str]]) -> None:
        """``states`` changed; ``files`` are the ``(root, rel)`` pairs whose features may differ."""


class _Silent:
    def job_started(self, state: TargetState, task: asyncio.Task) -> None:
        pass

    def states_changed(self, states: list[TargetState], files: set[tuple[str, str]]) -> None:
        pass


MAX_SCAN_CHARS = 5_000_000
"""Longer files are neither scanned nor analysed: scanning runs on the event loop (about a second per
10 MB), and no model definition is that long (generated data is)."""


def _scan(text: str, path: str) -> tuple[list[Any], list[Any]]:
    """Targets and problems of ``text`` (see :func:`torchscan_lsp.targets.find_targets`)."""
    from torchscan_lsp.targets import find_targets

    if len(text) > MAX_SCAN_CHARS:
        too_long = _ScanFailure(f"torchscan skips files over {MAX_SCAN_CHARS / 1e6:g} million characters (this one has "
                                f"{len(text) / 1e6:.1f} million): its targets are not analysed")
        too_long.severity = "warning"
        return [], [too_long]
    scan = find_targets(text, path)
    return list(scan.targets), list(scan.problems)


def _is_error(problem: Any) -> bool:
    return str(getattr(problem, "severity", "error")).lower().endswith("error")


def _follow(target: Any, moved: LineMap) -> Any:
    """``target`` moved to where its lines went in the current text (unchanged when its ``def`` or
    ``class`` line itself was edited: there is no better place for its last good results)."""
    line = moved.to_current(target.line)
    if line is None or line == target.line:
        return target
    annotation = moved.to_current(target.annotation_line)
    return dataclasses.replace(target, line=line, annotation_line=annotation if annotation is not None else line)


class Analyzer:
    """Owns the documents, target states, cache and scheduler of one server (or one ``check`` run).

    Args:
        settings: the resolved settings (replaceable later through :attr:`settings`).
        trusted: whether workspace code may run (``initializationOptions.trusted``).
        listener: told about job starts and state changes.
        run_job: the worker entry point.
    """

    def __init__(self, settings: Settings | None = None, *, trusted: bool = False, listener: Listener | None = None,
                 run_job: RunJob = worker_client.run) -> None:
        self.settings = settings or Settings()
        self.trusted = trusted
        self.listener = listener or _Silent()
        self.run_job = run_job
        self.store = Store()
        self.cache = ResultCache()
        self.scheduler = Scheduler(self.settings.maxWorkers)
        self._defaults: dict[str, dict] = {}
        self.config_errors: dict[str, Any] = {}

    @property
    def may_execute(self) -> bool:
        """Whether workspace code may run: trusted by the client, or allowed in the settings."""
        return self.trusted or self.settings.allowExecution

    def workspace_defaults(self, root: str) -> dict:
        """Target option defaults from ``root``'s ``pyproject.toml`` (``[tool.torchscan-lsp]``)."""
        if root not in self._defaults:
            from torchscan_lsp.targets import WorkspaceConfigError, load_workspace_defaults

            self.config_errors.pop(root, None)
            try:
                self._defaults[root] = dict(load_workspace_defaults(root))
            except WorkspaceConfigError as error:  # reported on every target, never fatal
                self.config_errors[root] = error
                self._defaults[root] = {}
        return self._defaults[root]

    def config_error(self, root: str) -> Any | None:
        """The error of ``root``'s ``[tool.torchscan-lsp]`` table (``.message``, ``.line``), if any."""
        self.workspace_defaults(root)
        return self.config_errors.get(root)

    def forget_workspace_defaults(self) -> None:
        """Re-read pyproject defaults on next use (after ``pyproject.toml`` changed)."""
        self._defaults.clear()

    # documents -----------------------------------------------------------------------------

    def open(self, path: str, root: str, text: str, *, saved: bool = True) -> Document:
        """Track (or re-track) a document and scan it; returns it. Does not analyse."""
        rel = relative(path, root) or Path(path).name
        document = self.store.documents.get(path)
        if document is None:
            document = Document(path=path, root=root, rel=rel, text=text, saved_hash=content_hash(text))
            self.store.documents[path] = document
        document.text = text
        if saved:
            document.saved_hash = content_hash(text)
        self._rescan(document)
        return document

    def close(self, path: str) -> None:
        """Stop tracking an editor buffer (its targets' states stay, for the other files)."""
        self.store.documents.pop(path, None)

    def edit(self, path: str, text: str) -> list[TargetState]:
        """New unsaved text: rescan, mark the file's results stale, and (with ``analyzeOnType``)
        schedule a debounced analysis of the buffer. Returns the file's target states."""
        document = self.store.documents[path]
        document.text = text
        states = self._rescan(document)
        for state in states:
            state.stale = state.view is not None and content_hash(text) != state.analysed_hash
        dependents = list(self.store.dependents(document.root, document.rel))
        for state in dependents:  # their models import this file: their hints no longer hold
            state.stale = True
        if self.settings.analyzeOnType and self.may_execute:
            self.analyse(document, unsaved=True, delay_s=self.settings.debounceMs / 1000.0)
        return states + dependents

    def _rescan(self, document: Document) -> list[TargetState]:
        try:
            targets, problems = _scan(document.text, document.path)
        except Exception as error:  # a scanner bug must not take the server down
            log.exception("target scan failed for %s", document.path)
            targets, problems = [], [_ScanFailure(f"torchscan could not scan this file: {error}")]
        retained: set[str] = set()
        if any(_is_error(p) for p in problems):
            # A broken edit keeps the targets it hid, so their last good hints stay (stale);
            # they are not analysed again until the edit is fixed.
            names = {t.name for t in targets}
            moved = LineMap(document.scanned_text.splitlines(), document.lines)
            kept = [_follow(t, moved) for t in document.targets if t.name not in names]
            retained = {t.name for t in kept}
            targets += kept
        document.targets, document.problems, document.retained = targets, problems, retained
        document.scanned_text = document.text
        states = self.store.sync_targets(document)
        for state in states:
            if state.key.name in retained:
                state.stale = state.view is not None
        return states

    # analysis ------------------------------------------------------------------------------

    def file_hash(self, root: str) -> Callable[[str], str | None]:
        """Content hash of a workspace-relative file: the open buffer's saved text, else the disk."""

        def digest(rel: str) -> str | None:
            path = str(Path(root, rel))
            document = self.store.documents.get(path)
            if document is not None:
                return document.saved_hash
            try:
                return content_hash(Path(path).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                return None

        return digest

    def build_job(self, document: Document, state: TargetState, *, measure: Iterable[str] = (), unsaved: bool = False) -> tuple[dict, float]:
        """The worker job for ``state`` (docs/architecture.md) and its time limit in seconds.

        Options: the pyproject defaults, then the ``torchscan.device`` setting (which already
        defaults to the pyproject's device), then the target's own. ``measure`` and ``timeout`` are
        lifted out of ``options`` into the job; the limit is the target's ``timeout``, else the
        ``torchscan.timeoutSeconds`` setting (which defaults to the pyproject's ``timeout``).
        """
        options: dict[str, Any] = dict(self.workspace_defaults(document.root))
        options["device"] = self.settings.device
        options.update(dict(getattr(state.target, "options", {}) or {}))
        wanted = list(dict.fromkeys([*(options.get("measure") or []), *measure]))
        own_timeout = (getattr(state.target, "options", {}) or {}).get("timeout")
        timeout = own_timeout or self.settings.timeoutSeconds
        job = {
            "workspace_root": document.root,
            "file": document.path,
            "target": state.key.name,
            "options": {k: v for k, v in options.items() if k not in _JOB_ONLY_OPTIONS},
            "source_text": document.text if unsaved else None,
            "measure": wanted,
        }
        return job, float(timeout)

    def analyse(self, document: Document, names: Iterable[str] | None = None, *, measure: Iterable[str] = (),
                unsaved: bool = False, delay_s: float = 0.0, use_cache: bool = True) -> list[TargetState]:
        """Analyse the targets of ``document`` (all, or those ``names``); returns their states.

        Untrusted workspaces get no job, only the ``untrusted`` mark. Results come from the cache
        when valid, otherwise from a worker job (the older job of the same target is cancelled).
        """
        wanted = set(names) if names is not None else None
        states = [s for s in self.store.states_in(document.root, document.rel) if wanted is None or s.key.name in wanted]
        changed = []
        for state in states:
            if state.key.name in document.retained:
                continue
            if not self.may_execute:
                state.untrusted = True
                changed.append(state)
                continue
            state.untrusted = False
            job, timeout = self.build_job(document, state, measure=measure, unsaved=unsaved)
            text = document.text
            key = job_key(job, content_hash(text), self.settings.interpreter)
            cached = self.cache.get(key, self.file_hash(document.root)) if use_cache else None
            if cached is not None:
                self.scheduler.cancel(state.key)
                changed.append(self._apply(state, cached, text))
                continue
            self.scheduler.submit(state.key, lambda s=state, j=job, t=timeout, k=key, x=text: self._job(s, j, t, k, x),
                                  delay_s=delay_s)
        if changed:
            self._notify(changed, set())
        return states

    def analyse_saved(self, path: str) -> None:
        """After ``path`` was saved: analyse its targets and those of other files whose models
        imported it (a target file that is not open is read from disk)."""
        document = self.store.documents.get(path)
        if document is None:
            return
        self.analyse(document)
        for state in list(self.store.dependents(document.root, document.rel)):
            owner_path = str(Path(state.key.root, state.key.file))
            owner = self.store.documents.get(owner_path)
            if owner is None:  # the target's file is not open: read it from disk
                try:
                    owner = self.open(owner_path, state.key.root, Path(owner_path).read_text(encoding="utf-8"))
                except (OSError, UnicodeDecodeError):
                    continue
            self.analyse(owner, [state.key.name])

    def reanalyse_all(self) -> None:
        """Analyse every target of every tracked document (after trust or settings changed)."""
        for document in list(self.store.documents.values()):
            self.analyse(document)

    async def _job(self, state: TargetState, job: dict, timeout: float, key: str, text: str) -> None:
        task = asyncio.current_task()
        state.running = True
        self.listener.job_started(state, task)
        self._notify([state], set())
        before = state.files
        try:
            result = await self.run_job(job, python=self.settings.python, timeout_s=timeout,
                                        memory_mb=self.settings.memoryLimitMb)
        except asyncio.CancelledError:
            if self.scheduler.is_current(state.key, task):
                state.running = False
                self._notify([state], set())
            raise
        except Exception as error:  # the client maps worker failures; this is a bug in ours
            log.exception("worker job failed")
            result = failure(job["target"], "crash", f"the worker client failed: {error}")
        if not self.scheduler.is_current(state.key, task):
            return
        state.running = False
        if result.get("ok"):
            self.cache.put(key, result, self.file_hash(job["workspace_root"]))
        self._apply(state, result, text)
        self._notify([state], before)

    def _apply(self, state: TargetState, result: dict, text: str) -> TargetState:
        """Take ``result`` of ``state``'s job, whose target file read ``text``."""
        if result.get("ok"):
            state.analysed_hash = content_hash(text)
            state.view = ResultView(result)
            state.set_analysed_texts(self._texts(state, text, {file for file, _ in state.view.lines}))
            state.error = None
            state.stale = False
            state.measurements.update(result.get("measurements") or {})
        else:
            state.error = result
            state.set_error_texts(self._texts(state, text, {(result.get("error") or {}).get("file")} - {None}))
            state.stale = state.view is not None
        return state

    def _texts(self, state: TargetState, text: str, files: set[str]) -> dict[str, str]:
        """The texts ``state``'s new result was computed from: ``text`` for its own file, and for
        each other of ``files`` (those it names lines of) the file on disk (the worker imports files
        from disk; an unchanged file is what a cached result read too). A file that cannot be read
        is left out, and its lines are taken as they are."""
        texts = {state.key.file: text}
        for rel in files - {state.key.file}:
            try:
                texts[rel] = Path(state.key.root, rel).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
        return texts

    def _notify(self, states: list[TargetState], before: set[str]) -> None:
        files: set[tuple[str, str]] = set()
        for state in states:
            files |= {(state.key.root, rel) for rel in state.files | before}
        self.listener.states_changed(states, files)


class _ScanFailure:
    """A problem standing for a scanner that raised (line 1, whole line)."""

    def __init__(self, message: str) -> None:
        self.line, self.column, self.end_column, self.message, self.severity = 1, 0, None, message, "error"

"""The session: from document text to target states, through the worker, for every front end.

On every change the text is scanned for targets (``ast``, never executed). On open and save (and
while typing, with ``analyzeOnType``) each target gets a job (:mod:`.jobs`): from the cache when
the target's file, the files its model imported, its options and the interpreter are unchanged,
else in a worker process through the scheduler. The editor's session runs the training estimate of
a target with ``train`` options as a job of its own after the forward one (:mod:`.estimates`).
Results land in the :class:`~.state.Store`; a listener (the language server, or nothing for
``check`` and ``scan``) hears when a job starts and when states change. The session is the only way
to the worker: it also renders HTML reports there, and starts and stops the warm worker. It imports
neither pygls nor torch.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Mapping

from torchscan_lsp.contract.messages import failure
from torchscan_lsp.session.baselines import Baselines
from torchscan_lsp.session.cache import ResultCache, cache_folder, job_key
from torchscan_lsp.session.estimates import TrainingEstimates
from torchscan_lsp.session.jobs import Limits, build_job, effective_options, page_job
from torchscan_lsp.session.listener import Listener, Silent
from torchscan_lsp.session.notebooks import NotebookError, Program
from torchscan_lsp.session.outcome import Outcome, prepare, take
from torchscan_lsp.session.planning import Plans
from torchscan_lsp.session.preloading import preload_document, prewarm
from torchscan_lsp.session.scanning import rescan
from torchscan_lsp.session.scheduler import Scheduler
from torchscan_lsp.session.settings import Settings, resolve
from torchscan_lsp.session.state import Document, Store, TargetState, content_hash, relative
from torchscan_lsp.session.workspace import (MARKER, SourceFile, WorkspaceConfig, file_root, read_config,
                                             read_document)
from torchscan_lsp.worker import client as worker_client
from torchscan_lsp.worker import pool

__all__ = ["Listener", "RunJob", "Session"]

log = logging.getLogger(__name__)

RunJob = Callable[..., Awaitable[dict]]
"""``async (job, *, python, timeout_s, memory_mb) -> result``: :func:`torchscan_lsp.worker.client.run`."""


class Session:
    """Owns the documents, target states, cache and scheduler of one server (or one ``check`` or
    ``scan`` run).

    Args:
        settings: the resolved settings (see :meth:`configure`).
        trusted: whether workspace code may run (``initializationOptions.trusted``; the commands
            run what they are pointed at).
        listener: told about job starts and state changes.
        run_job: the worker entry point.
        keep_results: keep results on disk too, as the setting ``cacheResults`` says (the editor's
            session; a command measures what it is pointed at).
        separate_training: the training estimate of a target with ``train`` options is a job of
            its own after the forward's, reused while the model holds (:mod:`.estimates`; the
            editor's session), not part of the forward's job (``check``, ``scan``).
        auto_plan: plan a target whose options ask for a plan after each of its analyses
            (:class:`~torchscan_lsp.session.planning.Plans`; ``check`` does not).
    """

    def __init__(self, settings: Settings | None = None, *, trusted: bool = False, listener: Listener | None = None,
                 run_job: RunJob = worker_client.run, keep_results: bool = False,
                 separate_training: bool = False, auto_plan: bool = True) -> None:
        self.settings = settings or Settings()
        self.trusted = trusted
        self.listener = listener or Silent()
        self.run_job = run_job
        self.store = Store()
        self.cache = ResultCache()
        self.keep_results = keep_results
        self.scheduler = Scheduler(self.settings.maxWorkers)
        self.estimates = TrainingEstimates(self, enabled=separate_training)
        self.plans = Plans(self, auto=auto_plan)
        self.baselines = Baselines(self)
        self._configs: dict[str, WorkspaceConfig] = {}
        self._configured: tuple[str | None, Mapping[str, Any]] = (None, {})  # configure's root and overrides
        self._told_cache_problem: str | None = None

    @property
    def may_execute(self) -> bool:
        """Whether workspace code may run: trusted by the client, or allowed in the settings."""
        return self.trusted or self.settings.allowExecution

    # the workspace ---------------------------------------------------------------------------

    def workspace_config(self, root: str) -> WorkspaceConfig:
        """``root``'s ``[tool.torchscan-lsp]`` table, read once until :meth:`forget_workspace_config`."""
        return self._configs[root] if root in self._configs else self._configs.setdefault(root, read_config(root))

    def settings_for(self, root: str) -> Settings:
        """The settings of the files under ``root``: :meth:`configure`'s, with ``root``'s own table under
        the same overrides when it is another folder (``device``, ``timeoutSeconds``, ``compareWith``)."""
        configured, overrides = self._configured
        return self.settings if root == configured else resolve(self.workspace_config(root).settings_defaults, overrides)[0]

    def forget_workspace_config(self) -> None:
        """Re-read the tables on next use (after a ``pyproject.toml`` changed)."""
        self._configs.clear()

    def configure(self, root: str | None, overrides: Mapping[str, Any] | None) -> tuple[Settings, list[str]]:
        """Resolve the settings: the defaults, then ``root``'s table, then ``overrides`` (the
        editor's section ``torchscan``, or a command's flags). Applies them (the scheduler takes
        the new ``maxWorkers``) and returns the previous settings and one message per value that
        was skipped."""
        defaults = self.workspace_config(root).settings_defaults if root else {}
        new, problems = resolve(defaults, overrides)
        self._configured = (root, dict(overrides or {}))
        old, self.settings = self.settings, new
        self.scheduler.set_max_workers(new.maxWorkers)
        self.cache.persist((lambda: cache_folder("results")) if self.keep_results and new.cacheResults else None)
        self.baselines.persist(self.keep_results and new.cacheResults)
        if self.keep_results:  # the editor's session; a command's scan leaves no warm worker behind
            pool.set_linger(new.keepWarmMinutes * 60)
        self._tell_cache_problem()
        return old, problems

    # documents -------------------------------------------------------------------------------

    def open(self, path: str, root: str, text: str, *, saved: bool = True, from_disk: bool = False,
             program: Program | None = None) -> Document:
        """Track (or re-track) a document and scan it; returns it. Does not analyse. ``from_disk``:
        no front end opened it. A notebook comes with its ``program`` (:mod:`.notebooks`) of ``text``.

        Raises:
            ValueError: ``path`` lies outside ``root``: its targets' keys, its results' file names
                and the worker's workspace are all relative to the root, so a file needs one that
                holds it (:func:`~.workspace.root_for`, :func:`~.workspace.file_root`).
        """
        rel = relative(path, root)
        if rel is None:
            raise ValueError(f"{path} lies outside its workspace root {root}")
        document = self.store.documents.get(path)
        if document is None:
            document = Document(path=path, root=root, rel=rel, text=text, saved_hash=content_hash(text))
            self.store.documents[path] = document
        document.text, document.program = text, program if program is not None else document.program
        document.from_disk = from_disk
        if saved:
            document.saved_hash = content_hash(text)
        self._rescan(document)
        return document

    def open_files(self, files: Iterable[SourceFile], root: str) -> tuple[list[Document], list[tuple[Path, str]]]:
        """Open the files a command was given (:func:`~.workspace.python_files`): a file it named
        always, one found under a folder only when it mentions ``torchscan``; each under ``root``
        (absolute) when it lies there, else under the root its path has alone
        (:func:`~.workspace.file_root`: each document's ``root``). Returns the documents and, for
        each file that could not be read, its path and what went wrong."""
        documents, problems = [], []
        for source in files:
            try:
                text, program = read_document(source.path)
            except OSError as error:
                problems.append((source.path, "no such file" if isinstance(error, FileNotFoundError)
                                 else f"cannot read: {error.strerror or error}"))
                continue
            except NotebookError as error:
                problems.append((source.path, str(error)))
                continue
            except (SyntaxError, UnicodeDecodeError) as error:
                problems.append((source.path, f"cannot decode the file: {error}"))
                continue
            if source.explicit or MARKER in text:
                documents.append(self.open(str(source.path), str(file_root(source, Path(root))), text,
                                           program=program))
        return documents, problems

    def close(self, path: str) -> None:
        """Stop tracking an editor buffer (its targets' states stay, for the other files)."""
        self.store.documents.pop(path, None)

    def edit(self, path: str, text: str, program: Program | None = None) -> list[TargetState]:
        """New unsaved text (a notebook's new ``program``): rescan, mark the file's results stale,
        and (with ``analyzeOnType``) schedule a debounced analysis of the buffer. Returns the
        file's target states."""
        document = self.store.documents[path]
        document.text, document.program = text, program if program is not None else document.program
        states = self._mark_stale(document, self._rescan(document))
        if self.settings.analyzeOnType and self.may_execute:
            self.analyse(document, unsaved=True, delay_s=self.settings.debounceMs / 1000.0)
        return states

    def reread(self, document: Document, text: str, program: Program | None = None) -> list[TargetState]:
        """``document``'s file holds new ``text`` on disk (a notebook's: its new ``program``) and its
        buffer has no unsaved edits (a checkout, a code generator): take the text as saved, rescan
        it, and mark stale the results it no longer matches. Returns the file's target states and
        those of other files whose models import it. Does not analyse."""
        self.open(document.path, document.root, text, saved=True, from_disk=document.from_disk, program=program)
        return self._mark_stale(document, self.store.states_in(document.root, document.rel))

    def _mark_stale(self, document: Document, states: list[TargetState]) -> list[TargetState]:
        """Mark ``states`` (``document``'s) stale where their result is of other text, and those of
        other files whose models import it; returns both."""
        for state in states:
            state.stale = state.view is not None and content_hash(document.text) != state.analysed_hash
        dependents = list(self.store.dependents(document.root, document.rel))
        for state in dependents:  # their models import this file: their hints no longer hold
            state.stale = True
        return states + dependents

    def _rescan(self, document: Document) -> list[TargetState]:
        retained = rescan(document)
        states = self.store.sync_targets(document)
        for state in states:
            if state.key.name in retained:
                state.stale = state.view is not None
        return states

    # analysis --------------------------------------------------------------------------------

    def file_hash(self, root: str) -> Callable[[str], str | None]:
        """Content hash of a workspace-relative file: the open buffer's saved text, else the disk."""

        def digest(rel: str) -> str | None:
            path = str(Path(root, rel))
            document = self.store.documents.get(path)
            if document is not None:
                return document.saved_hash
            try:
                return content_hash(read_document(path)[0])
            except (OSError, SyntaxError, UnicodeDecodeError, NotebookError):
                return None

        return digest

    def target_options(self, state: TargetState) -> dict[str, Any]:
        """The options ``state``'s target runs with (:func:`~.jobs.effective_options`): its budgets
        among them."""
        return effective_options(state.target, self.workspace_config(state.key.root).defaults, self.settings_for(state.key.root))

    def job_for(self, document: Document, state: TargetState, *, measure: Iterable[str] = (),
                unsaved: bool = False) -> tuple[dict, Limits]:
        """The worker job for ``state`` and its limits (:func:`~.jobs.build_job`); of phase
        ``forward`` when its training estimate runs as a job of its own (``separate_training``)."""
        defaults = self.workspace_config(document.root).defaults
        job, limits = build_job(document.root, document.path, state.target, defaults, self.settings_for(document.root), measure=measure,
                                source_text=document.text if unsaved or document.program is not None else None)
        return self.estimates.phase(job), limits

    def analyse(self, document: Document, names: Iterable[str] | None = None, *, measure: Iterable[str] = (),
                unsaved: bool = False, delay_s: float = 0.0, use_cache: bool = True) -> list[TargetState]:
        """Analyse the targets of ``document`` (all, or those ``names``); returns their states.

        Untrusted workspaces get no job, only the ``untrusted`` mark. Every other target gets a job
        (the older job of the same target is cancelled): it looks the result up in the cache off
        the event loop (hashing the files the model imported), and runs a worker only when no
        valid result is kept.
        """
        wanted = set(names) if names is not None else None
        states = [s for s in self.store.states_in(document.root, document.rel) if wanted is None or s.key.name in wanted]
        if states and self.may_execute:  # the warm worker imports what the file imports, before its jobs
            preload_document(self.settings.interpreter, document)
        changed = []
        for state in states:
            if state.key.name in document.retained:
                continue
            if not self.may_execute:
                state.untrusted = True
                changed.append(state)
                continue
            state.untrusted = False
            job, limits = self.job_for(document, state, measure=measure, unsaved=unsaved)
            text = document.text
            key = job_key(job, content_hash(text), self.settings.interpreter)
            self.scheduler.submit(state.key, lambda s=state, j=job, x=limits, k=key, t=text, c=use_cache:
                                  self._job(s, j, x, k, t, c), delay_s=delay_s, bounded=False)
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
                    text, program = read_document(owner_path)
                    owner = self.open(owner_path, state.key.root, text, from_disk=True, program=program)
                except (OSError, SyntaxError, UnicodeDecodeError, NotebookError):
                    continue
            self.analyse(owner, [state.key.name])

    def reanalyse_all(self) -> None:
        """Analyse every target of every tracked document (after trust or settings changed)."""
        for document in list(self.store.documents.values()):
            self.analyse(document)

    async def finished(self, state: TargetState) -> None:
        """Wait for the job of ``state`` that is queued or running, if any."""
        task = self.scheduler.task(state.key)
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    async def _job(self, state: TargetState, job: dict, limits: Limits, key: str, text: str, use_cache: bool) -> None:
        task = asyncio.current_task()
        before = state.files
        if use_cache:
            kept = await asyncio.to_thread(self._kept, state, key, job["workspace_root"], text)
            if kept is not None:
                if self.scheduler.is_current(state.key, task):
                    take(state, kept)
                    self.estimates.follow(state, job, limits, kept.result, python=self.settings.interpreter)
                    self._notify([state], before)
                    self.scheduler.submit(("compare", state.key), lambda s=state: self.baselines.compare([s]))
                    self.plans.after_analysis(state, unsaved=job.get("source_text") is not None)
                return
        self.plans.cancel(state)  # a plan of the code before this analysis no longer holds
        async with self.scheduler.slot():
            await self._run_worker(state, task, job, limits, key, text, before, force=not use_cache)

    async def _run_worker(self, state: TargetState, task: asyncio.Task | None, job: dict, limits: Limits, key: str,
                          text: str, before: set[str], *, force: bool = False) -> None:
        state.running = True
        self.listener.job_started(state, task, f"analysing {state.key.name}")
        self._notify([state], set())
        ahead = self.baselines.resolve_ahead(state)  # git answers while the worker runs
        try:
            result = await self.run_job(job, python=limits.python, timeout_s=limits.timeout_s,
                                        memory_mb=limits.memory_mb)
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
        if result.get("ok"):  # hashing the imported files and writing the entry: off the event loop
            await asyncio.to_thread(self.cache.put, key, result, self.file_hash(job["workspace_root"]))
            self._tell_cache_problem()
        outcome = await asyncio.to_thread(prepare, state.key, result, text)
        if not self.scheduler.is_current(state.key, task):
            return
        take(state, outcome)
        self.estimates.follow(state, job, limits, result, python=self.settings.interpreter, force=force)
        if result.get("ok"):  # its deltas with it, in the same refresh
            await self.baselines.refresh(state, ahead)
        self._notify([state], before)
        if result.get("ok"):
            self.plans.after_analysis(state, unsaved=job.get("source_text") is not None)

    def _kept(self, state: TargetState, key: str, root: str, text: str) -> Outcome | None:
        """The kept result of ``key`` that still holds, prepared; ``None`` without one. Runs in a
        thread: it hashes every file the result imported."""
        result = self.cache.get(key, self.file_hash(root))
        return None if result is None else prepare(state.key, result, text)

    def _tell_cache_problem(self) -> None:
        """Tell the listener, once, why results are not kept on disk (:attr:`ResultCache.problem`)."""
        problem = self.cache.problem
        if problem is not None and problem != self._told_cache_problem:
            self._told_cache_problem = problem
            self.listener.notice(problem)

    def notify_states(self, states: list[TargetState]) -> None:
        """Tell the listener that ``states`` changed (a baseline arrived)."""
        self._notify(states, set())

    def _notify(self, states: list[TargetState], before: set[str]) -> None:
        files: set[tuple[str, str]] = set()
        for state in states:
            files |= {(state.key.root, rel) for rel in state.files | before}
        self.listener.states_changed(states, files)

    # the worker, besides analyses ---------------------------------------------------------------

    async def render_html(self, state: TargetState, html_path: str) -> dict:
        """Render ``state``'s page as the editor shows it (:func:`~torchscan_lsp.session.jobs.page_job`)
        as one offline HTML file in a worker process (rendering imports torch). Returns ``{"ok":
        true, "path": ...}`` or a failure result."""
        return await worker_client.render_html(page_job(state, self.settings_for(state.key.root)), html_path, python=self.settings.python)

    async def prewarm(self, roots: Iterable[str] = ()) -> None:
        """Start the configured interpreter's warm worker ahead of the first job, primed with what
        the annotated files under ``roots`` import, or stop the early one (:func:`.preloading.prewarm`)."""
        await prewarm(self.settings.interpreter, self.may_execute, roots)

    def preloaded_packages(self) -> list[str]:
        """Top-level packages the configured interpreter's warm worker has learned from the jobs
        and preloaded (``transformers``, say)."""
        return pool.preloaded_packages(self.settings.interpreter)

    def shutdown(self) -> None:
        """Cancel every job and stop the warm workers."""
        self.scheduler.cancel_all()
        pool.shutdown()

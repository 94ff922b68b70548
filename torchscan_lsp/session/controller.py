"""The session: from document text to target states, through the worker, for every front end.

On every change the text is scanned for targets (``ast``, never executed). On open and save (and
while typing, with ``analyzeOnType``) each target gets a job (:mod:`.jobs`): from the cache when the
target's file, the files its model imported, its options and the interpreter are unchanged, else in
a worker process through the scheduler. Results land in the :class:`~.state.Store`; a listener (the
language server, or nothing for ``check`` and ``scan``) hears when a job starts and when states
change. The session is the only way to the worker: it also renders HTML reports there, and starts
and stops the warm worker. It imports neither pygls nor torch.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Mapping, Protocol

from torchscan_lsp.contract.messages import failure
from torchscan_lsp.session.cache import ResultCache, cache_folder, job_key
from torchscan_lsp.session.jobs import Limits, build_job, build_render_job
from torchscan_lsp.session.planning import Plans
from torchscan_lsp.session.results import ResultView
from torchscan_lsp.session.scanning import rescan
from torchscan_lsp.session.scheduler import Scheduler
from torchscan_lsp.session.settings import Settings, resolve
from torchscan_lsp.session.state import Document, Store, TargetState, content_hash, relative
from torchscan_lsp.session.workspace import MARKER, SourceFile, WorkspaceConfig, read_config, read_source
from torchscan_lsp.worker import client as worker_client
from torchscan_lsp.worker import pool

__all__ = ["Listener", "RunJob", "Session"]

log = logging.getLogger(__name__)

RunJob = Callable[..., Awaitable[dict]]
"""``async (job, *, python, timeout_s, memory_mb) -> result``: :func:`torchscan_lsp.worker.client.run`."""


class Listener(Protocol):
    """What the session tells its owner."""

    def job_started(self, state: TargetState, task: asyncio.Task, title: str | None = None) -> None:
        """A worker job for ``state`` started running (``task`` may be cancelled to stop it);
        ``title`` says what it does when it is not an analysis (a plan)."""

    def job_progress(self, state: TargetState, task: asyncio.Task, record: dict) -> None:
        """The job ``task`` of ``state`` reported progress: ``{"message": str, "done": fraction}``."""

    def states_changed(self, states: list[TargetState], files: set[tuple[str, str]]) -> None:
        """``states`` changed; ``files`` are the ``(root, rel)`` pairs whose features may differ."""


class _Silent:
    def job_started(self, state: TargetState, task: asyncio.Task, title: str | None = None) -> None:
        pass

    def job_progress(self, state: TargetState, task: asyncio.Task, record: dict) -> None:
        pass

    def states_changed(self, states: list[TargetState], files: set[tuple[str, str]]) -> None:
        pass


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
        auto_plan: plan a target whose options ask for a plan after each of its analyses
            (:mod:`.planning`; ``check`` does not).

    Attributes:
        plan_every: plan every target after its analysis, asked for (``scan --plan``).
    """

    def __init__(self, settings: Settings | None = None, *, trusted: bool = False, listener: Listener | None = None,
                 run_job: RunJob = worker_client.run, keep_results: bool = False, auto_plan: bool = True) -> None:
        self.settings = settings or Settings()
        self.trusted = trusted
        self.listener = listener or _Silent()
        self.run_job = run_job
        self.store = Store()
        self.cache = ResultCache()
        self.keep_results = keep_results
        self.scheduler = Scheduler(self.settings.maxWorkers)
        self.plans = Plans(self)
        self.auto_plan = auto_plan
        self.plan_every = False
        self._configs: dict[str, WorkspaceConfig] = {}

    @property
    def may_execute(self) -> bool:
        """Whether workspace code may run: trusted by the client, or allowed in the settings."""
        return self.trusted or self.settings.allowExecution

    # the workspace ---------------------------------------------------------------------------

    def workspace_config(self, root: str) -> WorkspaceConfig:
        """``root``'s ``[tool.torchscan-lsp]`` table, read once until :meth:`forget_workspace_config`."""
        if root not in self._configs:
            self._configs[root] = read_config(root)
        return self._configs[root]

    def config_error(self, root: str) -> Any | None:
        """The error of ``root``'s ``[tool.torchscan-lsp]`` table (``.message``, ``.line``), if any."""
        return self.workspace_config(root).error

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
        old, self.settings = self.settings, new
        self.scheduler.set_max_workers(new.maxWorkers)
        self.cache.persist(cache_folder("results") if self.keep_results and new.cacheResults else None)
        return old, problems

    # documents -------------------------------------------------------------------------------

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

    def open_files(self, files: Iterable[SourceFile], root: str) -> tuple[list[Document], list[tuple[Path, str]]]:
        """Open the files a command was given (:func:`~.workspace.python_files`): a file it named
        always, one found under a folder only when it mentions ``torchscan``. Returns the documents
        and, for each file that could not be read, its path and what went wrong."""
        documents, problems = [], []
        for source in files:
            try:
                text = read_source(source.path)
            except OSError as error:
                problems.append((source.path, "no such file" if isinstance(error, FileNotFoundError)
                                 else f"cannot read: {error.strerror or error}"))
                continue
            except (SyntaxError, UnicodeDecodeError) as error:
                problems.append((source.path, f"cannot decode the file: {error}"))
                continue
            if source.explicit or MARKER in text:
                documents.append(self.open(str(source.path), root, text))
        return documents, problems

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
                return content_hash(Path(path).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                return None

        return digest

    def job_for(self, document: Document, state: TargetState, *, measure: Iterable[str] = (),
                unsaved: bool = False) -> tuple[dict, Limits]:
        """The worker job for ``state`` and its limits (:func:`~.jobs.build_job`)."""
        defaults = self.workspace_config(document.root).defaults
        return build_job(document.root, document.path, state.target, defaults, self.settings, measure=measure,
                         source_text=document.text if unsaved else None)

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
            job, limits = self.job_for(document, state, measure=measure, unsaved=unsaved)
            text = document.text
            key = job_key(job, content_hash(text), self.settings.interpreter)
            cached = self.cache.get(key, self.file_hash(document.root)) if use_cache else None
            if cached is not None:
                self.scheduler.cancel(state.key)
                changed.append(self._apply(state, cached, text))
                self._after(state, unsaved)
                continue
            self.plans.cancel(state)  # a plan of the code before this analysis no longer holds
            self.scheduler.submit(state.key, lambda s=state, j=job, x=limits, k=key, t=text: self._job(s, j, x, k, t),
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

    async def finished(self, state: TargetState) -> None:
        """Wait for the job of ``state`` that is queued or running, if any."""
        task = self.scheduler.task(state.key)
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    async def _job(self, state: TargetState, job: dict, limits: Limits, key: str, text: str) -> None:
        task = asyncio.current_task()
        state.running = True
        self.listener.job_started(state, task)
        self._notify([state], set())
        before = state.files
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
        state.running = False
        if result.get("ok"):
            self.cache.put(key, result, self.file_hash(job["workspace_root"]))
        self._apply(state, result, text)
        self._notify([state], before)
        if result.get("ok"):
            self._after(state, job.get("source_text") is not None)

    def _after(self, state: TargetState, unsaved: bool) -> None:
        """After a good result of ``state``: its plan, when its options ask for one (or every
        target's, asked for, with :attr:`plan_every`)."""
        if self.plan_every:
            document = self.store.documents.get(str(Path(state.key.root, state.key.file)))
            if document is not None:
                self.plans.request(document, [state.key.name], requested=True, unsaved=unsaved)
        elif self.auto_plan:
            self.plans.after_analysis(state, unsaved=unsaved)

    def _apply(self, state: TargetState, result: dict, text: str) -> TargetState:
        """Take ``result`` of ``state``'s job, whose target file read ``text``."""
        if result.get("ok"):
            state.analysed_hash = content_hash(text)
            state.view = ResultView(result)
            state.set_analysed_texts(self._texts(state, text, {file for file, _ in state.view.lines}))
            state.error = None
            state.stale = False
            # a failure is the latest job's only: a later analysis that did not measure clears it
            state.measurements = {kind: record for kind, record in state.measurements.items()
                                  if not (isinstance(record, dict) and "error" in record)}
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

    # the worker, besides analyses ---------------------------------------------------------------

    async def render_html(self, state: TargetState, html_path: str) -> dict:
        """Render ``state``'s last good report, with its measurements, as one offline HTML file in
        a worker process (rendering imports torch). Returns ``{"ok": true, "path": ...}`` or a
        failure result."""
        assert state.view is not None, "render_html needs a good result"
        job = build_render_job(state.key.root, state.view.report, state.measurements)
        return await worker_client.render_html(job, html_path, python=self.settings.python)

    async def prewarm(self) -> None:
        """Start the warm worker of the configured interpreter ahead of the first job (only once
        workspace code may run: it runs that interpreter), adopting the one started with the
        server (:func:`start_warm_worker_early`) when it is that interpreter's; stop that one
        otherwise."""
        if self.may_execute:
            pool.discard_early(keep=self.settings.interpreter)
            await pool.prewarm(self.settings.interpreter)
        else:  # it ran no workspace code, and will not now
            pool.discard_early()

    def preloaded_packages(self) -> list[str]:
        """Top-level packages the configured interpreter's warm worker has learned from the jobs
        and preloaded (``transformers``, say)."""
        return pool.preloaded_packages(self.settings.interpreter)

    def shutdown(self) -> None:
        """Cancel every job and stop the warm workers."""
        self.scheduler.cancel_all()
        pool.shutdown()


def start_warm_worker_early() -> None:
    """Start the warm worker of this interpreter now, before the language server imports its own
    libraries, so that torch imports meanwhile. It runs no workspace code; :meth:`Session.prewarm`
    adopts it once the workspace is trusted, or stops it."""
    pool.spawn_early()

"""The torchscan language server: a pygls server over a :class:`~torchscan_lsp.session.Session`.

Each LSP feature lives in its own module with a ``register(server)`` function and sees the server
only through the :class:`~.features.Editor` protocol; this module builds the server object,
resolves the client's capabilities and settings once, and turns state changes into client
notifications (pushed or refreshed diagnostics, hint and lens refreshes, status).

Every handler that answers a request runs on the event loop and only reads the store, so inlay
hints, hovers and code lenses are answered at once, also while analyses run in worker processes.
This module never imports torch, nor the worker: the session is the way there.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import from_fs_path, to_fs_path

from torchscan_lsp.server import code_lens, commands, diagnostics, documents, hover, inlay_hints, notebooks
from torchscan_lsp.server.collector import QuietCollector
from torchscan_lsp.server.features import ClientFacts
from torchscan_lsp.server.notebooks import NOTEBOOK_SYNC, CellRouting, Notebooks
from torchscan_lsp.server.positions import Lines
from torchscan_lsp.server.status import Progress
from torchscan_lsp.server.watcher import WorkspaceWatcher
from torchscan_lsp.session.controller import Session
from torchscan_lsp.session.lab_notebooks import notebook_path
from torchscan_lsp.session.settings import SECTION, SETTINGS_WAIT_S, Settings
from torchscan_lsp.session.state import Document, TargetState
from torchscan_lsp.session.workspace import root_for
from torchscan_lsp.version import package_version

log = logging.getLogger(__name__)


class HeardProtocol(LanguageServerProtocol):
    """pygls' protocol, telling the server's collector (:class:`~.collector.QuietCollector`) of each
    message from the client before handling it."""

    def __init__(self, server: TorchscanServer, converter: Any) -> None:
        super().__init__(server, converter)
        self._collector = server.collector

    def handle_message(self, message: Any) -> Any:
        """Note the message, then handle it as pygls does."""
        self._collector.heard()
        return super().handle_message(message)


class TorchscanServer(LanguageServer):
    """The language server: a pygls server with a :class:`Session`; it is the features'
    :class:`~.features.Editor`.

    Attributes:
        session: documents, target states, cache, scheduler and the way to the worker.
        client: the client's capabilities, resolved at ``initialize``.
        progress: work-done progress and ``torchscan/status`` notifications.
        settings_ready: set once settings were pulled (or could not be).
        collector: runs the full garbage collections when the client is quiet, once ``main``
            handed them over (:meth:`~.collector.QuietCollector.take_over`).
    """

    def __init__(self) -> None:
        self.collector = QuietCollector()  # before pygls builds the protocol, which tells it of messages
        # No handler runs on pygls' thread pool: its one thread reads stdin.
        super().__init__("torchscan-lsp", package_version(), max_workers=1, notebook_document_sync=NOTEBOOK_SYNC,
                         protocol_cls=HeardProtocol)
        self.session = Session(listener=self, keep_results=True, separate_training=True)
        self.client = ClientFacts()
        self.client_settings: dict[str, Any] = {}
        self.settings_ready = asyncio.Event()
        self.progress = Progress(self.work_done_progress, self.protocol.notify, lambda: self.client,
                                 self.session.preloaded_packages)
        self.watcher = WorkspaceWatcher(self)
        self.notebooks = Notebooks(self)

    # errors ------------------------------------------------------------------------------------

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Log a handler's exception instead of showing a message box in the editor."""
        log.error("torchscan server error (%s): %r", getattr(source, "__name__", source), error, exc_info=error)

    # what the features see ---------------------------------------------------------------------

    def workspace_roots(self) -> list[str]:
        """The client's workspace folders, then its root path, each once."""
        folders = [to_fs_path(f.uri) for f in self.workspace.folders.values()] if self.workspace else []
        if self.workspace is not None and self.workspace.root_path:
            folders.append(self.workspace.root_path)
        return list(dict.fromkeys(f for f in folders if f))

    def root_for(self, path: str) -> str:
        """The workspace folder that contains ``path`` (the innermost), else the root, else its folder."""
        return root_for(path, self.workspace_roots())

    def document(self, uri: str) -> Document | None:
        """The tracked document of ``uri`` (a notebook cell's, or a ``jupyterlab-lsp`` virtual
        document's: its notebook's), or ``None``."""
        path = to_fs_path(uri) or self.notebooks.path_of_cell(uri)
        return self.session.store.documents.get(str(Path(notebook_path(path)).resolve())) if path else None

    def buffer_text(self, uri: str) -> str:
        """The client's current text of the document at ``uri``."""
        return self.workspace.get_text_document(uri).source

    def lines(self, document: Document) -> Lines:
        """``document``'s lines with the negotiated position encoding."""
        return Lines(document.text, self.workspace.position_codec.client_num_units)

    def states_for(self, document: Document) -> list[TargetState]:
        """Target states that annotate ``document`` (own targets first)."""
        return self.session.store.states_for_file(document.root, document.rel, document.path)

    def show_message(self, text: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        """Show ``text`` in the editor's message area."""
        self.window_show_message(types.ShowMessageParams(type=kind, message=text))

    def notice(self, message: str) -> None:
        """Listener hook: something the user hears once (results not kept between sessions, and
        why): a warning in the log and one in the editor's message area."""
        log.warning("%s", message)
        self.show_message(f"torchscan: {message}")

    async def show_document(self, path: str, *, external: bool) -> Any:
        """Ask the client to show the file at ``path``, when it can: its ``ShowDocumentResult``,
        else ``None``."""
        if self.client.show_document:
            return await self.window_show_document_async(types.ShowDocumentParams(
                uri=from_fs_path(path), external=external, take_focus=True))
        return None

    # settings ----------------------------------------------------------------------------------

    async def wait_for_settings(self) -> None:
        """Return once the settings were pulled, at most :data:`SETTINGS_WAIT_S` from now."""
        try:
            await asyncio.wait_for(self.settings_ready.wait(), SETTINGS_WAIT_S)
        except asyncio.TimeoutError:
            self.settings_ready.set()

    async def pull_settings(self) -> None:
        """Ask the client for section ``torchscan`` and apply it over the pyproject defaults."""
        if self.client.configuration:
            try:
                answer = await asyncio.wait_for(
                    self.workspace_configuration_async(types.ConfigurationParams(
                        items=[types.ConfigurationItem(section=SECTION)])), SETTINGS_WAIT_S)
                if answer and isinstance(answer[0], dict):
                    self.client_settings = answer[0]
            except Exception as error:  # a client that cannot answer leaves the defaults
                log.warning("could not pull settings: %r", error)
        try:
            self.apply_settings()
        finally:  # whatever went wrong, documents waiting for the settings go on with what there is
            self.settings_ready.set()

    def apply_settings(self) -> None:
        """Resolve settings from pyproject and the client; re-analyse when execution became allowed
        or the interpreter changed."""
        root = self.workspace.root_path if self.workspace is not None else None
        old, problems = self.session.configure(root, self.client_settings)
        for problem in problems:
            self.window_log_message(types.LogMessageParams(type=types.MessageType.Warning, message=problem))
        new: Settings = self.session.settings
        became_allowed = new.allowExecution and not old.allowExecution
        if self.settings_ready.is_set() and (became_allowed or new.python != old.python):
            self.session.reanalyse_all()
        elif new.compareWith != old.compareWith:  # the same results, other baselines
            asyncio.ensure_future(self.session.baselines.compare(list(self.session.store.targets.values())))
        shown = (new.headline, new.receptiveFieldNotes) != (old.headline, old.receptiveFieldNotes)
        if shown:  # other numbers and other diagnostics on every open document
            for document in list(self.session.store.documents.values()):
                self.publish(document)
        if shown or new.inlayHints != old.inlayHints:
            self.refresh_views()

    # notifications ----------------------------------------------------------------------------

    def job_started(self, state: TargetState, task: asyncio.Task, activity: str) -> None:
        """Listener hook: show progress for a starting job (``activity``: what it does)."""
        self.progress.job_started(state, task, activity)

    def job_progress(self, state: TargetState, task: asyncio.Task, record: dict) -> None:
        """Listener hook: report a running job's progress."""
        self.progress.job_progress(state, task, record)

    def states_changed(self, states: list[TargetState], files: set[tuple[str, str]]) -> None:
        """Listener hook: update diagnostics, hints, lenses and status of the affected open files."""
        self.watcher.refresh()  # a document just opened, or a result imported other files: watch them now
        touched = {(s.key.root, s.key.file) for s in states} | files
        for document in list(self.session.store.documents.values()):
            if (document.root, document.rel) in touched:
                self.publish(document)
        for root, rel in {(s.key.root, s.key.file) for s in states}:
            own = self.session.store.states_in(root, rel)
            self.progress.send_status(from_fs_path(str(Path(root, rel))), own)
        self.refresh_views()

    def diagnostics_for(self, document: Document) -> list[types.Diagnostic]:
        """All diagnostics of ``document`` (one builder for pushes and pulls)."""
        settings = self.session.settings
        return diagnostics.build_diagnostics(document.rel, self.lines(document), document.problems,
                                             self.states_for(document), self.session.workspace_config(document.root).error,
                                             self.client.name, path=document.path, headline=settings.headline,
                                             receptive_field_notes=settings.receptiveFieldNotes,
                                             options=self.session.target_options)

    def publish(self, document: Document) -> None:
        """Push ``document``'s diagnostics, unless the client pulls them (then it is asked to). A
        notebook's are pushed to its cells in any case (:meth:`Notebooks.publish`); those of a
        notebook that ``jupyterlab-lsp`` sends as one text document go to that document."""
        if document.program is not None and document.uri is None:
            self.notebooks.publish(document, self.diagnostics_for(document))
            return
        if self.client.pull_diagnostics:
            return
        items = self.diagnostics_for(document)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=document.uri or from_fs_path(document.path), diagnostics=items))

    def document_closed(self, uri: str) -> None:
        """A document was closed: withdraw its pushed diagnostics (pulling clients drop them
        themselves) and stop watching the folders that no open document needs any more."""
        if not self.client.pull_diagnostics:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        self.watcher.refresh()

    def refresh_views(self) -> None:
        """Ask the client to re-request inlay hints, code lenses and pulled diagnostics."""
        if self.client.inlay_hint_refresh:
            self.workspace_inlay_hint_refresh(None)
        if self.client.code_lens_refresh:
            self.workspace_code_lens_refresh(None)
        if self.client.pull_diagnostics:
            self.workspace_diagnostic_refresh(None)


def create_server() -> TorchscanServer:
    """Build the server with every feature registered."""
    server = TorchscanServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: TorchscanServer, params: types.InitializeParams) -> None:
        options = params.initialization_options if isinstance(params.initialization_options, dict) else {}
        ls.session.trusted = bool(options.get("trusted", False))
        ls.client = ClientFacts.resolve(params)
        if isinstance(options.get("settings"), dict):
            ls.client_settings = options["settings"]
        if ls.client.pull_diagnostics:
            diagnostics.register_pull(CellRouting(ls))

    @server.feature(types.INITIALIZED)
    async def initialized(ls: TorchscanServer, params: types.InitializedParams) -> None:
        ls.watcher.start()
        await ls.pull_settings()
        asyncio.ensure_future(ls.session.prewarm(ls.workspace_roots()))

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def configuration_changed(ls: TorchscanServer, params: types.DidChangeConfigurationParams) -> None:
        settings = params.settings.get(SECTION) if isinstance(params.settings, dict) else None
        if isinstance(settings, dict):
            ls.client_settings = settings
            ls.apply_settings()
        else:
            await ls.pull_settings()

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: TorchscanServer, params: Any) -> None:
        ls.watcher.stop()
        ls.session.shutdown()

    for module in (documents, notebooks, commands):
        module.register(server)
    for feature in (inlay_hints, hover, code_lens):  # answered on notebook cells too
        feature.register(CellRouting(server))
    return server


class LateCancelFilter(logging.Filter):
    """Drops pygls's warning about a ``$/cancelRequest`` for a request already answered.

    A client cancels requests it no longer needs (VS Code does so for inlay hints, code lenses
    and hovers as the view moves); when the answer went out first, the cancellation finds no
    request, which the protocol allows and which is no fault of the server or the client.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Cancel notification for unknown message id")


def main(transport: str = "stdio", port: int | None = None) -> int:
    """Run the server over stdio or TCP (``127.0.0.1:port``); logs go to stderr."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("pygls").setLevel(logging.WARNING)  # it logs every message at INFO
    logging.getLogger("pygls.protocol.json_rpc").addFilter(LateCancelFilter())
    server = create_server()
    server.collector.take_over()  # what exists now lives as long as the process
    if transport == "tcp":
        server.start_tcp("127.0.0.1", port or 2087)
    else:
        server.start_io()
    return 0

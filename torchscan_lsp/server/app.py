"""The torchscan language server: wiring of settings, documents, analyses and LSP features.

Each LSP feature lives in its own module with a ``register(server)`` function; this module builds
the server object, resolves client capabilities and settings once, and turns state changes into
client notifications (pushed or refreshed diagnostics, hint and lens refreshes, status).

Every handler that answers a request runs on the event loop and only reads the store, so inlay
hints, hovers and code lenses are answered at once, also while analyses run in worker processes.
This module never imports torch.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import tomllib
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from torchscan_lsp.server import code_lens, commands, diagnostics, documents, hover, inlay_hints
from torchscan_lsp.server.analysis import Analyzer
from torchscan_lsp.server.positions import Lines
from torchscan_lsp.server.settings import SECTION, SETTINGS_WAIT_S, Settings, resolve
from torchscan_lsp.server.state import Document, TargetState
from torchscan_lsp.server.status import Progress
from torchscan_lsp.server.watcher import WorkspaceWatcher
from torchscan_lsp.version import package_version
from torchscan_lsp.worker import pool

log = logging.getLogger(__name__)


def pyproject_settings(root: str) -> dict[str, Any]:
    """Setting defaults from ``root/pyproject.toml`` ``[tool.torchscan-lsp]``: its ``device`` and
    its ``timeout`` (as ``timeoutSeconds``); {} when absent or unreadable (the targets layer reports
    a broken table). The table holds target options, so only these two are settings too."""
    try:
        with open(Path(root, "pyproject.toml"), "rb") as handle:
            table = tomllib.load(handle).get("tool", {}).get("torchscan-lsp", {})
    except (OSError, tomllib.TOMLDecodeError):
        return {}
    if not isinstance(table, dict):
        return {}
    found = {"device": table.get("device"), "timeoutSeconds": table.get("timeout")}
    return {key: value for key, value in found.items() if value is not None}


class TorchscanServer(LanguageServer):
    """The language server: a pygls server with an :class:`Analyzer` and client facts.

    Attributes:
        analyzer: documents, target states, cache and scheduler.
        progress: work-done progress and ``torchscan/status`` notifications.
        pull_diagnostics: the client pulls diagnostics (and can be asked to refresh them); when
            false, diagnostics are pushed with ``textDocument/publishDiagnostics``.
        settings_ready: set once settings were pulled (or could not be).
        client_name: the name the client gave in ``initialize`` (``clientInfo.name``), or ``None``.
    """

    def __init__(self) -> None:
        super().__init__("torchscan-lsp", package_version(), max_workers=4)
        self.progress = Progress(self)
        self.analyzer = Analyzer(listener=self)
        self.pull_diagnostics = False
        self.client_settings: dict[str, Any] = {}
        self.settings_ready = asyncio.Event()
        self.client_name: str | None = None
        self.watcher = WorkspaceWatcher(self)

    # errors ------------------------------------------------------------------------------------

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Log a handler's exception instead of showing a message box in the editor."""
        log.error("torchscan server error (%s): %r", getattr(source, "__name__", source), error, exc_info=error)

    # paths -------------------------------------------------------------------------------------

    def root_for(self, path: str) -> str:
        """The workspace folder that contains ``path`` (the innermost), else the root, else its folder."""
        folders = [to_fs_path(f.uri) for f in self.workspace.folders.values()] if self.workspace else []
        if self.workspace is not None and self.workspace.root_path:
            folders.append(self.workspace.root_path)
        resolved = Path(path).resolve()
        containing = [f for f in folders if f and resolved.is_relative_to(Path(f).resolve())]
        return str(Path(max(containing, key=len)).resolve()) if containing else str(resolved.parent)

    def document(self, uri: str) -> Document | None:
        """The tracked document of ``uri``, or ``None``."""
        path = to_fs_path(uri)
        return self.analyzer.store.documents.get(str(Path(path).resolve())) if path else None

    def lines(self, document: Document) -> Lines:
        """``document``'s lines with the negotiated position encoding."""
        return Lines(document.text, self.workspace.position_codec.client_num_units)

    def states_for(self, document: Document) -> list[TargetState]:
        """Target states that annotate ``document`` (own targets first)."""
        return self.analyzer.store.states_for_file(document.root, document.rel)

    # settings ----------------------------------------------------------------------------------

    async def pull_settings(self) -> None:
        """Ask the client for section ``torchscan`` and apply it over the pyproject defaults."""
        capabilities = self.client_capabilities.workspace
        if capabilities is not None and capabilities.configuration:
            try:
                answer = await asyncio.wait_for(
                    self.workspace_configuration_async(types.ConfigurationParams(
                        items=[types.ConfigurationItem(section=SECTION)])), SETTINGS_WAIT_S)
                if answer and isinstance(answer[0], dict):
                    self.client_settings = answer[0]
            except Exception as error:  # a client that cannot answer leaves the defaults
                log.warning("could not pull settings: %r", error)
        self.apply_settings()
        self.settings_ready.set()

    def apply_settings(self) -> None:
        """Resolve settings from pyproject and the client; re-analyse when execution became allowed
        or the interpreter changed."""
        root = self.workspace.root_path if self.workspace is not None else None
        new, problems = resolve(pyproject_settings(root) if root else {}, self.client_settings)
        for problem in problems:
            self.window_log_message(types.LogMessageParams(type=types.MessageType.Warning, message=problem))
        old: Settings = self.analyzer.settings
        self.analyzer.settings = new
        self.analyzer.scheduler.set_max_workers(new.maxWorkers)
        became_allowed = new.allowExecution and not old.allowExecution
        if self.settings_ready.is_set() and (became_allowed or new.python != old.python):
            self.analyzer.reanalyse_all()
        if new.inlayHints != old.inlayHints:
            self.refresh_views()

    # notifications ----------------------------------------------------------------------------

    def job_started(self, state: TargetState, task: asyncio.Task) -> None:
        """Listener hook: show progress for a starting job."""
        self.progress.job_started(state, task)

    def states_changed(self, states: list[TargetState], files: set[tuple[str, str]]) -> None:
        """Listener hook: update diagnostics, hints, lenses and status of the affected open files."""
        touched = {(s.key.root, s.key.file) for s in states} | files
        for document in list(self.analyzer.store.documents.values()):
            if (document.root, document.rel) in touched:
                self.publish(document)
        for root, rel in {(s.key.root, s.key.file) for s in states}:
            own = self.analyzer.store.states_in(root, rel)
            self.progress.send_status(from_fs_path(str(Path(root, rel))), own)
        self.refresh_views()

    def diagnostics_for(self, document: Document) -> list[types.Diagnostic]:
        """All diagnostics of ``document`` (one builder for pushes and pulls)."""
        return diagnostics.build_diagnostics(document.rel, self.lines(document), document.problems,
                                             self.states_for(document), self.analyzer.config_error(document.root),
                                             self.client_name)

    def publish(self, document: Document) -> None:
        """Push ``document``'s diagnostics, unless the client pulls them (then it is asked to)."""
        if self.pull_diagnostics:
            return
        items = self.diagnostics_for(document)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=from_fs_path(document.path), diagnostics=items))

    def refresh_views(self) -> None:
        """Ask the client to re-request inlay hints, code lenses and pulled diagnostics."""
        workspace = self.client_capabilities.workspace
        if workspace is None:
            return
        if workspace.inlay_hint is not None and workspace.inlay_hint.refresh_support:
            self.workspace_inlay_hint_refresh(None)
        if workspace.code_lens is not None and workspace.code_lens.refresh_support:
            self.workspace_code_lens_refresh(None)
        if self.pull_diagnostics:
            self.workspace_diagnostic_refresh(None)


def client_pulls_diagnostics(capabilities: types.ClientCapabilities) -> bool:
    """Pull only for clients that pull and accept ``workspace/diagnostic/refresh``: analyses
    finish after the client's pull, so a client that cannot be asked to pull again gets pushes."""
    pulls = capabilities.text_document is not None and capabilities.text_document.diagnostic is not None
    workspace = capabilities.workspace
    refresh = workspace is not None and workspace.diagnostics is not None and bool(workspace.diagnostics.refresh_support)
    return pulls and refresh


def create_server() -> TorchscanServer:
    """Build the server with every feature registered."""
    server = TorchscanServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: TorchscanServer, params: types.InitializeParams) -> None:
        options = params.initialization_options if isinstance(params.initialization_options, dict) else {}
        ls.analyzer.trusted = bool(options.get("trusted", False))
        ls.client_name = params.client_info.name if params.client_info is not None else None
        if isinstance(options.get("settings"), dict):
            ls.client_settings = options["settings"]
        ls.pull_diagnostics = client_pulls_diagnostics(params.capabilities)
        if ls.pull_diagnostics:
            diagnostics.register_pull(ls)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: TorchscanServer, params: types.InitializedParams) -> None:
        await ls.pull_settings()
        ls.watcher.start()
        if ls.analyzer.may_execute:  # the warm worker runs the configured interpreter: only once trusted
            pool.discard_early(keep=ls.analyzer.settings.interpreter)
            asyncio.ensure_future(pool.prewarm(ls.analyzer.settings.interpreter))
        else:  # started with the server on speculation (it ran no workspace code): not needed now
            pool.discard_early()

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
        ls.analyzer.scheduler.cancel_all()
        ls.watcher.stop()
        pool.shutdown()

    for module in (documents, inlay_hints, hover, code_lens, commands):
        module.register(server)
    return server


def main(transport: str = "stdio", port: int | None = None) -> int:
    """Run the server over stdio or TCP (``127.0.0.1:port``); logs go to stderr."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("pygls").setLevel(logging.WARNING)  # it logs every message at INFO
    server = create_server()
    if transport == "tcp":
        server.start_tcp("127.0.0.1", port or 2087)
    else:
        server.start_io()
    return 0

"""What an LSP feature sees of the server: a small protocol, never the server class.

Each feature module (documents, inlay hints, hover, code lens, diagnostics, commands, the file
watcher) has a ``register(server)`` that adds its handlers to the pygls server; the handlers and
every helper they call see the server only as an :class:`Editor`: the session's documents and
target states, a document's lines in the client's position encoding, the client's capabilities
(resolved once, at ``initialize``: :class:`ClientFacts`) and the few things a feature asks of the
client. So no feature imports the server module, nor another feature (their shared texts and
command ids are in :mod:`.messages`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from lsprotocol import types

from torchscan_lsp.server.positions import Lines
from torchscan_lsp.session.controller import Session
from torchscan_lsp.session.state import Document, TargetState

__all__ = ["ClientFacts", "Editor"]


@dataclass(frozen=True)
class ClientFacts:
    """The client's capabilities, resolved once at ``initialize``.

    Attributes:
        name: the editor's name: the ``editor`` of ``initializationOptions`` (``"vscode"`` from the
            VS Code extension, whose application calls itself Visual Studio Code, code-server,
            VSCodium…), else the name the client gave (``clientInfo.name``), else ``None``; it
            words the advice on how to allow execution.
        pull_diagnostics: the client pulls diagnostics and can be asked to pull again; other
            clients get them pushed (never both: a client would show each one twice).
        inlay_hint_refresh: the client can be asked to re-request inlay hints.
        code_lens_refresh: the client can be asked to re-request code lenses.
        work_done_progress: the client shows ``window/workDoneProgress``.
        show_document: the client can be asked to show a document (``window/showDocument``).
        configuration: the client answers ``workspace/configuration``.
    """

    name: str | None = None
    pull_diagnostics: bool = False
    inlay_hint_refresh: bool = False
    code_lens_refresh: bool = False
    work_done_progress: bool = False
    show_document: bool = False
    configuration: bool = False

    @classmethod
    def resolve(cls, params: types.InitializeParams) -> ClientFacts:
        """Read the facts from the ``initialize`` request.

        Diagnostics are pulled only by clients that pull and accept ``workspace/diagnostic/refresh``:
        analyses finish after the client's pull, so a client that cannot be asked to pull again gets
        pushes.
        """
        capabilities = params.capabilities
        text, workspace, window = capabilities.text_document, capabilities.workspace, capabilities.window
        refresh = workspace is not None and workspace.diagnostics is not None and bool(workspace.diagnostics.refresh_support)
        options = params.initialization_options if isinstance(params.initialization_options, dict) else {}
        editor = options.get("editor")
        return cls(
            name=editor if isinstance(editor, str) else (params.client_info.name if params.client_info else None),
            pull_diagnostics=text is not None and text.diagnostic is not None and refresh,
            inlay_hint_refresh=bool(workspace and workspace.inlay_hint and workspace.inlay_hint.refresh_support),
            code_lens_refresh=bool(workspace and workspace.code_lens and workspace.code_lens.refresh_support),
            work_done_progress=bool(window and window.work_done_progress),
            show_document=bool(window and window.show_document and window.show_document.support),
            configuration=bool(workspace and workspace.configuration),
        )


class Editor(Protocol):
    """The server as the features see it."""

    session: Session
    """Documents, target states, settings, and the way to the worker."""

    client: ClientFacts
    """The client's capabilities, resolved at ``initialize``."""

    def document(self, uri: str) -> Document | None:
        """The tracked document of ``uri``, or ``None``."""

    def buffer_text(self, uri: str) -> str:
        """The client's current text of the document at ``uri``."""

    def root_for(self, path: str) -> str:
        """The workspace folder that holds ``path``."""

    def lines(self, document: Document) -> Lines:
        """``document``'s lines in the client's position encoding."""

    def states_for(self, document: Document) -> list[TargetState]:
        """The target states with something to say about ``document`` (its own first)."""

    async def wait_for_settings(self) -> None:
        """Return once the client's settings arrived (or could not arrive in time)."""

    def apply_settings(self) -> None:
        """Resolve the settings again (a ``pyproject.toml`` changed, say) and act on what changed."""

    def states_changed(self, states: list[TargetState], files: set[tuple[str, str]]) -> None:
        """Tell the client what changed: diagnostics, hints, lenses and status of those files."""

    def diagnostics_for(self, document: Document) -> list[types.Diagnostic]:
        """All diagnostics of ``document``."""

    def document_closed(self, uri: str) -> None:
        """A document was closed: withdraw its pushed diagnostics (nothing for pulling clients) and
        stop watching what no open document needs."""

    def show_message(self, text: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        """Show ``text`` in the editor's message area."""

    async def show_document(self, path: str, *, external: bool) -> Any:
        """Ask the client to show the file at ``path`` (only when it can): its answer
        (``ShowDocumentResult``), or ``None`` when not asked."""

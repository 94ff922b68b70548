"""Document synchronisation: open, change, save and close, turned into scans and analyses.

Open and save analyse (after the settings have arrived, at most
:data:`~torchscan_lsp.session.settings.SETTINGS_WAIT_S` later); a change only rescans and marks
results stale (and analyses the buffer, debounced, with ``torchscan.analyzeOnType``). Saving
``pyproject.toml`` re-reads the workspace defaults.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from torchscan_lsp.server.features import Editor


def _path(uri: str) -> str | None:
    path = to_fs_path(uri)
    return str(Path(path).resolve()) if path and path.endswith(".py") else None


def _disk_text(path: str) -> str | None:
    """The file's text on disk; ``None`` for a new buffer, or a file the worker could not read either."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def register(server: LanguageServer) -> None:
    """Register the text document synchronisation handlers (full text sync, with save)."""

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: Editor, params: types.DidOpenTextDocumentParams) -> None:
        path = _path(params.text_document.uri)
        if path is None:
            return
        await ls.wait_for_settings()
        on_disk = await asyncio.to_thread(_disk_text, path)
        text = ls.buffer_text(params.text_document.uri)
        document = ls.session.open(path, ls.root_for(path), text, saved=on_disk == text)
        states = ls.session.analyse(document, unsaved=on_disk != text)
        ls.states_changed(states, {(document.root, document.rel)})

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: Editor, params: types.DidChangeTextDocumentParams) -> None:
        path = _path(params.text_document.uri)
        if path is None or path not in ls.session.store.documents:
            return
        document = ls.session.store.documents[path]
        states = ls.session.edit(path, ls.buffer_text(params.text_document.uri))
        ls.states_changed(states, {(document.root, document.rel)})

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    async def did_save(ls: Editor, params: types.DidSaveTextDocumentParams) -> None:
        raw = to_fs_path(params.text_document.uri) or ""
        if raw.endswith("pyproject.toml"):
            ls.session.forget_workspace_config()
            ls.apply_settings()
            ls.session.reanalyse_all()
            return
        path = _path(params.text_document.uri)
        if path is None:
            return
        await ls.wait_for_settings()
        document = ls.session.open(path, ls.root_for(path), ls.buffer_text(params.text_document.uri), saved=True)
        ls.states_changed(ls.session.store.states_in(document.root, document.rel), {(document.root, document.rel)})
        ls.session.analyse_saved(path)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: Editor, params: types.DidCloseTextDocumentParams) -> None:
        path = _path(params.text_document.uri)
        if path is None:
            return
        ls.session.close(path)
        ls.document_closed(params.text_document.uri)

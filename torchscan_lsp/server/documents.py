"""Document synchronisation: open, change, save and close, turned into scans and analyses.

Open and save analyse (after the settings have arrived, at most :data:`~.settings.SETTINGS_WAIT_S`
later); a change only rescans and marks results stale (and analyses the buffer, debounced, with
``torchscan.analyzeOnType``). Saving ``pyproject.toml`` re-reads the workspace defaults.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.uris import to_fs_path

from torchscan_lsp.server.settings import SETTINGS_WAIT_S

if TYPE_CHECKING:
    from torchscan_lsp.server.app import TorchscanServer


async def _settings(ls: "TorchscanServer") -> None:
    try:
        await asyncio.wait_for(ls.settings_ready.wait(), SETTINGS_WAIT_S)
    except asyncio.TimeoutError:
        ls.settings_ready.set()


def _path(uri: str) -> str | None:
    path = to_fs_path(uri)
    return str(Path(path).resolve()) if path and path.endswith(".py") else None


def register(server: "TorchscanServer") -> None:
    """Register the text document synchronisation handlers (full text sync, with save)."""

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: "TorchscanServer", params: types.DidOpenTextDocumentParams) -> None:
        path = _path(params.text_document.uri)
        if path is None:
            return
        await _settings(ls)
        text = ls.workspace.get_text_document(params.text_document.uri).source
        try:
            on_disk = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):  # a new buffer, or a file the worker could not read either
            on_disk = None
        document = ls.analyzer.open(path, ls.root_for(path), text, saved=on_disk == text)
        states = ls.analyzer.analyse(document, unsaved=on_disk != text)
        ls.states_changed(states, {(document.root, document.rel)})

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: "TorchscanServer", params: types.DidChangeTextDocumentParams) -> None:
        path = _path(params.text_document.uri)
        if path is None or path not in ls.analyzer.store.documents:
            return
        text = ls.workspace.get_text_document(params.text_document.uri).source
        document = ls.analyzer.store.documents[path]
        states = ls.analyzer.edit(path, text)
        ls.states_changed(states, {(document.root, document.rel)})

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    async def did_save(ls: "TorchscanServer", params: types.DidSaveTextDocumentParams) -> None:
        raw = to_fs_path(params.text_document.uri) or ""
        if raw.endswith("pyproject.toml"):
            ls.analyzer.forget_workspace_defaults()
            ls.apply_settings()
            ls.analyzer.reanalyse_all()
            return
        path = _path(params.text_document.uri)
        if path is None:
            return
        await _settings(ls)
        text = ls.workspace.get_text_document(params.text_document.uri).source
        document = ls.analyzer.open(path, ls.root_for(path), text, saved=True)
        ls.states_changed(ls.analyzer.store.states_in(document.root, document.rel), {(document.root, document.rel)})
        ls.analyzer.analyse_saved(path)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: "TorchscanServer", params: types.DidCloseTextDocumentParams) -> None:
        path = _path(params.text_document.uri)
        if path is None:
            return
        ls.analyzer.close(path)
        if not ls.pull_diagnostics:
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))

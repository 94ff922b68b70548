"""Document synchronisation: open, change, save and close, turned into scans and analyses.

Open and save analyse (after the settings have arrived, at most
:data:`~torchscan_lsp.session.settings.SETTINGS_WAIT_S` later); a change only rescans and marks
results stale (and analyses the buffer, debounced, with ``torchscan.analyzeOnType``). Saving
``pyproject.toml`` re-reads the workspace defaults.

The text documents analysed (:func:`_file`) are ``.py`` files, and ``jupyterlab-lsp``'s document of
a notebook: a ``.ipynb`` path of language ``python`` (:mod:`torchscan_lsp.session.lab_notebooks`),
tracked at the notebook's path, with its rewritten IPython lines left out; an edit of it analyses
after ``torchscan.debounceMs`` of quiet, as an edited cell does (a notebook has no habit of saving).
Any other document, and a fragment ``jupyterlab-lsp`` extracts from a notebook (a ``.py`` file in
its virtual documents folder), is left alone.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from torchscan_lsp.server.features import Editor
from torchscan_lsp.session.lab_notebooks import in_virtual_folder, is_lab_notebook, lab_program, notebook_path
from torchscan_lsp.session.state import Document


def _file(uri: str, language_id: str | None) -> tuple[str, bool] | None:
    """The file the text document at ``uri`` (of language ``language_id``) is analysed as, and
    whether it is ``jupyterlab-lsp``'s document of a notebook; ``None``: it is not analysed."""
    path = to_fs_path(uri)
    if not path:
        return None
    if is_lab_notebook(path, language_id):
        return str(Path(notebook_path(path)).resolve()), True
    return (str(Path(path).resolve()), False) if path.endswith(".py") and not in_virtual_folder(path) else None


def _path(uri: str) -> str | None:
    """The ``.py`` file of an open text document at ``uri`` (see :func:`_file`)."""
    found = _file(uri, None)
    return found[0] if found is not None else None


def _lab_document(ls: Editor, uri: str) -> Document | None:
    """The tracked notebook whose ``jupyterlab-lsp`` document is at ``uri``, if it is one."""
    document = ls.document(uri)
    return document if document is not None and document.uri == uri else None


def _disk_text(path: str) -> str | None:
    """The file's text on disk; ``None`` for a new buffer, or a file the worker could not read either."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _open_lab(ls: Editor, uri: str, path: str) -> None:
    """Track and analyse the notebook at ``path`` as its ``jupyterlab-lsp`` document at ``uri``
    holds it (the job carries that text: on disk is the notebook's JSON)."""
    program = lab_program(ls.buffer_text(uri))
    document = ls.session.open(path, ls.root_for(path), program.text, saved=False, program=program)
    document.uri = uri
    states = ls.session.analyse(document, unsaved=True)
    ls.states_changed(states, {(document.root, document.rel)})


def _edit_lab(ls: Editor, uri: str, document: Document) -> None:
    """The ``jupyterlab-lsp`` document at ``uri`` of ``document`` changed: rescan, and analyse it
    after ``torchscan.debounceMs`` of quiet."""
    program = lab_program(ls.buffer_text(uri))
    edited = program.text != document.text
    states = ls.session.edit(document.path, program.text, program)
    if edited and ls.session.may_execute:
        ls.session.analyse(document, unsaved=True, delay_s=ls.session.settings.debounceMs / 1000.0)
    ls.states_changed(states, {(document.root, document.rel)})


def register(server: LanguageServer) -> None:
    """Register the text document synchronisation handlers (full text sync, with save)."""

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: Editor, params: types.DidOpenTextDocumentParams) -> None:
        found = _file(params.text_document.uri, params.text_document.language_id)
        if found is None:
            return
        path, lab = found
        await ls.wait_for_settings()
        if lab:
            _open_lab(ls, params.text_document.uri, path)
            return
        on_disk = await asyncio.to_thread(_disk_text, path)
        text = ls.buffer_text(params.text_document.uri)
        document = ls.session.open(path, ls.root_for(path), text, saved=on_disk == text)
        states = ls.session.analyse(document, unsaved=on_disk != text)
        ls.states_changed(states, {(document.root, document.rel)})

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: Editor, params: types.DidChangeTextDocumentParams) -> None:
        lab = _lab_document(ls, params.text_document.uri)
        if lab is not None:
            _edit_lab(ls, params.text_document.uri, lab)
            return
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
        await ls.wait_for_settings()
        lab = _lab_document(ls, params.text_document.uri)
        path = lab.path if lab is not None else _path(params.text_document.uri)
        if path is None:
            return
        text = ls.buffer_text(params.text_document.uri)
        program = lab_program(text) if lab is not None else None
        document = ls.session.open(path, ls.root_for(path), program.text if program is not None else text, saved=True,
                                   program=program)
        ls.states_changed(ls.session.store.states_in(document.root, document.rel), {(document.root, document.rel)})
        ls.session.analyse_saved(path)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: Editor, params: types.DidCloseTextDocumentParams) -> None:
        lab = _lab_document(ls, params.text_document.uri)
        path = lab.path if lab is not None else _path(params.text_document.uri)
        if path is None:
            return
        ls.session.close(path)
        ls.document_closed(params.text_document.uri)

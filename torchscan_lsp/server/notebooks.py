"""Jupyter notebooks in the editor: LSP 3.17 notebook synchronisation, and the features on each cell.

The server offers notebook document sync for ``jupyter-notebook`` notebooks (:data:`NOTEBOOK_SYNC`);
the client then sends ``notebookDocument/didOpen``, ``didChange``, ``didSave`` and ``didClose`` with
one text document per cell, which pygls keeps in its workspace. Each time, the notebook's cells are
joined into one program (:func:`torchscan_lsp.session.notebooks.join_cells`: the code cells in
order, IPython syntax left out) and the session tracks that program as the document of the
notebook's path, so targets, jobs, results, hints, hovers, lenses and diagnostics work on it as on
any file. A notebook has no habit of saving: an edited cell analyses after ``torchscan.debounceMs``
of quiet, as a saved file does at once (the job carries the program's text, never the file's JSON).

Requests about a cell (inlay hints, hover, code lens, pulled diagnostics) are translated at the edge
(:class:`CellRouting`): the cell's document and position become the notebook's and the program's,
the feature answers for the notebook's document as for any file, and its answer is kept to the
cell's lines and moved back onto them; ``nb.ipynb:14`` in a message becomes ``nb.ipynb:cell 3:2``.
Diagnostics are pushed to each cell, to a client that pulls them too (:meth:`Notebooks.publish` says
why). No feature module knows notebooks.

Cells are numbered from 1 among all of a notebook's cells: the sync asks for markdown and raw cells
too, so the numbers are those of the file (and of ``torchscan-lsp check``).
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any, Callable

import attrs
from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from torchscan_lsp.server.features import Editor
from torchscan_lsp.session.notebooks import (Cell, NotebookError, Program, Span, cell_tags, is_notebook, join_cells,
                                             read_program)
from torchscan_lsp.session.state import Document, content_hash

__all__ = ["NOTEBOOK_SYNC", "CellRouting", "Notebooks", "register"]

log = logging.getLogger(__name__)

NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[types.NotebookDocumentFilterWithNotebook(
        notebook="jupyter-notebook",
        cells=[types.NotebookCellLanguage(language=language) for language in ("python", "markdown", "raw")])],
    save=True,
)
"""The notebook sync the server offers: Jupyter notebooks, their Python cells (and their markdown
and raw cells, which only count in the cells' numbers)."""


class Notebooks:
    """The open notebooks of one server: which notebook each cell belongs to, and its program.

    Args:
        editor: the server (its pygls workspace holds the notebooks and their cells' text).
    """

    def __init__(self, editor: Any) -> None:
        self.editor = editor
        self.published: dict[str, set[str]] = {}
        """By notebook path: the cells whose diagnostics were pushed, so that a cell that lost them
        (it left the program, or was fixed) is pushed an empty list."""

    def program(self, notebook: types.NotebookDocument) -> Program:
        """The program of ``notebook``'s cells as the client holds them now."""
        workspace = self.editor.workspace
        cells = []
        for number, cell in enumerate(notebook.cells, start=1):
            text = workspace.get_text_document(cell.document)
            code = cell.kind == types.NotebookCellKind.Code
            language = text.language_id or "python"
            cells.append(Cell(number, "code" if code and language != "raw" else "raw" if code else "markdown",
                              text.source, cell_tags(cell.metadata), language, key=cell.document))
        return join_cells(cells)

    def path(self, notebook_uri: str) -> str | None:
        """The absolute path of the notebook file at ``notebook_uri``; ``None`` for one that is not
        a saved ``.ipynb`` file (an untitled notebook)."""
        path = to_fs_path(notebook_uri)
        return str(Path(path).resolve()) if path and is_notebook(path) else None

    def cell(self, uri: str) -> tuple[Document, Span] | None:
        """The notebook document (the program) and the span of the cell whose text document is at
        ``uri``; ``None`` for any other document, or a cell that is not in the program."""
        notebook = self.editor.workspace.get_notebook_document(cell_uri=uri) if self.editor.workspace else None
        path = self.path(notebook.uri) if notebook is not None else None
        document = self.editor.session.store.documents.get(path) if path else None
        if document is None or document.program is None:
            return None
        span = document.program.span_of(uri)
        return (document, span) if span is not None else None

    def path_of_cell(self, uri: str) -> str | None:
        """The notebook path of the cell at ``uri`` (``None``: not a cell of an open notebook)."""
        notebook = self.editor.workspace.get_notebook_document(cell_uri=uri) if self.editor.workspace else None
        return self.path(notebook.uri) if notebook is not None else None

    def publish(self, document: Document, items: list[types.Diagnostic]) -> None:
        """Push the program's diagnostics ``items`` to the cells they are on (an empty list to the
        cells that had some before).

        Cells' diagnostics are pushed even to a client that pulls diagnostics: VS Code's language
        client 9 pulls only documents shown in tabs, and a cell is none (vscode-languageserver-node
        issue 1464, fixed for its version 10), so pulled cell diagnostics never reach its Problems.
        A cell's pull is answered empty (:func:`_diagnostics`): VS Code keeps pushed and pulled
        diagnostics apart, and each would show twice otherwise."""
        program = document.program
        assert program is not None
        by_cell: dict[str, list[types.Diagnostic]] = {span.cell.key: [] for span in program.spans if span.cell.key}
        for item in items:
            found = program.locate(item.range.start.line + 1)
            if found is not None and found[0].key is not None:
                span = program.span_of(found[0].key)
                by_cell[found[0].key].append(_diagnostic_in(item, span, program, document.rel))
        for uri in self.published.get(document.path, set()) - by_cell.keys():
            by_cell[uri] = []
        self.published[document.path] = {uri for uri, found in by_cell.items() if found}
        for uri, found in by_cell.items():
            self.editor.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=found))

    def clear(self, path: str) -> None:
        """Withdraw the pushed diagnostics of a closed notebook's cells."""
        for uri in self.published.pop(path, set()):
            self.editor.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


# positions between a cell and its program --------------------------------------------------------


def _offset(span: Span) -> int:
    """Program line (0-based) minus cell line (0-based)."""
    return span.start - 1


def _inside(line: int, span: Span) -> bool:
    """Whether 0-based program ``line`` lies in ``span``."""
    return span.start - 1 <= line < span.start - 1 + span.lines


def _position(position: types.Position, by: int) -> types.Position:
    return types.Position(line=position.line + by, character=position.character)


def _range(range_: types.Range, by: int) -> types.Range:
    return types.Range(start=_position(range_.start, by), end=_position(range_.end, by))


def _diagnostic_in(item: types.Diagnostic, span: Span, program: Program, rel: str) -> types.Diagnostic:
    """``item`` (on a program line) moved onto its cell, its message naming cells."""
    return attrs.evolve(item, range=_range(item.range, -_offset(span)), message=program.relabel(item.message, rel))


def _markdown(contents: Any, program: Program, rel: str) -> Any:
    if isinstance(contents, types.MarkupContent):
        return types.MarkupContent(kind=contents.kind, value=program.relabel(contents.value, rel))
    return contents


# the features, translated -------------------------------------------------------------------------

Handler = Callable[[Editor, Any], Any]


def _inlay_hints(ls: Editor, params: types.InlayHintParams, handler: Handler, found: tuple[Document, Span]) -> Any:
    document, span = found
    by = _offset(span)
    asked = attrs.evolve(params, text_document=types.TextDocumentIdentifier(uri=from_fs_path(document.path)),
                         range=_range(params.range, by))
    hints = handler(ls, asked) or []
    # the feature keeps its hints between requests: copies are moved, never its own
    return [attrs.evolve(hint, position=_position(hint.position, -by)) for hint in hints if _inside(hint.position.line, span)]


def _hover(ls: Editor, params: types.HoverParams, handler: Handler, found: tuple[Document, Span]) -> Any:
    document, span = found
    by = _offset(span)
    asked = attrs.evolve(params, text_document=types.TextDocumentIdentifier(uri=from_fs_path(document.path)),
                         position=_position(params.position, by))
    hover = handler(ls, asked)
    if hover is None:
        return None
    assert document.program is not None
    return types.Hover(contents=_markdown(hover.contents, document.program, document.rel),
                       range=_range(hover.range, -by) if hover.range is not None else None)


def _code_lenses(ls: Editor, params: types.CodeLensParams, handler: Handler, found: tuple[Document, Span]) -> Any:
    document, span = found
    by = _offset(span)
    # the lenses' commands name the notebook, which the commands know (Editor.document)
    asked = attrs.evolve(params, text_document=types.TextDocumentIdentifier(uri=from_fs_path(document.path)))
    lenses = handler(ls, asked) or []
    return [attrs.evolve(lens, range=_range(lens.range, -by)) for lens in lenses if _inside(lens.range.start.line, span)]


def _diagnostics(ls: Editor, params: types.DocumentDiagnosticParams, handler: Handler,
                 found: tuple[Document, Span]) -> Any:
    # a cell's diagnostics are pushed, to pulling clients too (Notebooks.publish)
    return types.FullDocumentDiagnosticReport(items=[])


_TRANSLATIONS = {
    types.TEXT_DOCUMENT_INLAY_HINT: _inlay_hints,
    types.TEXT_DOCUMENT_HOVER: _hover,
    types.TEXT_DOCUMENT_CODE_LENS: _code_lenses,
    types.TEXT_DOCUMENT_DIAGNOSTIC: _diagnostics,
}


class CellRouting:
    """Registers a feature's handler so that requests about a notebook cell are translated (see the
    module's docstring): a feature module registers on it as on the server, through ``feature``."""

    def __init__(self, server: LanguageServer) -> None:
        self._server = server

    def feature(self, method: str, options: Any = None) -> Callable[[Handler], Handler]:
        """The server's ``feature`` decorator, translating cell requests of ``method``."""
        translate = _TRANSLATIONS[method]

        def decorator(handler: Handler) -> Handler:
            @functools.wraps(handler)
            def routed(ls: Editor, params: Any) -> Any:
                found = ls.notebooks.cell(params.text_document.uri)  # type: ignore[attr-defined]
                if found is None:
                    return handler(ls, params)
                return translate(ls, params, handler, found)

            self._server.feature(method, options)(routed)
            return handler

        return decorator


# synchronisation ---------------------------------------------------------------------------------


def _program(ls: Any, notebook_uri: str) -> tuple[str, Program] | None:
    """The path and the program of the open notebook at ``notebook_uri`` (``None``: an untitled
    notebook, or one the client did not open)."""
    notebook = ls.workspace.get_notebook_document(notebook_uri=notebook_uri)
    path = ls.notebooks.path(notebook_uri)
    return (path, ls.notebooks.program(notebook)) if notebook is not None and path is not None else None


def _on_disk(path: str) -> str | None:
    """The content hash of the program of the notebook file at ``path``; ``None`` when it cannot be read."""
    try:
        return content_hash(read_program(path).text)
    except (OSError, NotebookError):
        return None


def register(server: LanguageServer) -> None:
    """Register the notebook document synchronisation handlers (open, change, save, close)."""

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    async def did_open(ls: Any, params: types.DidOpenNotebookDocumentParams) -> None:
        await ls.wait_for_settings()
        found = _program(ls, params.notebook_document.uri)
        if found is None:
            return
        path, program = found
        saved = _on_disk(path) == content_hash(program.text)
        document = ls.session.open(path, ls.root_for(path), program.text, saved=saved, program=program)
        states = ls.session.analyse(document, unsaved=not saved)
        ls.states_changed(states, {(document.root, document.rel)})

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def did_change(ls: Any, params: types.DidChangeNotebookDocumentParams) -> None:
        found = _program(ls, params.notebook_document.uri)
        if found is None or found[0] not in ls.session.store.documents:
            return
        path, program = found
        document = ls.session.store.documents[path]
        edited = program.text != document.text
        states = ls.session.edit(path, program.text, program)  # a new cell order moves the lines, if nothing else
        if edited and ls.session.may_execute:  # an edited cell is analysed, as a saved file is
            ls.session.analyse(document, unsaved=True, delay_s=ls.session.settings.debounceMs / 1000.0)
        ls.states_changed(states, {(document.root, document.rel)})

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    async def did_save(ls: Any, params: types.DidSaveNotebookDocumentParams) -> None:
        await ls.wait_for_settings()
        found = _program(ls, params.notebook_document.uri)
        if found is None:
            return
        path, program = found
        document = ls.session.open(path, ls.root_for(path), program.text, saved=True, program=program)
        ls.states_changed(ls.session.store.states_in(document.root, document.rel), {(document.root, document.rel)})
        ls.session.analyse_saved(path)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def did_close(ls: Any, params: types.DidCloseNotebookDocumentParams) -> None:
        path = ls.notebooks.path(params.notebook_document.uri)
        if path is None:
            return
        ls.session.close(path)
        ls.notebooks.clear(path)

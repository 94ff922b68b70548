"""Files changed on disk outside the editor re-analyse the targets that imported them."""

import asyncio
import os
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

import lsp_support as lsp
from notebook_files import cell_line, write_notebook

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "torchscan_lsp", "serve"])

USER = '''
    import torch.nn as nn

    from widths import WIDTH


    # torchscan: input_shape=(4,)
    def build_wide():
        return nn.Linear(4, WIDTH)
'''


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, tmp_path):
    lsp_client.root = tmp_path
    lsp_client.status = lsp.attach(lsp_client)
    lsp_client.set_configuration({}, section="torchscan")
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("neovim@v0.11"), root_uri=tmp_path.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=tmp_path.as_uri(), name="ws")],
        initialization_options={"trusted": True}))
    yield
    await lsp_client.shutdown_session()


async def test_dependency_changed_on_disk_is_reanalysed(client):
    lsp.write(client.root, "widths.py", "WIDTH = 2\n")
    path = lsp.write(client.root, "wide.py", USER)
    uri = await lsp.analysed(client, client.status, path)
    line = lsp.line_of(path, "def build_wide")
    # nn.Linear(4, 2): 8 weights + 2 biases
    assert lsp.labels_by_line(await lsp.hints(client, uri))[line][0].startswith("10 params")

    # a generator (or a git checkout) rewrites the imported file; the editor never sees it
    since = client.status.mark()
    lsp.write(client.root, "widths.py", "WIDTH = 3\n")
    state, message = await client.status.wait(uri, {"done", "failed"}, since)
    # nn.Linear(4, 3): 12 weights + 3 biases
    assert state == "done" and "15 params" in message, message
    assert lsp.labels_by_line(await lsp.hints(client, uri))[line][0].startswith("15 params")


def _threads(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Threads:")))


def _inotify_watches(pid: int) -> int:
    """The folders process ``pid`` watches with inotify (one ``inotify wd:`` line each in the
    ``fdinfo`` of its inotify descriptors)."""
    watches = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd) == "anon_inode:inotify":
                watches += Path(f"/proc/{pid}/fdinfo/{fd.name}").read_text().count("inotify wd:")
        except OSError:  # closed meanwhile
            continue
    return watches


async def _until(condition) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.02)
    assert condition()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the server's /proc entries")
async def test_what_open_documents_import_is_watched_on_a_bounded_number_of_threads(client):
    root, pid = client.root, client._server.pid
    imports = "\n".join(f"from pkgs.p{i:02d}.widths import WIDTH as W{i:02d}" for i in range(100))
    total = " + ".join(f"W{i:02d}" for i in range(100))
    (root / "pkgs").mkdir()
    lsp.write(root, "pkgs/__init__.py", "")
    for i in range(100):
        (root / "pkgs" / f"p{i:02d}").mkdir()
        lsp.write(root, f"pkgs/p{i:02d}/__init__.py", "")
        lsp.write(root, f"pkgs/p{i:02d}/widths.py", "WIDTH = 1\n")
    path = lsp.write(root, "hundred.py", f"import torch.nn as nn\n\n{imports}\n\n\n"
                                         f"# torchscan: input_shape=(4,)\ndef build_hundred():\n"
                                         f"    return nn.Linear(4, {total})\n")
    uri = await lsp.analysed(client, client.status, path)
    line = lsp.line_of(path, "def build_hundred")
    # nn.Linear(4, 100): 400 weights + 100 biases
    assert lsp.labels_by_line(await lsp.hints(client, uri))[line][0].startswith("500 params")
    # the root (hundred.py's folder), pkgs and its 100 folders, each one watch of one inotify reader
    await _until(lambda: _inotify_watches(pid) == 102)
    assert _threads(pid) < 50, "a thread per watched folder"

    client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    await _until(lambda: _inotify_watches(pid) == 0)              # no open document needs any



NOTEBOOK_CELLS = ["import torch.nn as nn\n\nfrom widths import WIDTH\n",
                  "# torchscan: input_shape=(4,)\ndef build_wide():\n    return nn.Linear(4, WIDTH)\n"]
"""A notebook in a subfolder importing its sibling ``widths.py`` (script-style, as Jupyter's kernel,
started in the notebook's folder, imports it)."""


async def test_dependency_of_an_open_notebook_changed_on_disk_is_reanalysed(client):
    (client.root / "sub").mkdir()
    lsp.write(client.root, "sub/widths.py", "WIDTH = 2\n")
    path = write_notebook(client.root / "sub" / "wide.ipynb", NOTEBOOK_CELLS)
    cells = [f"vscode-notebook-cell:{path}#W{index}sZmlsZQ%3D%3D" for index in range(2)]
    uri = path.as_uri()
    since = client.status.mark()
    client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
        notebook_document=types.NotebookDocument(
            uri=uri, notebook_type="jupyter-notebook", version=1,
            cells=[types.NotebookCell(kind=types.NotebookCellKind.Code, document=cell) for cell in cells]),
        cell_text_documents=[types.TextDocumentItem(uri=cell, language_id="python", version=1, text=text)
                             for cell, text in zip(cells, NOTEBOOK_CELLS)]))
    state, message = await client.status.wait(uri, {"done", "failed"}, since)
    # nn.Linear(4, 2): 8 weights + 2 biases
    assert state == "done" and "10 params" in message, message

    # an unsaved edit of a cell: the notebook's program is no longer the file's
    since = client.status.mark()
    client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        notebook_document=types.VersionedNotebookDocumentIdentifier(uri=uri, version=2),
        change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(text_content=[
            types.NotebookDocumentCellContentChanges(
                document=types.VersionedTextDocumentIdentifier(uri=cells[1], version=2),
                changes=[types.TextDocumentContentChangeWholeDocument(
                    text=NOTEBOOK_CELLS[1].replace("WIDTH)", "WIDTH + 1)"))])]))))
    state, message = await client.status.wait(uri, {"done", "failed"}, since)
    # nn.Linear(4, 3): 12 weights + 3 biases
    assert state == "done" and "15 params" in message, message

    # the imported module is rewritten on disk: the notebook re-analyses its importer, edits kept
    since = client.status.mark()
    lsp.write(client.root, "sub/widths.py", "WIDTH = 3\n")
    state, message = await client.status.wait(uri, {"done", "failed"}, since)
    # nn.Linear(4, 4): 16 weights + 4 biases, on the cell's line of the factory
    assert state == "done" and "20 params" in message, message
    line = cell_line(2, "def build_wide", NOTEBOOK_CELLS)
    assert lsp.labels_by_line(await lsp.hints(client, cells[1]))[line][0].startswith("20 params")
